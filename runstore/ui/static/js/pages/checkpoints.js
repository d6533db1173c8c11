// Checkpoints: the latest and the best checkpoint of each run, paths copyable.
import { h, clear, get, url, table, errorBox, selectedRuns, copyButton } from "../lib.js";

function pathCell(v) {
  if (v === null) return h("span", { class: "muted" }, "–");
  return h("span", { class: "mono" }, v, copyButton(v));
}

export async function mount(root) {
  const only = h("input", { type: "checkbox", id: "ckpt-only-selected" });
  only.checked = url.get("only") === "1";
  const out = h("div", { id: "ckpt-tables" });
  root.append(h("h1", {}, "Checkpoints"),
    h("div", { class: "toolbar" }, h("label", {}, only, "only selected runs"),
      h("span", { class: "sub" }, "best = highest 10-step reward average (reward_trends.reward_ma10) before the checkpoint's batch")),
    out);

  async function load() {
    let data;
    try { data = await get("checkpoints"); } catch (e) { clear(out); out.append(errorBox(e)); return; }
    clear(out);
    const sel = new Set(selectedRuns());
    const keep = (t) => {
      const at = t.columns.indexOf("run_label");
      return { ...t, rows: only.checked && sel.size ? t.rows.filter((r) => sel.has(r[at])) : t.rows };
    };
    const paths = ["state_path", "sampler_path", "latest_sampler_path", "final_state_path",
      "final_sampler_path", "best_state_path", "best_sampler_path"];
    const render = Object.fromEntries(paths.map((p) => [p, pathCell]));
    const rowClass = (t) => { const at = t.columns.indexOf("run_label"); return (r) => sel.has(r[at]) ? "selected" : ""; };
    const latest = keep(data.latest), best = keep(data.best);
    out.append(h("h2", {}, `Latest (${latest.rows.length})`),
      table(latest, { hidden: new Set(["run_id", "run_name"]), label: (c) => (c === "run_label" ? "run" : c), render, cls: { run_label: "name" }, rowClass: rowClass(latest), sort: latest.columns.indexOf("run_label") }),
      h("h2", {}, `Best by reward (${best.rows.length})`),
      best.rows.length ? table(best, { hidden: new Set(["run_id"]), label: (c) => (c === "run_label" ? "run" : c), render, cls: { run_label: "name" }, rowClass: rowClass(best), sort: best.columns.indexOf("run_label") })
        : h("div", { class: "empty" }, "no run logs env/all/reward/total before a checkpoint"));
  }
  only.addEventListener("change", () => { url.set({ only: only.checked ? "1" : null }); load(); });
  await load();
  return { refresh: load };
}
