// Charts: one panel per metric key, the selected runs overlaid (every run when none is
// selected); a smoothing slider (debiased EMA, raw kept faint beside it); log-y; KL panels
// mark the threshold and the steps over it. Lines come downsampled from /api/series (min/max
// buckets, so spikes survive); zooming asks again for the visible step range.
// The searchable list of every metric key and grouping with bands come with `keys` and
// `compare` (issue 15).
import { h, clear, get, url, errorBox, plotly, selectedRuns, colorFor, debounce } from "../lib.js";

const DEFAULT_METRICS = ["env/all/reward/total", "optim/kl_sample_train_v1"];

function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

export async function mount(root) {
  const P = await plotly();
  const status = await get("status");
  const klKeys = new Set(status.kl_keys);
  const threshold = typeof status.kl_threshold === "number" ? status.kl_threshold : 0.01;

  const keyInput = h("input", { type: "text", id: "metric-input", class: "mono", size: 36, placeholder: "metric key, e.g. optim/entropy" });
  const add = h("button", { id: "metric-add" }, "Add panel");
  const smooth = h("input", { type: "range", id: "smooth", min: 0, max: 0.99, step: 0.01, value: url.get("smooth", "0") });
  const smoothLabel = h("span", { class: "mono", id: "smooth-label" });
  const logy = h("input", { type: "checkbox", id: "logy" }); logy.checked = url.get("logy") === "1";
  const legend = h("div", { class: "legend", id: "chart-legend" });
  const panels = h("div", { class: "panels", id: "panels" });
  root.append(h("h1", {}, "Charts"),
    h("div", { class: "toolbar" }, keyInput, add,
      h("label", {}, "smoothing", smooth, smoothLabel), h("label", {}, logy, "log y"),
      h("span", { class: "sub" }, selectedRuns().length ? `${selectedRuns().length} selected runs` : "all runs (select some on the Runs page)")),
    legend, panels);

  // `step=`: a step marked on every panel (the Health page links a firing here).
  const markedStep = () => { const v = parseInt(url.get("step"), 10); return Number.isFinite(v) ? v : null; };
  const metrics = () => { const m = url.all("metric"); return m.length ? m : DEFAULT_METRICS; };
  const weight = () => parseFloat(smooth.value) || 0;
  const showSmooth = () => { smoothLabel.textContent = weight() ? weight().toFixed(2) : "off"; };
  showSmooth();
  const colors = new Map();
  const color = (name) => { if (!colors.has(name)) colors.set(name, colorFor(colors.size)); return colors.get(name); };
  const panelState = new Map(); // metric -> {el, range}

  function drawLegend(names) {
    clear(legend);
    for (const n of names) legend.append(h("span", {}, h("span", { class: "sw", style: { background: color(n) } }), n));
  }

  async function drawPanel(metric, st) {
    const { plot, note } = st;
    const params = { metric, run: selectedRuns(), smooth: weight() || null };
    if (st.range) { params.step_min = Math.floor(st.range[0]); params.step_max = Math.ceil(st.range[1]); }
    let res;
    try { res = await get("series", params); } catch (e) { clear(plot); plot.append(errorBox(e)); return []; }
    const traces = [];
    const w = weight();
    let downsampled = false, nInf = 0;
    const isKL = klKeys.has(metric);
    const over = { x: [], y: [], text: [] };
    for (const line of res.lines) {
      const c = color(line.run_name);
      if (line.n_points > line.steps.length) downsampled = true;
      nInf += line.n_inf;
      traces.push({ type: "scatter", mode: "lines", x: line.steps, y: line.values, name: line.run_name,
        line: { color: c, width: w ? 1 : 1.6 }, opacity: w ? 0.25 : 1, connectgaps: false,
        hovertemplate: `${line.run_name.replace(/</g, "&lt;")}<br>step %{x}: %{y:.6g}<extra></extra>`, meta: { run: line.run_name, kind: "raw" } });
      if (w && line.smoothed) {
        traces.push({ type: "scatter", mode: "lines", x: line.smooth_steps, y: line.smoothed, name: line.run_name + " (smoothed)",
          line: { color: c, width: 1.8 }, hovertemplate: `${line.run_name.replace(/</g, "&lt;")} (smoothed)<br>step %{x}: %{y:.6g}<extra></extra>`, meta: { run: line.run_name, kind: "smoothed" } });
      }
      if (isKL) {
        line.steps.forEach((s, i) => { const v = line.values[i]; if (v !== null && v > threshold) { over.x.push(s); over.y.push(v); over.text.push(line.run_name); } });
        line.inf_steps.forEach((s, i) => { if (line.inf_signs[i] > 0) { over.x.push(s); over.y.push(null); over.text.push(line.run_name + " (+Infinity)"); } });
      }
    }
    if (isKL && over.x.length) {
      traces.push({ type: "scatter", mode: "markers", x: over.x, y: over.y.map((v) => v === null ? threshold * 10 : v), text: over.text,
        marker: { color: "#c9352b", size: 6, symbol: "x" }, name: "over threshold",
        hovertemplate: "%{text}<br>step %{x}: %{y:.4g} > " + threshold + "<extra></extra>", meta: { kind: "flagged" } });
    }
    const shapes = isKL ? [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: threshold, y1: threshold, line: { color: "#c9352b", dash: "dash", width: 1 } }] : [];
    const mark = markedStep();
    if (mark !== null) shapes.push({ type: "line", yref: "paper", y0: 0, y1: 1, x0: mark, x1: mark, name: "step", line: { color: "#8e5bd0", dash: "dot", width: 1.5 } });
    const layout = {
      margin: { l: 52, r: 10, t: 6, b: 30 }, showlegend: false, plot_bgcolor: "#fff", hovermode: "closest",
      xaxis: { title: { text: "step" }, zeroline: false, ...(st.range ? { range: st.range } : {}) },
      yaxis: { type: logy.checked ? "log" : "linear", zeroline: false }, shapes,
      annotations: [...(isKL ? [{ xref: "paper", x: 1, y: threshold, yref: "y", text: `threshold ${threshold}`, showarrow: false, xanchor: "right", yanchor: "bottom", font: { size: 10, color: "#c9352b" } }] : []),
        ...(mark !== null ? [{ x: mark, xref: "x", y: 1, yref: "paper", text: `step ${mark}`, showarrow: false, xanchor: "left", yanchor: "top", font: { size: 10, color: "#8e5bd0" } }] : [])],
    };
    st.ignoreRelayout = true;
    await P.react(plot, traces, layout, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] });
    st.ignoreRelayout = false;
    const pts = res.lines.reduce((a, l) => a + l.steps.length, 0);
    note.textContent = `${plural(res.lines.length, "run")} · ${pts} points drawn` + (downsampled ? ` (min/max of ${res.max_points}-point buckets per line)` : "") +
      (nInf ? ` · ${nInf} ±Infinity` : "") + (isKL && over.x.length ? ` · ${plural(new Set(over.text).size, "run")} over ${threshold}` : "");
    plot.dataset.lines = String(res.lines.length);
    plot.dataset.drawn = String(Date.now());
    return res.lines.map((l) => l.run_name);
  }

  async function drawAll() {
    const wanted = metrics();
    for (const [m, st] of panelState) if (!wanted.includes(m)) { st.el.remove(); panelState.delete(m); }
    const names = new Set();
    await Promise.all(wanted.map(async (m) => {
      let st = panelState.get(m);
      if (!st) {
        const plot = h("div", { class: "plot" });
        const note = h("span", { class: "note" });
        const close = h("button", { class: "small", title: "remove panel", onclick: () => { url.set({ metric: metrics().filter((x) => x !== m) }); drawAll(); } }, "×");
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
      for (const n of await drawPanel(m, st)) names.add(n);
      if (st.bind) { st.bind(); st.bind = null; }
    }));
    // Panels in the order of the URL.
    for (const m of wanted) panels.append(panelState.get(m).el);
    drawLegend([...names].sort());
    document.body.dataset.charts = String(Date.now());
  }

  const addMetric = () => {
    const k = keyInput.value.trim();
    if (!k) return;
    const now = metrics();
    if (!now.includes(k)) url.set({ metric: [...now, k] });
    keyInput.value = "";
    drawAll();
  };
  add.addEventListener("click", addMetric);
  keyInput.addEventListener("keydown", (e) => { if (e.key === "Enter") addMetric(); });
  smooth.addEventListener("input", showSmooth);
  smooth.addEventListener("change", () => { url.set({ smooth: weight() ? weight().toFixed(2) : null }); drawAll(); });
  logy.addEventListener("change", () => { url.set({ logy: logy.checked ? "1" : null }); drawAll(); });
  await drawAll();
  return { refresh: drawAll };
}
