// Timing: per run, a step picker (step-time bars) → that step's span waterfall with nesting,
// the step's slowest spans, the run's slowest spans over all steps, a Perfetto download, and
// "which run got slower" against a second run (`vs=`).
import { h, clear, get, url, table, errorBox, plotly, runPicker, focusRun, download, fmt } from "../lib.js";

const EPS = 1e-6;

// Spans of one step in tree order: each right below its parent, siblings by start. A span's
// parent is a span named like its `parent` column that contains it and has a smaller depth.
export function nestingOrder(spans) {
  const ordered = spans.slice().sort((a, b) => a.start_s - b.start_s || b.end_s - a.end_s || a.depth - b.depth || a.span_idx - b.span_idx);
  for (const s of ordered) s.children = [];
  const roots = [];
  for (const s of ordered) {
    const cands = s.parent === null ? [] : ordered.filter((p) => p !== s && p.name === s.parent && p.depth < s.depth &&
      p.start_s <= s.start_s + EPS && p.end_s >= s.end_s - EPS);
    const oneUp = cands.filter((p) => p.depth === s.depth - 1);
    const pool = oneUp.length ? oneUp : cands;
    if (pool.length) {
      pool.sort((a, b) => (a.end_s - a.start_s) - (b.end_s - b.start_s) || b.depth - a.depth);
      pool[0].children.push(s);
    } else roots.push(s);
  }
  const out = [];
  const visit = (s, level) => { s.level = level; out.push(s); s.children.forEach((c) => visit(c, level + 1)); };
  roots.forEach((r) => visit(r, 0));
  return out;
}

// The waterfall is HTML, not a chart: span names indented by nesting and never cut, bars
// positioned in percent of the step's wall time, a hover title with the numbers.
function drawWaterfall(el, order, wall) {
  clear(el);
  const colors = ["#2f6fd1", "#1f9e6e", "#d19a1f", "#8e5bd0", "#e0532f", "#1aa3b8"];
  const ticks = niceTicks(wall);
  const axis = h("div", { class: "wf-axis" }, ticks.map((t) => h("span", { style: { left: `${(t / wall) * 100}%`, transform: t === 0 ? "none" : null } }, `${fmt(t)} s`)));
  el.append(h("div", { class: "wf-row wf-head" }, h("div", { class: "wf-name" }, "span"), h("div", { class: "wf-dur" }, "seconds"), h("div", { class: "wf-track" }, axis)));
  for (const x of order) {
    const bar = h("div", { class: "wf-bar", style: {
      left: `${(x.start_s / wall) * 100}%`, width: `max(2px, ${((x.end_s - x.start_s) / wall) * 100}%)`,
      background: colors[x.level % colors.length] } });
    const title = `${x.name}\n${fmt(x.duration_s)} s, from ${fmt(x.start_s)} s to ${fmt(x.end_s)} s\ndepth ${x.depth}, parent ${x.parent || "none"}`;
    el.append(h("div", { class: "wf-row", dataset: { name: x.name, level: String(x.level) } },
      h("div", { class: "wf-name", title, style: { paddingLeft: `${6 + x.level * 14}px` } }, x.level ? h("span", { class: "muted" }, "└ ") : null, x.name),
      h("div", { class: "wf-dur", title }, fmt(x.duration_s)),
      h("div", { class: "wf-track", title }, ticks.map((t) => h("span", { class: "wf-grid", style: { left: `${(t / wall) * 100}%` } })), bar)));
  }
  el.dataset.spans = String(order.length);
}

function niceTicks(max) {
  const raw = max / 6;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((v) => v >= raw) || raw;
  const out = [];
  for (let t = 0; t <= max + 1e-9; t += step) out.push(Number(t.toPrecision(6)));
  return out;
}

// "Which run got slower": the verdict on median step time, both runs' step times, and every
// span name's seconds per step in each run, the names that cost `vs` the most extra first.
function compareView(res) {
  const a = res.steps.run, b = res.steps.vs;
  const pct = (x) => `${(Math.abs(x - 1) * 100).toFixed(1)}%`;
  let verdict;
  if (res.slower === null) verdict = "Both runs have the same mean step time.";
  else {
    const [slow, fast] = res.slower === res.vs ? [b, a] : [a, b];
    verdict = `${slow.run_name} is slower: its steps take ${fmt(slow.mean_step_s)} s on average, ` +
      `${pct(slow.mean_step_s / fast.mean_step_s)} more than ${fast.run_name} (${fmt(fast.mean_step_s)} s).`;
  }
  const steps = { columns: ["run", "n_steps", "median_step_s", "mean_step_s", "max_step_s"],
    types: ["varchar", "int64", "double", "double", "double"],
    rows: [a, b].map((x) => [x.run_name, x.n_steps, x.median_step_s, x.mean_step_s, x.max_step_s]) };
  const labels = { calls_a: "calls (run)", calls_b: "calls (vs)", mean_s_a: "mean s (run)", mean_s_b: "mean s (vs)",
    mean_ratio: "mean vs/run", per_step_s_a: "s/step (run)", per_step_s_b: "s/step (vs)", added_s: "added s/step (vs − run)" };
  return h("div", {},
    h("div", { class: "head" }, h("span", { class: "title" }, "which run got slower"),
      h("span", { class: "note" }, `run = ${res.run} · vs = ${res.vs}`)),
    h("p", { id: "compare-verdict" }, verdict),
    h("div", { id: "compare-steps" }, table(steps, { cls: { run: "name" } })),
    h("h2", {}, "Seconds per step of each span name (most added time first)"),
    h("div", { id: "compare-spans" }, table(res.spans, { label: (c) => labels[c] || c, cls: { name: "name" }, tall: true,
      render: { added_s: (v) => v === null ? "–" : h("span", { class: v > 0 ? "slower" : v < 0 ? "faster" : "" }, (v > 0 ? "+" : "") + fmt(v, "double")) } })));
}

function objects(t) { return t.rows.map((r) => Object.fromEntries(t.columns.map((c, i) => [c, r[i]]))); }

export async function mount(root) {
  const head = h("div", { class: "toolbar" });
  const body = h("div", { class: "timing-layout" });
  root.append(h("h1", {}, "Timing"), head, body);
  let runs = [];
  const plotlyReady = plotly(); // loads while the runs are asked for
  plotlyReady.catch(() => {}); // a failed load is reported where it is awaited
  try { runs = (await get("timing/runs")).rows.map((r) => r[1]); } catch (e) { root.append(errorBox(e)); return {}; }
  if (!runs.length) { body.append(h("div", { class: "empty" }, "no run has timing spans (timing_spans.jsonl)")); return {}; }

  const P = await plotlyReady;
  let run = focusRun(runs);
  if (!runs.includes(run)) run = runs[0];
  let steps = null;

  async function load() {
    clear(head); clear(body);
    const picker = runPicker(runs, run, (v) => { run = v; url.set({ focus: v, step: null }); load(); });
    head.append(h("label", {}, "run", picker));
    try { steps = objects(await get("timing/steps", { run })); } catch (e) { body.append(errorBox(e)); return; }
    if (!steps.length) { body.append(h("div", { class: "empty" }, "this run has no spans")); return; }
    const stepNums = steps.map((s) => s.step);
    let step = parseInt(url.get("step"), 10);
    if (!stepNums.includes(step)) step = stepNums[stepNums.length - 1];
    const stepSel = h("select", { id: "step-picker" }, stepNums.map((s) => h("option", { value: s, selected: s === step }, String(s))));
    const go = (s) => { url.set({ step: s, focus: run }); drawStep(s); stepSel.value = String(s); };
    stepSel.addEventListener("change", () => go(parseInt(stepSel.value, 10)));
    const prev = h("button", { class: "small", onclick: () => { const i = stepNums.indexOf(parseInt(stepSel.value, 10)); if (i > 0) go(stepNums[i - 1]); } }, "◀");
    const next = h("button", { class: "small", onclick: () => { const i = stepNums.indexOf(parseInt(stepSel.value, 10)); if (i < stepNums.length - 1) go(stepNums[i + 1]); } }, "▶");
    const slowest = h("button", { class: "small", title: "the step with the longest wall time", onclick: () => {
      const s = steps.reduce((a, b) => (b.wall_s > a.wall_s ? b : a)); go(s.step); } }, "slowest step");
    const trace = h("button", { id: "trace-download", onclick: async () => {
      try { await download("GET", "trace", { run, step: parseInt(stepSel.value, 10) }, "trace.json"); }
      catch (e) { body.prepend(errorBox(e)); } } }, "Perfetto trace of this step");
    const vsSel = h("select", { id: "vs-picker" }, h("option", { value: "" }, "(none)"),
      runs.filter((r) => r !== run).map((r) => h("option", { value: r, selected: r === url.get("vs") }, r)));
    vsSel.addEventListener("change", () => { url.set({ vs: vsSel.value || null, focus: run }); drawVs(); });
    head.append(h("label", {}, "step", prev, stepSel, next), slowest, trace,
      h("span", { class: "sub" }, `${steps.length} steps with spans`),
      h("label", { title: "which run got slower: step times and seconds per step of every span name" }, "compare with", vsSel));
    const vsPanel = h("div", { id: "timing-compare" });

    const bars = h("div", { style: { height: "150px" }, id: "step-bars" });
    const title = h("h2", { id: "waterfall-title" });
    const fall = h("div", { class: "waterfall", id: "waterfall" });
    const tables = h("div", { class: "timing-layout" });
    body.append(vsPanel, h("div", { class: "panel" }, h("div", { class: "head" }, h("span", { class: "title" }, "wall time per step"),
      h("span", { class: "note" }, "click a bar to open that step")), bars),
      h("div", { class: "panel" }, title, fall), tables);
    P.newPlot(bars, [{ type: "bar", x: stepNums, y: steps.map((s) => s.wall_s), marker: { color: "#9db8e3" },
      hovertemplate: "step %{x}: %{y:.3f} s<extra></extra>" }],
    { margin: { l: 46, r: 10, t: 6, b: 28 }, xaxis: { title: { text: "" } }, yaxis: { title: { text: "s" } },
      bargap: 0.15, plot_bgcolor: "#fff" }, { displayModeBar: false, responsive: true });
    bars.on("plotly_click", (ev) => { if (ev.points && ev.points.length) go(ev.points[0].x); });

    async function drawStep(s) {
      let spans;
      try { spans = objects(await get("timing/spans", { run, step: s })); } catch (e) { clear(tables); tables.append(errorBox(e)); return; }
      const order = nestingOrder(spans);
      const wall = Math.max(...spans.map((x) => x.end_s), 1e-9);
      title.textContent = `step ${s} · ${spans.length} spans · ${fmt(wall)} s wall`;
      drawWaterfall(fall, order, wall);
      clear(tables);
      const bySlow = spans.slice().sort((a, b) => b.duration_s - a.duration_s);
      const stepTable = { columns: ["name", "depth", "parent", "duration_s", "start_s"], types: ["varchar", "int32", "varchar", "double", "double"],
        rows: bySlow.map((x) => [x.name, x.depth, x.parent, x.duration_s, x.start_s]) };
      tables.append(h("div", {}, h("h2", {}, `Slowest spans of step ${s}`),
        h("div", { id: "step-slowest" }, table(stepTable, { sort: 3, desc: true, tall: true, cls: { name: "name" } }))));
      try {
        const all = await get("timing/slowest", { run });
        tables.append(h("div", {}, h("h2", {}, "Slowest spans over all steps (slowest_spans)"),
          table(all, { sort: all.columns.indexOf("rank"), tall: true, cls: { name: "name" } })));
      } catch (e) { tables.append(errorBox(e)); }
      document.body.dataset.step = String(s);
    }
    async function drawVs() {
      clear(vsPanel);
      const vs = vsSel.value;
      if (!vs) { vsPanel.className = ""; return; }
      vsPanel.className = "panel";
      let res;
      try { res = await get("timing/compare", { run, vs }); } catch (e) { vsPanel.append(errorBox(e)); return; }
      vsPanel.append(compareView(res));
      // Both runs' step times, step by step.
      try {
        const other = objects(await get("timing/steps", { run: vs }));
        const plot = h("div", { style: { height: "190px" }, id: "compare-plot" });
        vsPanel.querySelector("#compare-steps").after(plot);
        P.newPlot(plot, [[run, steps, "#2f6fd1"], [vs, other, "#e0532f"]].map(([name, rows, color]) => ({
          type: "scatter", mode: "lines+markers", x: rows.map((r) => r.step), y: rows.map((r) => r.wall_s), name,
          line: { color, width: 1.5 }, marker: { size: 4 }, hovertemplate: "step %{x}: %{y:.3f} s<extra></extra>" })),
        // The legend sits in the top margin, above the plot area, where it covers no point.
        { margin: { l: 46, r: 10, t: 30, b: 28 }, yaxis: { title: { text: "s per step" } }, xaxis: { zeroline: false },
          plot_bgcolor: "#fff", legend: { orientation: "h", x: 0, xanchor: "left", y: 1, yanchor: "bottom", font: { size: 11 } } },
        { displayModeBar: false, responsive: true });
      } catch (e) { vsPanel.append(errorBox(e)); }
      document.body.dataset.compared = vs;
    }
    await drawStep(step);
    await drawVs();
  }
  await load();
  return { refresh: load };
}
