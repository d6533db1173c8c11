// Small helpers every page uses: DOM building, the JSON API, URL state, number formatting,
// a sortable dense table, lazy plotly. Text always goes in through textContent, never HTML.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// A metric key (or any path-like name) as text that wraps after its separators (`/`, `_`,
// `.`, `:`) rather than inside a word: the pieces with a <wbr> between them.
export function breakable(text) {
  return String(text).split(/(?<=[/_.:|])/).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));
}

export function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

export class ApiError extends Error {}

async function answer(resp) {
  let body = null;
  try { body = await resp.json(); } catch (e) { /* not JSON */ }
  if (!resp.ok) throw new ApiError((body && body.error) || `HTTP ${resp.status}`);
  return body;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v === null || v === undefined || v === "") continue;
    if (Array.isArray(v)) v.forEach((x) => q.append(k, x)); else q.append(k, v);
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

export async function get(path, params) {
  return answer(await fetch("/api/" + path + query(params), { credentials: "same-origin" }));
}

export async function post(path, body) {
  return answer(await fetch("/api/" + path, {
    method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  }));
}

export function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: filename });
  document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 5000);
}

export async function download(method, path, paramsOrBody, filename) {
  const resp = method === "POST"
    ? await fetch("/api/" + path, { method: "POST", credentials: "same-origin",
        headers: { "content-type": "application/json" }, body: JSON.stringify(paramsOrBody) })
    : await fetch("/api/" + path + query(paramsOrBody), { credentials: "same-origin" });
  if (!resp.ok) return answer(resp);
  const disposition = resp.headers.get("content-disposition") || "";
  const m = /filename="([^"]+)"/.exec(disposition);
  saveBlob(await resp.blob(), m ? m[1] : filename);
}

// URL state: every page keeps what it shows in the query string (shareable links).
export const url = {
  params() { return new URLSearchParams(location.search); },
  get(name, dflt = null) { const v = this.params().get(name); return v === null ? dflt : v; },
  all(name) { return this.params().getAll(name); },
  set(changes, { push = false } = {}) {
    const p = this.params();
    for (const [k, v] of Object.entries(changes)) {
      p.delete(k);
      if (v === null || v === undefined || v === "" || v === false) continue;
      if (Array.isArray(v)) v.forEach((x) => p.append(k, x)); else p.append(k, String(v));
    }
    const s = p.toString();
    const next = location.pathname + (s ? "?" + s : "");
    if (next !== location.pathname + location.search) {
      history[push ? "pushState" : "replaceState"](null, "", next);
      window.dispatchEvent(new Event("runstore:url"));
    }
  },
};

export function selectedRuns() { return url.all("run"); }

export function fmt(v, type) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") {
    if (Number.isInteger(v) && !(type || "").startsWith("double") && !(type || "").startsWith("float")) return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3).replace(/\.?0+e/, "e");
    return String(Number(v.toPrecision(6)));
  }
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

export function isNumericType(t) {
  return /^(int|uint|double|float|decimal|halffloat|bigint|smallint|tinyint|hugeint)/i.test(t || "");
}

// A dense table over {columns, types, rows}. Options: sort (column index), desc, onSort,
// render (col -> (value,row) -> Node|string), cls (col -> class), rowClass(row), onRow(row),
// select ({isSelected(row), toggle(row, on)}), hidden (set of column names).
export function table(data, opts = {}) {
  const { columns, types = [], rows } = data;
  const hidden = opts.hidden || new Set();
  const visible = columns.map((c, i) => i).filter((i) => !hidden.has(columns[i]));
  let sortCol = opts.sort ?? null, desc = !!opts.desc;
  const sorted = rows.slice();
  if (sortCol !== null && sortCol >= 0) {
    const cmp = (a, b) => {
      const x = a[sortCol], y = b[sortCol];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      if (typeof x === "number" && typeof y === "number") return x - y;
      return String(x).localeCompare(String(y), undefined, { numeric: true });
    };
    sorted.sort((a, b) => {
      const c = cmp(a, b);
      const nullish = (a[sortCol] ?? null) === null || (b[sortCol] ?? null) === null;
      return desc && !nullish ? -c : c;
    });
  }
  const head = h("tr", {},
    opts.select ? h("th", { class: "check" }, opts.select.header ? opts.select.header() : "") : null,
    visible.map((i) => h("th", {
      class: ["sortable", isNumericType(types[i]) ? "num" : "", i === sortCol ? "sorted" : "",
        i === sortCol && desc ? "desc" : ""].join(" "),
      title: opts.titles ? opts.titles[columns[i]] : null,
      onclick: () => opts.onSort && opts.onSort(i, i === sortCol ? !desc : isNumericType(types[i])),
    }, opts.label ? opts.label(columns[i]) : columns[i])));
  const body = h("tbody");
  for (const row of sorted) {
    const tr = h("tr", { class: [opts.rowClass ? opts.rowClass(row) : "", opts.onRow ? "clickable" : ""].join(" ") });
    if (opts.select) {
      const cb = h("input", { type: "checkbox" });
      cb.checked = opts.select.isSelected(row);
      cb.addEventListener("click", (e) => { e.stopPropagation(); opts.select.toggle(row, cb.checked); });
      tr.append(h("td", { class: "check" }, cb));
    }
    for (const i of visible) {
      const v = row[i];
      const custom = opts.render && opts.render[columns[i]];
      const content = custom ? custom(v, row) : fmt(v, types[i]);
      // A custom cell of a numeric column (a pill, a link) keeps the header's alignment.
      const cls = [isNumericType(types[i]) ? (custom ? "right" : "num") : "", v === null ? "null" : "",
        opts.cls && opts.cls[columns[i]] ? opts.cls[columns[i]] : ""].join(" ");
      tr.append(h("td", { class: cls }, v === null && !custom ? "–" : content));
    }
    if (opts.onRow) tr.addEventListener("click", () => opts.onRow(row));
    body.append(tr);
  }
  return h("div", { class: "table-wrap" + (opts.tall ? " tall" : "") },
    h("table", { class: "data" }, h("thead", {}, head), body));
}

let plotlyPromise = null;
export function plotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyPromise) {
    plotlyPromise = new Promise((resolve, reject) => {
      const s = h("script", { src: "/static/vendor/plotly.min.js" });
      s.onload = () => resolve(window.Plotly);
      s.onerror = () => reject(new Error("could not load plotly.js"));
      document.head.append(s);
    });
  }
  return plotlyPromise;
}

export const PALETTE = ["#2f6fd1", "#e0532f", "#1f9e6e", "#8e5bd0", "#d19a1f", "#1aa3b8",
  "#c8447f", "#5b8c2a", "#7a5230", "#4a5bd6", "#d66a1a", "#2a8f8f", "#a63ab5", "#6b7b1f",
  "#b5482e", "#3d7ab8"];
export function colorFor(i) { return PALETTE[i % PALETTE.length]; }

export function toast(text) {
  const el = document.getElementById("toast");
  el.textContent = text; el.hidden = false;
  clearTimeout(toast.t); toast.t = setTimeout(() => { el.hidden = true; }, 1800);
}

export function copyButton(text) {
  return h("button", { class: "copy small", title: "copy", onclick: async (e) => {
    e.stopPropagation();
    try { await navigator.clipboard.writeText(text); toast("copied"); }
    catch (err) {
      const ta = h("textarea", {}, text); document.body.append(ta); ta.select();
      document.execCommand("copy"); ta.remove(); toast("copied");
    }
  } }, "copy");
}

export function errorBox(e) { return h("div", { class: "error" }, e && e.message ? e.message : String(e)); }

export function debounce(fn, ms) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}

// The run a single-run page looks at: ?focus=, else the first selected run, else the first
// run of the store that has what the page shows (`candidates`).
export function focusRun(candidates) {
  const f = url.get("focus");
  if (f) return f;
  const sel = selectedRuns().find((r) => candidates.includes(r));
  return sel || candidates[0] || null;
}

export function runPicker(names, current, onChange) {
  const selected = new Set(selectedRuns());
  const sel = h("select", { id: "run-picker", onchange: () => onChange(sel.value) });
  const ordered = [...names.filter((n) => selected.has(n)), ...names.filter((n) => !selected.has(n))];
  for (const n of ordered) {
    const o = h("option", { value: n }, (selected.has(n) ? "★ " : "") + n);
    if (n === current) o.selected = true;
    sel.append(o);
  }
  return sel;
}
