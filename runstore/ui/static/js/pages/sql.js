// SQL: a read-only console over every table and view (the CLI's guard), the views' docs
// beside it, results as a table, downloads as CSV or Parquet.
import { h, clear, get, post, url, table, errorBox, download } from "../lib.js";

const EXAMPLE = "select run_name, max_kl_v1, steps_over, first_step_over\nfrom kl_health\nwhere flagged\norder by run_name";

export async function mount(root) {
  const editor = h("textarea", { id: "sql-editor", rows: 8, spellcheck: "false" });
  editor.value = url.get("q") || EXAMPLE;
  const run = h("button", { class: "primary", id: "sql-run" }, "Run");
  const csv = h("button", { id: "sql-csv" }, "CSV");
  const parquet = h("button", { id: "sql-parquet" }, "Parquet");
  const info = h("span", { class: "sub", id: "sql-info" });
  const out = h("div", { id: "sql-result" });
  const docs = h("div", { class: "docs card", id: "sql-docs" });
  root.append(h("div", { class: "sql-layout" },
    h("div", {},
      h("h1", {}, "SQL ", h("span", { class: "sub" }, "read-only · ", h("span", { class: "kbd" }, "Ctrl+Enter"), " runs")),
      editor,
      h("div", { class: "toolbar", style: { marginTop: "6px" } }, run, h("span", { class: "sub" }, "download:"), csv, parquet, info),
      out),
    docs));

  let last = null;
  async function execute() {
    const sql = editor.value;
    url.set({ q: sql });
    clear(out); info.textContent = "running…";
    try {
      const res = await post("sql", { sql });
      last = sql;
      info.textContent = `${res.row_count} row${res.row_count === 1 ? "" : "s"} · ${res.elapsed_s}s` +
        (res.truncated ? ` · showing the first ${res.rows.length} (download for all)` : "");
      let sort = null, desc = false;
      const draw = () => {
        clear(out);
        out.append(table(res, { tall: true, sort, desc, onSort: (i, d) => { sort = i; desc = d; draw(); } }));
      };
      draw();
    } catch (e) {
      info.textContent = "";
      out.append(errorBox(e));
    }
  }
  run.addEventListener("click", execute);
  editor.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); execute(); }
  });
  const save = (format) => async () => {
    try { await download("POST", "sql/download", { sql: editor.value, format }, `query.${format}`); }
    catch (e) { clear(out); out.append(errorBox(e)); }
  };
  csv.addEventListener("click", save("csv"));
  parquet.addEventListener("click", save("parquet"));

  try {
    const { views, tables } = await get("views");
    docs.append(h("div", { class: "card pad", style: { border: "0" } }, h("b", {}, "Views"),
      h("span", { class: "sub" }, " · click a name to query it")));
    const insert = (name) => { editor.value = `select *\nfrom ${name}\nlimit 100`; execute(); };
    for (const v of views) {
      docs.append(h("details", {},
        h("summary", {}, h("a", { href: "#", onclick: (e) => { e.preventDefault(); insert(v.name); } }, v.name),
          h("span", { class: "kind" }, "view")),
        h("div", { class: "desc" }, v.description),
        h("dl", {}, v.columns.map(([c, doc]) => [h("dt", {}, c), h("dd", {}, doc)]))));
    }
    docs.append(h("div", { class: "card pad", style: { border: "0" } }, h("b", {}, "Tables")));
    for (const t of tables) {
      docs.append(h("details", {},
        h("summary", {}, h("a", { href: "#", onclick: (e) => { e.preventDefault(); insert(t.name); } }, t.name),
          h("span", { class: "kind" }, "table")),
        h("dl", {}, t.columns.map(([c, type]) => [h("dt", {}, c, h("span", { class: "kind" }, type))]))));
    }
  } catch (e) { docs.append(errorBox(e)); }

  if (url.get("q")) await execute();
  return { refresh: async () => { if (last !== null) await execute(); } };
}
