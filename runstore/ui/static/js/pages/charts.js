// Charts: a searchable list of every metric key (/api/keys: `Store.keys`), one panel per
// chosen key, the selected runs overlaid (every run when none is selected); x by step, wall
// time, tokens or cost (the last three: runs on the common grid of `Store.compare`); a smoothing slider (the debiased EMA of `compare`, raw kept faint beside it); log-y;
// group by config keys or `auto` (seeds) → the mean line with a std or min–max band
// (`Store.compare`); KL panels mark the threshold and the points over it; `step=` marks one
// step (with x=time, at the wall time each run logged it: /api/series' step_marks). Lines come downsampled from /api/series (min/max buckets, so spikes survive); zooming
// asks again for the visible range. Every choice lives in the query string.
import { h, clear, get, url, errorBox, plotly, selectedRuns, colorFor, debounce, breakable } from "../lib.js";

// Group keys that are run columns (analysis.groups.RUN_COLUMNS), offered before config keys.
const RUN_COLUMNS = ["learning_rate", "model_name", "kind"];

function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }
const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;"); // plotly hover text is HTML

function rgba(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}

export async function mount(root) {
  // plotly.js (megabytes of script to evaluate) loads while the page asks its questions, so
  // the first answers are in when it is ready; each panel waits for it before drawing.
  const plotlyReady = plotly();
  plotlyReady.catch(() => {}); // a failed load is reported where a panel awaits it
  const status = await get("status");
  // The server says which keys are KL, what the threshold is and which panels show first
  // (runstore.families, the kl_threshold setting); the points over it come marked with each
  // answer (over_steps / over_x), so nothing here decides what is over.
  const klKeys = new Set(status.kl_keys);
  const threshold = status.kl_threshold;
  const DEFAULT_METRICS = status.default_metrics;

  // -- controls ------------------------------------------------------------------------
  const keyFilter = h("input", { type: "search", id: "key-filter", class: "mono", placeholder: "search metric keys…", size: 30 });
  const keyList = h("div", { class: "key-list", id: "key-list" });
  const keyCount = h("div", { class: "sub", id: "key-count" });
  // x: the step, or (runs aligned on a common grid by Store.compare) wall time, or what the
  // run had spent by the step: tokens (cumulative sampled + trained) or cost (USD).
  const X_TITLES = { step: "step", time: "wall time since the run's first step (s)",
    tokens: "tokens sampled + trained", cost: "cost (USD)" };
  const X_UNITS = { step: "step", time: "s", tokens: "tokens", cost: "USD" };
  const xSel = h("select", { id: "x-axis" }, h("option", { value: "step" }, "step"), h("option", { value: "time" }, "wall time"),
    h("option", { value: "tokens" }, "tokens"), h("option", { value: "cost" }, "cost (USD)"));
  xSel.value = X_TITLES[url.get("x")] ? url.get("x") : "step";
  const groupSel = h("select", { id: "group-add" }, h("option", { value: "" }, "+ group by…"),
    h("option", { value: "auto" }, "auto (seeds)"), RUN_COLUMNS.map((k) => h("option", { value: k }, k)));
  const groupChips = h("span", { class: "row", id: "group-chips" });
  const bandSel = h("select", { id: "band" }, h("option", { value: "std" }, "mean ± std"), h("option", { value: "minmax" }, "min–max"));
  bandSel.value = url.get("band") === "minmax" ? "minmax" : "std";
  const smooth = h("input", { type: "range", id: "smooth", min: 0, max: 0.99, step: 0.01, value: url.get("smooth", "0") });
  const smoothLabel = h("span", { class: "mono", id: "smooth-label" });
  const logy = h("input", { type: "checkbox", id: "logy" }); logy.checked = url.get("logy") === "1";
  const legend = h("div", { class: "legend", id: "chart-legend" });
  const panels = h("div", { class: "panels", id: "panels" });
  const stepNote = h("span", { class: "sub", id: "step-note" });
  root.append(h("h1", {}, "Charts"),
    h("div", { class: "toolbar" },
      h("label", {}, "x", xSel), h("label", {}, "group", groupSel), groupChips, h("label", { id: "band-label" }, "band", bandSel),
      h("label", {}, "smoothing", smooth, smoothLabel), h("label", {}, logy, "log y"), stepNote,
      h("span", { class: "sub" }, selectedRuns().length ? `${selectedRuns().length} selected runs` : "all runs (select some on the Runs page)")),
    h("div", { class: "charts-layout" },
      h("div", { class: "card keys" }, keyFilter, keyCount, keyList),
      h("div", {}, legend, panels)));

  const metrics = () => { const m = url.all("metric"); return m.length ? m : DEFAULT_METRICS; };
  const groupBy = () => url.all("group_by").filter((g) => g);
  const weight = () => parseFloat(smooth.value) || 0;
  const markedStep = () => { const v = parseInt(url.get("step"), 10); return Number.isFinite(v) ? v : null; };
  const byTime = () => xSel.value === "time";
  const showSmooth = () => { smoothLabel.textContent = weight() ? weight().toFixed(2) : "off"; };
  showSmooth();
  const colors = new Map();
  const color = (name) => { if (!colors.has(name)) colors.set(name, colorFor(colors.size)); return colors.get(name); };
  const panelState = new Map(); // metric -> {el, plot, note, range}

  function drawControls() {
    clear(groupChips);
    for (const g of groupBy()) {
      groupChips.append(h("span", { class: "pill chip", dataset: { key: g } }, g === "auto" ? "auto (seeds)" : g, " ",
        h("button", { class: "small", title: "stop grouping by this", onclick: () => { url.set({ group_by: groupBy().filter((k) => k !== g) }); drawControls(); drawAll(); } }, "×")));
    }
    document.getElementById("band-label").style.display = groupBy().length ? "" : "none";
    const s = markedStep();
    clear(stepNote);
    if (s !== null) stepNote.append(`step ${s} marked${byTime() ? " (when each run logged it)" : ""} `, h("button", { class: "small", onclick: () => { url.set({ step: null }); drawControls(); drawAll(); } }, "×"));
  }

  // -- the metric key list ---------------------------------------------------------------
  let keyRows = null;
  async function loadKeys() {
    try {
      const res = await get("keys", { run: selectedRuns() });
      keyRows = res.rows.map((r) => Object.fromEntries(res.columns.map((c, i) => [c, r[i]])));
    } catch (e) { clear(keyList); keyList.append(errorBox(e)); return; }
    drawKeys();
  }
  function drawKeys() {
    if (!keyRows) return;
    const q = keyFilter.value.trim().toLowerCase();
    const chosen = new Set(metrics());
    // The keys drawn come first, then the others, each in key order.
    const shown = keyRows.filter((k) => !q || k.key.toLowerCase().includes(q))
      .sort((a, b) => (chosen.has(b.key) - chosen.has(a.key)) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    keyCount.textContent = `${shown.length} of ${plural(keyRows.length, "key")}`;
    clear(keyList);
    for (const k of shown.slice(0, 500)) {
      const on = chosen.has(k.key);
      keyList.append(h("div", { class: "key" + (on ? " on" : ""), dataset: { key: k.key },
        title: `${k.key}\n${plural(k.n_runs, "run")}, ${k.n_points} points, steps ${k.first_step ?? "–"}–${k.last_step ?? "–"} (${k.type})`,
        onclick: () => toggleMetric(k.key) },
      h("span", { class: "mono" }, breakable(k.key)), h("span", { class: "muted" }, String(k.n_runs))));
    }
    if (shown.length > 500) keyList.append(h("div", { class: "muted" }, `… ${shown.length - 500} more: refine the search`));
  }
  function toggleMetric(key) {
    const now = metrics();
    url.set({ metric: now.includes(key) ? now.filter((m) => m !== key) : [...now, key] });
    drawKeys(); drawAll();
  }
  keyFilter.addEventListener("input", debounce(drawKeys, 80));
  keyFilter.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    const q = keyFilter.value.trim();
    const exact = keyRows && keyRows.find((k) => k.key === q);
    const first = keyList.querySelector(".key");
    const key = exact ? exact.key : first ? first.dataset.key : null;
    if (key && !metrics().includes(key)) toggleMetric(key);
  });

  // -- one panel -------------------------------------------------------------------------
  function runTraces(res, isKL, w, over) {
    const traces = [];
    for (const line of res.lines) {
      const c = color(line.run_label);
      traces.push({ type: "scatter", mode: "lines", x: line.steps, y: line.values, name: line.run_label,
        line: { color: c, width: w ? 1 : 1.6 }, opacity: w ? 0.25 : 1, connectgaps: false,
        hovertemplate: `${esc(line.run_label)}<br>step %{x}: %{y:.6g}<extra></extra>`, meta: { run: line.run_label, kind: "raw" } });
      if (w && line.smoothed) {
        traces.push({ type: "scatter", mode: "lines", x: line.smooth_steps, y: line.smoothed, name: line.run_label + " (smoothed)",
          line: { color: c, width: 1.8 }, hovertemplate: `${esc(line.run_label)} (smoothed)<br>step %{x}: %{y:.6g}<extra></extra>`, meta: { run: line.run_label, kind: "smoothed" } });
      }
      if (isKL) {
        (line.over_steps || []).forEach((s, i) => { const v = line.over_values[i]; over.x.push(s); over.y.push(v); over.text.push(line.run_label + (v === "Infinity" ? " (+Infinity)" : "")); });
      }
    }
    return traces;
  }

  function groupTraces(res, isKL, w, over) {
    const traces = [];
    const xname = X_UNITS[res.x] || "step";
    for (const g of res.groups) {
      const c = color(g.group);
      const label = esc(g.group);
      const bandOf = (prefix) => {
        const xs = g[prefix + "x"], lo = g[prefix + "lo"], hi = g[prefix + "hi"];
        return [
          { type: "scatter", mode: "lines", x: xs, y: lo, line: { width: 0, color: c }, hoverinfo: "skip", showlegend: false,
            connectgaps: false, meta: { group: g.group, kind: prefix ? "smooth-lo" : "band-lo" } },
          { type: "scatter", mode: "lines", x: xs, y: hi, line: { width: 0, color: c }, fill: "tonexty", fillcolor: rgba(c, 0.16),
            hoverinfo: "skip", showlegend: false, connectgaps: false, meta: { group: g.group, kind: prefix ? "smooth-hi" : "band-hi" } },
        ];
      };
      if (!w) traces.push(...bandOf(""));
      traces.push({ type: "scatter", mode: "lines", x: g.x, y: g.mean, name: g.group, line: { color: c, width: w ? 1 : 1.8 }, opacity: w ? 0.3 : 1,
        connectgaps: false, customdata: g.n,
        hovertemplate: `${label}<br>${xname} %{x}: mean %{y:.6g} over %{customdata} run(s)<extra></extra>`, meta: { group: g.group, kind: "mean" } });
      if (w && g.smooth_x) {
        traces.push(...bandOf("smooth_"));
        traces.push({ type: "scatter", mode: "lines", x: g.smooth_x, y: g.smooth_mean, name: g.group + " (smoothed)", line: { color: c, width: 2 },
          connectgaps: false, hovertemplate: `${label} (smoothed)<br>${xname} %{x}: %{y:.6g}<extra></extra>`, meta: { group: g.group, kind: "smoothed" } });
      }
      if (isKL && g.over_x) g.over_x.forEach((s, i) => { over.x.push(s); over.y.push(g.over_y[i]); over.text.push(g.group); });
    }
    return traces;
  }

  async function drawPanel(metric, st) {
    const { plot, note } = st;
    const params = { metric, run: selectedRuns(), smooth: weight() || null, x: xSel.value === "step" ? null : xSel.value,
      group_by: groupBy(), band: groupBy().length ? bandSel.value : null, mark_step: byTime() ? markedStep() : null };
    if (st.range) {  // steps are whole; seconds, tokens and dollars are not
      const whole = xSel.value === "step";
      params.step_min = whole ? Math.floor(st.range[0]) : st.range[0];
      params.step_max = whole ? Math.ceil(st.range[1]) : st.range[1];
    }
    let res;
    try { res = await get("series", params); } catch (e) { clear(plot); plot.dataset.lines = "0"; plot.append(errorBox(e)); return []; }
    const w = weight();
    const isKL = klKeys.has(metric);
    const over = { x: [], y: [], text: [] };
    const isGrouped = Array.isArray(res.groups); // group_by or an x but step: the lines of Store.compare
    const traces = isGrouped ? groupTraces(res, isKL, w, over) : runTraces(res, isKL, w, over);
    if (isKL && over.x.length) {
      traces.push({ type: "scatter", mode: "markers", x: over.x, y: over.y.map((v) => typeof v === "number" ? v : threshold * 10), text: over.text,
        marker: { color: "#c9352b", size: 6, symbol: "x" }, name: "over threshold",
        hovertemplate: "%{text}<br>%{x}: %{y:.4g} > " + threshold + "<extra></extra>", meta: { kind: "flagged" } });
    }
    const shapes = isKL ? [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: threshold, y1: threshold, line: { color: "#c9352b", dash: "dash", width: 1 } }] : [];
    const mark = markedStep();
    // The marked step's x: the step itself, or with x=time each run's time at that step.
    const marks = mark === null ? [] : res.x === "time" ? (res.step_marks || []).map((m) => ({ x: m.time_s, run: m.run_label }))
      : [{ x: mark, run: null }];
    for (const m of marks) {
      shapes.push({ type: "line", yref: "paper", y0: 0, y1: 1, x0: m.x, x1: m.x, name: m.run === null ? "step" : `step ${mark}: ${m.run}`,
        line: { color: "#8e5bd0", dash: "dot", width: 1.5 } });
    }
    const markAt = marks.length ? Math.min(...marks.map((m) => m.x)) : null;
    const layout = {
      margin: { l: 52, r: 10, t: 6, b: 30 }, showlegend: false, plot_bgcolor: "#fff", hovermode: "closest",
      xaxis: { title: { text: X_TITLES[res.x] || "step" }, zeroline: false, ...(st.range ? { range: st.range } : {}) },
      yaxis: { type: logy.checked ? "log" : "linear", zeroline: false }, shapes,
      annotations: [...(isKL ? [{ xref: "paper", x: 1, y: threshold, yref: "y", text: `threshold ${threshold}`, showarrow: false, xanchor: "right", yanchor: "bottom", font: { size: 10, color: "#c9352b" } }] : []),
        ...(markAt !== null ? [{ x: markAt, xref: "x", y: 1, yref: "paper", text: `step ${mark}`, showarrow: false, xanchor: "left", yanchor: "top", font: { size: 10, color: "#8e5bd0" } }] : [])],
    };
    let P;
    try { P = await plotlyReady; } catch (e) { clear(plot); plot.dataset.lines = "0"; plot.append(errorBox(e)); return []; }
    st.ignoreRelayout = true;
    await P.react(plot, traces, layout, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] });
    st.ignoreRelayout = false;
    let text;
    if (isGrouped) {
      const pts = res.groups.reduce((a, g) => a + g.x.length, 0);
      const down = res.groups.some((g) => g.n_points > g.x.length);
      text = `${plural(res.groups.length, res.group_by ? "group" : "run")} · ${pts} points` + (down ? ` (downsampled, ${res.max_points} per line)` : "") +
        (res.group_by ? ` · band ${res.band === "minmax" ? "min–max" : "mean ± std"}` : "");
    } else {
      const pts = res.lines.reduce((a, l) => a + l.steps.length, 0);
      const down = res.lines.some((l) => l.n_points > l.steps.length);
      const nInf = res.lines.reduce((a, l) => a + l.n_inf, 0);
      text = `${plural(res.lines.length, "run")} · ${pts} points drawn` + (down ? ` (min/max of ${res.max_points}-point buckets per line)` : "") +
        (nInf ? ` · ${nInf} ±Infinity` : "");
    }
    if (res.x === "time" && mark !== null) {
      const drawn = new Set(res.groups.flatMap((g) => g.runs));
      const missing = [...drawn].filter((r) => !marks.some((m) => m.run === r)).length;
      if (missing) text += ` · ${plural(missing, "run")} without a time at step ${mark}`;
    }
    note.textContent = text + (isKL && over.x.length ? ` · ${plural(new Set(over.text).size, isGrouped && res.group_by ? "group" : "run")} over ${threshold}` : "");
    plot.dataset.lines = String(isGrouped ? res.groups.length : res.lines.length);
    plot.dataset.drawn = String(Date.now());
    return isGrouped ? res.groups.map((g) => ({ name: g.group, runs: g.runs })) : res.lines.map((l) => ({ name: l.run_label, runs: [l.run_label] }));
  }

  function drawLegend(entries) {
    clear(legend);
    for (const e of entries) {
      legend.append(h("span", { class: "entry", title: e.runs.join("\n"), dataset: { name: e.name } }, h("span", { class: "sw", style: { background: color(e.name) } }), e.name,
        e.runs.length > 1 || (e.runs.length === 1 && e.runs[0] !== e.name) ? h("span", { class: "muted" }, ` (${plural(e.runs.length, "run")})`) : null));
    }
  }

  async function drawAll() {
    const wanted = metrics();
    for (const [m, st] of panelState) if (!wanted.includes(m)) { st.el.remove(); panelState.delete(m); }
    const entries = new Map();
    await Promise.all(wanted.map(async (m) => {
      let st = panelState.get(m);
      if (!st) {
        const plot = h("div", { class: "plot" });
        const note = h("span", { class: "note" });
        const close = h("button", { class: "small", title: "remove panel", onclick: () => toggleMetric(m) }, "×");
        const el = h("div", { class: "panel", dataset: { metric: m } }, h("div", { class: "head" }, h("span", { class: "title" }, m), note, h("span", { class: "grow" }), close), plot);
        st = { el, plot, note, range: null, ignoreRelayout: false };
        panelState.set(m, st);
        panels.append(el);
        const refine = debounce(() => drawPanel(m, st), 250);
        st.bind = () => plot.on("plotly_relayout", (ev) => {
          if (st.ignoreRelayout) return;
          if (ev["xaxis.autorange"]) { st.range = null; refine(); }
          else if (ev["xaxis.range[0]"] !== undefined) { st.range = [ev["xaxis.range[0]"], ev["xaxis.range[1]"]]; refine(); }
        });
      }
      for (const e of await drawPanel(m, st)) entries.set(e.name, e);
      if (st.bind && st.plot.on) { st.bind(); st.bind = null; }
    }));
    for (const m of wanted) panels.append(panelState.get(m).el); // panels in the URL's order
    drawLegend([...entries.values()]);
    document.body.dataset.charts = String(Date.now());
  }

  // Group keys: run columns first, then every config key.
  get("config-keys").then((res) => {
    for (const [key, n] of res.rows) if (!RUN_COLUMNS.includes(key)) groupSel.append(h("option", { value: key }, `${key}  (${n})`));
  }).catch(() => {});
  groupSel.addEventListener("change", () => {
    const k = groupSel.value; groupSel.value = "";
    if (!k) return;
    const next = k === "auto" ? ["auto"] : [...groupBy().filter((g) => g !== "auto" && g !== k), k];
    url.set({ group_by: next }); drawControls(); drawAll();
  });
  const resetRanges = () => { for (const st of panelState.values()) st.range = null; };
  xSel.addEventListener("change", () => { url.set({ x: xSel.value === "step" ? null : xSel.value }); resetRanges(); drawControls(); drawAll(); });
  bandSel.addEventListener("change", () => { url.set({ band: bandSel.value === "minmax" ? "minmax" : null }); drawAll(); });
  smooth.addEventListener("input", showSmooth);
  smooth.addEventListener("change", () => { url.set({ smooth: weight() ? weight().toFixed(2) : null }); drawAll(); });
  logy.addEventListener("change", () => { url.set({ logy: logy.checked ? "1" : null }); drawAll(); });
  drawControls();
  loadKeys();
  await drawAll();
  return { refresh: async () => { await loadKeys(); await drawAll(); } };
}
