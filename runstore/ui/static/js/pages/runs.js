// Runs: every run with its summary; config keys as extra columns; filter by text or by a SQL
// condition (`runs --where`); sort; select runs for the other pages.
import { h, clear, get, url, table, errorBox, selectedRuns, debounce, query } from "../lib.js";

// Hidden to keep the table one screen wide: the step count is last_step + 1 for most runs,
// and the Checkpoints page has the checkpoint names.
// run_name too: the run is shown by its run_label (the name, with a run_id prefix when two
// runs share it), which is also what the other pages are sent as `run=`.
const HIDDEN = new Set(["run_id", "run_name", "n_steps", "last_checkpoint"]);
const LABELS = { run_label: "run", model_name: "model", learning_rate: "lr",
  last_reward_ma10: "reward (ma10)", best_reward: "best reward", kl_flagged: "KL", last_step: "last step",
  n_checkpoints: "ckpts", last_checkpoint: "last ckpt", n_steps: "steps", max_kl: "max KL",
  rules: "rules firing" };

// Display order: the name, the config columns the user added (where they are seen), then
// what tells a run's health first; columns the API adds later come last.
const ORDER = ["run_label", "status", "kl_flagged", "rules", "kind", "model_name", "learning_rate",
  "last_step", "last_reward_ma10", "best_reward", "max_kl", "n_checkpoints"];

function reorder(res) {
  const idx = res.columns.map((c, i) => i);
  const rank = (i) => {
    const c = res.columns[i];
    if (c === "run_label") return -2;
    if (c.startsWith("config.")) return -1;
    const at = ORDER.indexOf(c);
    return at >= 0 ? at : ORDER.length;
  };
  const order = idx.slice().sort((a, b) => rank(a) - rank(b) || a - b);
  const numeric = (i) => res.types[i] === "config" && res.rows.every((r) => r[i] === null || typeof r[i] === "number");
  return { ...res, columns: order.map((i) => res.columns[i]),
    types: order.map((i) => numeric(i) ? "double" : res.types[i]),
    rows: res.rows.map((r) => order.map((i) => r[i])) };
}

export async function mount(root) {
  const q = h("input", { type: "search", id: "runs-filter", placeholder: "filter by text (any column)",
    value: url.get("q", ""), size: 28 });
  const where = h("input", { type: "text", id: "runs-where", placeholder: "SQL condition, e.g. best_reward > 0.5 and not kl_flagged",
    value: url.get("where", ""), size: 58, class: "mono" });
  const addKey = h("select", { id: "runs-config" }, h("option", { value: "" }, "+ config column…"));
  const info = h("span", { class: "sub", id: "runs-count" });
  const actions = h("span", { class: "row" });
  const out = h("div", { id: "runs-table" });
  const msg = h("div");
  root.append(h("h1", {}, "Runs"),
    h("div", { class: "toolbar" }, q, where, addKey, info, h("span", { class: "grow" }), actions),
    msg, out);

  let data = null;
  let keysLoaded = false;

  async function loadKeys() {
    if (keysLoaded) return;
    try {
      const keys = await get("config-keys");
      for (const [key, n] of keys.rows) addKey.append(h("option", { value: key }, `${key}  (${n} runs)`));
      keysLoaded = true;
    } catch (e) { /* the table still works without the picker */ }
  }

  async function load() {
    clear(msg);
    try {
      data = reorder(await get("runs", { where: url.get("where"), config: url.all("col") }));
    } catch (e) {
      msg.append(errorBox(e));
      data = null;
    }
    if (data && data.rules_error) msg.append(h("div", { class: "error" }, "rules not checked: " + data.rules_error));
    draw();
  }

  function draw() {
    clear(out);
    clear(actions);
    if (!data) return;
    const text = url.get("q", "").toLowerCase();
    const rows = text ? data.rows.filter((r) => r.some((v) => v !== null && String(v).toLowerCase().includes(text))) : data.rows;
    const nameAt = data.columns.indexOf("run_label");
    const selected = new Set(selectedRuns());
    info.textContent = `${rows.length} of ${data.rows.length} runs` + (selected.size ? ` · ${selected.size} selected` : "");
    const sortName = url.get("sort", "run_label");
    const sortAt = data.columns.indexOf(sortName);
    const setSel = (names) => url.set({ run: names });
    const allVisible = rows.map((r) => r[nameAt]);
    const header = () => {
      const cb = h("input", { type: "checkbox", title: "select all shown", id: "runs-select-all" });
      cb.checked = allVisible.length > 0 && allVisible.every((n) => selected.has(n));
      cb.addEventListener("click", () => {
        const next = new Set(selected);
        for (const n of allVisible) cb.checked ? next.add(n) : next.delete(n);
        setSel([...next]); draw();
      });
      return cb;
    };
    out.append(table({ ...data, rows }, {
      hidden: HIDDEN, tall: true,
      sort: sortAt >= 0 ? sortAt : nameAt, desc: url.get("desc") === "1",
      onSort: (i, desc) => { url.set({ sort: data.columns[i], desc: desc ? "1" : null }); draw(); },
      label: (c) => c.startsWith("config.") ? h("span", {}, c.slice(7), " ",
        h("button", { class: "small", title: "remove column", onclick: (e) => { e.stopPropagation();
          url.set({ col: url.all("col").filter((k) => k !== c.slice(7)) }); load(); } }, "×")) : (LABELS[c] || c),
      rowClass: (r) => selected.has(r[nameAt]) ? "selected" : "",
      cls: { run_label: "name" },
      select: {
        header,
        isSelected: (r) => selected.has(r[nameAt]),
        toggle: (r, on) => {
          const next = new Set(selectedRuns());
          on ? next.add(r[nameAt]) : next.delete(r[nameAt]);
          setSel([...next]); draw();
        },
      },
      render: {
        status: (v) => v === null ? "–" : h("span", { class: "pill " + v }, v),
        rules: (v) => v === null ? h("span", { class: "muted", title: data.rules_error || "" }, "?")
          : v.length ? h("a", { href: "/health" + query({ run: selectedRuns(), only: null }), "data-nav": "1", title: "see the Health page" },
            v.map((r) => h("span", { class: "pill flag rule" }, r))) : h("span", { class: "muted" }, "none"),
        kl_flagged: (v) => v === null ? h("span", { class: "muted" }, "–") : v ? h("span", { class: "pill flag", title: "kl_health.flagged: KL above the threshold at some step" }, "flagged") : h("span", { class: "pill ok" }, "ok"),
      },
    }));
    const sel = selectedRuns();
    const qs = new URLSearchParams(); sel.forEach((r) => qs.append("run", r));
    for (const [page, label] of [["charts", "Charts"], ["compare", "Compare"], ["timing", "Timing"], ["rollouts", "Rollouts"], ["checkpoints", "Checkpoints"]]) {
      actions.append(h("a", { href: `/${page}?${qs}`, "data-nav": "1", class: sel.length ? "" : "muted" },
        `${label} →`));
    }
  }

  q.addEventListener("input", debounce(() => { url.set({ q: q.value }); draw(); }, 120));
  where.addEventListener("keydown", (e) => { if (e.key === "Enter") { url.set({ where: where.value.trim() }); load(); } });
  where.addEventListener("change", () => { url.set({ where: where.value.trim() }); load(); });
  addKey.addEventListener("focus", loadKeys, { once: true });
  addKey.addEventListener("mousedown", loadKeys, { once: true });
  addKey.addEventListener("change", () => {
    const k = addKey.value; addKey.value = "";
    if (k && !url.all("col").includes(k)) { url.set({ col: [...url.all("col"), k] }); load(); }
  });
  loadKeys();
  await load();
  return { refresh: load };
}
