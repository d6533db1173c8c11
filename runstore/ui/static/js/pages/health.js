// Health: the doctor's findings, kl_health and every rule of `runstore check`, flagged runs
// first; each finding and each firing links to the chart of its metrics for that run, marked at
// its first step (a stale firing: the chart_keys the server chose, marked at the run's last
// step).
import { h, clear, get, url, table, errorBox, selectedRuns, query, copyButton } from "../lib.js";

// The Charts page URL that shows `keys` for `run`, marked at `step`.
// A trend rule's chart shows the smoothing it judges by (`smooth`).
export function chartLink(run, keys, step, smooth) {
  return "/charts" + query({ run: [run], metric: keys, step, smooth: smooth ? smooth.toFixed(2) : null });
}

function link(run, keys, step, label, smooth) {
  if (!keys || !keys.length) return h("span", { class: "muted", title: "this rule reads no metric to chart" }, label || "–");
  return h("a", { href: chartLink(run, keys, step, smooth), "data-nav": "1", class: "chart-link",
    title: `chart of ${keys.join(", ")} for ${run}` + (step !== null && step !== undefined ? `, at step ${step}` : "") },
  label || (step !== null && step !== undefined ? `chart @ step ${step}` : "chart"));
}

// A finding's link to its chart, classed apart from the rules' links of the same Runs row.
function findingLink(f) {
  const a = link(f.run_name, f.chart_keys, f.first_step, `${f.finding} @ ${f.first_step}`);
  if (a.tagName === "A") a.className = "finding-link";
  return a;
}

function objects(t) { return t.rows.map((r) => Object.fromEntries(t.columns.map((c, i) => [c, r[i]]))); }

export async function mount(root) {
  const only = h("input", { type: "checkbox", id: "health-only-selected" });
  only.checked = url.get("only") === "1";
  const out = h("div", { id: "health" });
  root.append(h("h1", {}, "Health"),
    h("div", { class: "toolbar" }, h("label", {}, only, "only selected runs"),
      h("span", { class: "sub" }, "the rules ", h("code", {}, "runstore check"), " runs (default KL rule, runstore.toml, the store's kl_threshold setting), over live metrics")),
    out);

  async function load() {
    let data;
    try { data = await get("health"); } catch (e) { clear(out); out.append(errorBox(e)); return; }
    clear(out);
    const sel = new Set(selectedRuns());
    const keep = (name) => !(only.checked && sel.size) || sel.has(name);
    const smoothOf = new Map(data.rules.map((r) => [r.rule, r.smooth]));
    const firings = objects(data.firings).filter((f) => keep(f.run_name));
    const byRun = new Map();
    for (const f of firings) { if (!byRun.has(f.run_name)) byRun.set(f.run_name, []); byRun.get(f.run_name).push(f); }

    out.append(h("div", { class: "card pad", id: "health-summary" }, data.summary));

    // The doctor's findings, worst first: what went wrong, where, the evidence and what to try.
    const doc = data.findings;
    const findings = doc.rows.filter((f) => keep(f.run_name));
    const byRunFindings = new Map();
    for (const f of findings) { if (!byRunFindings.has(f.run_name)) byRunFindings.set(f.run_name, []); byRunFindings.get(f.run_name).push(f); }
    const steps = (f) => f.first_step === null ? "" : f.first_step === f.last_step ? `step ${f.first_step}` : `steps ${f.first_step}-${f.last_step}`;
    out.append(h("h2", {}, `Findings (${findings.length})`),
      h("div", { class: "sub", id: "doctor-summary" }, doc.error ? h("span", { class: "error" }, doc.error)
        : [doc.summary, " — ", h("code", {}, "runstore doctor"), `: ${doc.n_checked} findings of the catalogue, each one SQL statement (docs/doctor.md)`]),
      findings.length ? h("div", { id: "doctor-findings" }, findings.map((f) => h("div", { class: "card pad finding", "data-finding": f.finding, "data-run": f.run_name },
        h("div", { class: "row" },
          h("span", { class: "pill " + (f.severity === "error" ? "flag" : f.severity === "warning" ? "idle" : "running") }, f.severity),
          h("b", { class: "name" }, f.finding), h("span", { class: "name" }, f.run_name), h("span", { class: "muted" }, steps(f)),
          link(f.run_name, f.chart_keys, f.first_step, `chart @ step ${f.first_step}`)),
        h("div", { class: "evidence" }, f.evidence),
        h("div", { class: "try" }, h("b", {}, "try: "), f.to_try),
        h("div", { class: "row statement" }, h("code", {}, f.statement), copyButton(f.statement)))))
        : h("div", { class: "empty", id: "doctor-findings" }, doc.error ? "the doctor could not run" : "no findings"));

    out.append(h("h2", {}, `Rules (${data.rules.length})`),
      h("div", { id: "health-rules" }, table({
        columns: ["rule", "kind", "metrics", "fired", "checked", "runs"], types: ["varchar", "varchar", "varchar", "int64", "int64", "int64"],
        rows: data.rules.map((r) => [r.rule, r.kind, r.metrics.join(", "), r.fired, r.checked, data.n_runs]),
      }, { cls: { rule: "name", metrics: "name" }, render: { fired: (v) => v ? h("span", { class: "pill flag" }, String(v)) : h("span", { class: "pill ok" }, "0") } })));

    // Every run, flagged first (the server's order): the rules firing for it, each a chart link.
    const runs = data.runs.filter((r) => keep(r.run_name));
    const nFlagged = runs.filter((r) => r.rules.length || r.kl_flagged || r.findings.length).length;
    out.append(h("h2", {}, `Runs (${nFlagged} of ${runs.length} flagged)`),
      h("div", { id: "health-runs" }, table({
        columns: ["run_name", "status", "kl_flagged", "rules", "findings"], types: ["varchar", "varchar", "boolean", "list", "list"],
        rows: runs.map((r) => [r.run_name, r.status, r.kl_flagged, r.rules, r.findings]),
      }, {
        label: (c) => ({ run_name: "run", kl_flagged: "KL", rules: "rules firing" }[c] || c),
        cls: { run_name: "name" }, tall: true,
        rowClass: (row) => (row[3].length || row[2] || row[4].length) ? "flagged" : "",
        render: {
          status: (v) => v === null ? "–" : h("span", { class: "pill " + v }, v),
          kl_flagged: (v) => v === null ? h("span", { class: "muted", title: "logs no KL" }, "–") : v ? h("span", { class: "pill flag" }, "flagged") : h("span", { class: "pill ok" }, "ok"),
          rules: (v, row) => v.length ? h("span", { class: "row" }, (byRun.get(row[0]) || []).map((f) =>
            link(f.run_name, f.chart_keys, f.first_step, `${f.rule} @ ${f.first_step}`, smoothOf.get(f.rule)))) : h("span", { class: "muted" }, "none"),
          findings: (v, row) => v.length ? h("span", { class: "row" }, (byRunFindings.get(row[0]) || []).map(findingLink))
            : h("span", { class: "muted" }, "none"),
        },
      })));

    const fireCols = data.firings.columns.filter((c) => !["run_name", "run_id", "rule", "chart_keys"].includes(c));
    out.append(h("h2", {}, `Firings (${firings.length})`),
      firings.length ? h("div", { id: "health-firings" }, table({
        columns: ["run_name", "rule", "chart", ...fireCols],
        types: ["varchar", "varchar", "varchar", ...fireCols.map((c) => data.firings.types[data.firings.columns.indexOf(c)])],
        rows: firings.map((f) => [f.run_name, f.rule, f, ...fireCols.map((c) => f[c])]),
      }, {
        cls: { run_name: "name", rule: "name" },
        render: {
          status: (v) => v === null ? "–" : h("span", { class: "pill " + v }, v),
          chart: (f) => link(f.run_name, f.chart_keys, f.first_step, null, smoothOf.get(f.rule)),
        },
      })) : h("div", { class: "empty", id: "health-firings" }, "no rule fires"));

    const kl = { ...data.kl_health, rows: data.kl_health.rows.filter((r) => keep(r[0])) };
    const at = (c) => kl.columns.indexOf(c);
    // The name, the verdict and the link first, where they are seen; then kl_health's columns.
    const klFirst = ["run_name", "flagged"];
    const klRest = kl.columns.filter((c) => !klFirst.includes(c) && c !== "chart_keys" && c !== "run_id");
    const klCols = [...klFirst, "chart", ...klRest];
    out.append(h("h2", {}, `kl_health (threshold ${data.kl_threshold}; ${kl.rows.filter((r) => r[at("flagged")]).length} of ${kl.rows.length} runs that log KL flagged)`),
      kl.rows.length ? h("div", { id: "health-kl" }, table({
        columns: klCols,
        types: klCols.map((c) => c === "chart" ? "varchar" : kl.types[at(c)]),
        rows: kl.rows.map((r) => klCols.map((c) => c === "chart" ? r : r[at(c)])),
      }, {
        cls: { run_name: "name" }, tall: true,
        rowClass: (r) => r[1] ? "flagged" : "",
        render: {
          flagged: (v) => v ? h("span", { class: "pill flag" }, "flagged") : h("span", { class: "pill ok" }, "ok"),
          chart: (r) => r[at("flagged")] ? link(r[at("run_name")], r[at("chart_keys")], r[at("first_step_over")])
            : link(r[at("run_name")], r[at("chart_keys")], null),
        },
      })) : h("div", { class: "empty", id: "health-kl" }, "no run logs a KL metric"));
  }
  only.addEventListener("change", () => { url.set({ only: only.checked ? "1" : null }); load(); });
  await load();
  return { refresh: load };
}
