// Compare: the config diff of the selected runs (`Store.diff`: one row per flattened config
// key, one column per run) with a "differences only" toggle, and their code.diffs: the
// unified diff of each against the first run's (`Store.code_diff`) and each run's own.
import { h, clear, get, url, table, errorBox, selectedRuns } from "../lib.js";

// A unified diff as lines coloured by their first character (text only, never HTML).
function diffView(text) {
  const pre = h("pre", { class: "diff" });
  for (const line of text.replace(/\n$/, "").split("\n")) {
    const c = line.startsWith("+++") || line.startsWith("---") ? "file" : line.startsWith("@@") ? "hunk"
      : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("#") ? "note" : "";
    pre.append(h("span", { class: c }, line + "\n"));
  }
  return pre;
}

export async function mount(root) {
  const diffsOnly = h("input", { type: "checkbox", id: "diff-only" });
  diffsOnly.checked = url.get("all") !== "1";
  const add = h("select", { id: "compare-add" }, h("option", { value: "" }, "+ add run…"));
  const chips = h("span", { class: "row", id: "compare-runs" });
  const info = h("span", { class: "sub", id: "diff-count" });
  const out = h("div", { id: "compare" });
  root.append(h("h1", {}, "Compare"),
    h("div", { class: "toolbar" }, chips, add, h("label", {}, diffsOnly, "differences only"), info), out);

  let names = [];
  try { const runs = await get("runs"); const at = runs.columns.indexOf("run_label"); names = runs.rows.map((r) => r[at]); }
  catch (e) { /* the picker stays empty; the diff still works for runs in the URL */ }

  function drawPicker() {
    clear(chips);
    const sel = selectedRuns();
    sel.forEach((r) => chips.append(h("span", { class: "pill chip", dataset: { run: r } }, `${r} `,
      h("button", { class: "small", title: "leave out", onclick: () => { url.set({ run: selectedRuns().filter((x) => x !== r) }); load(); } }, "×"))));
    while (add.options.length > 1) add.remove(1);
    for (const n of names) if (!sel.includes(n)) add.append(h("option", { value: n }, n));
  }

  async function load() {
    drawPicker();
    clear(out); info.textContent = "";
    const runs = selectedRuns();
    if (runs.length < 2) {
      out.append(h("div", { class: "empty" }, runs.length ? "add another run to compare with" : "select two or more runs (on the Runs page, or + add run)"));
      document.body.dataset.compared = "0";
      return;
    }
    let res;
    try { res = await get("diff", { run: runs, all: diffsOnly.checked ? null : "1" }); }
    catch (e) { out.append(errorBox(e)); document.body.dataset.compared = "error"; return; }
    const d = res.diff;
    const differsAt = d.columns.indexOf("differs");
    const nDiffer = differsAt >= 0 ? d.rows.filter((r) => r[differsAt]).length : d.rows.length;
    info.textContent = res.all ? `${d.rows.length} keys, ${nDiffer} differ` : `${d.rows.length} keys differ`;
    // A cell that differs from the first run's value in a row that differs is marked.
    const firstAt = d.columns.indexOf(res.runs[0]);
    const differs = (row) => differsAt < 0 || row[differsAt];
    const cell = (v, row) => {
      const changed = differs(row) && v !== row[firstAt];
      return v === null ? h("span", { class: "muted" + (changed ? " changed" : ""), title: "this run's config has no such key" }, "(missing)")
        : h("span", { class: "mono" + (changed ? " changed" : "") }, v);
    };
    const render = Object.fromEntries(res.runs.map((r) => [r, cell]));
    out.append(h("h2", {}, "Config"),
      h("div", { id: "diff-table" }, d.rows.length ? table(d, {
        hidden: new Set(["differs"]), tall: true, render, cls: { key: "name" },
        rowClass: (r) => differsAt >= 0 && r[differsAt] ? "differs" : "",
      }) : h("div", { class: "empty" }, "the configs are the same")));

    out.append(h("h2", {}, "code.diff"));
    const summary = h("div", { id: "code-summary", class: "card pad" },
      res.code.map((c) => h("div", {}, h("span", { class: "mono" }, c.run_name), ": ",
        c.text === null ? h("span", { class: "muted" }, "no code.diff") : `${c.lines} lines, ${c.bytes} bytes` + (c.truncated ? " (shown cut)" : ""))));
    out.append(summary, h("div", { id: "code-unified" }, res.code_diff ? diffView(res.code_diff) : h("div", { class: "empty" }, "no code.diff")));
    if (res.code_diff_truncated) out.append(h("div", { class: "sub" }, "the diff is longer than the page shows; `runstore diff --code` prints all of it"));
    for (const c of res.code) {
      if (c.text === null) continue;
      out.append(h("details", { class: "code-own", dataset: { run: c.run_name } }, h("summary", { class: "mono" }, `${c.run_name}/code.diff`), diffView(c.text)));
    }
    document.body.dataset.compared = String(runs.length);
  }

  add.addEventListener("change", () => { const r = add.value; add.value = ""; if (r) { url.set({ run: [...selectedRuns(), r] }); load(); } });
  diffsOnly.addEventListener("change", () => { url.set({ all: diffsOnly.checked ? null : "1" }); load(); });
  await load();
  return { refresh: load };
}
