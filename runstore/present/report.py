"""The HTML report: one self-contained file that answers "how are my runs doing?" at a glance.

Contract: `build(store, runs=None)` returns the report as HTML text and `write(store, path,
runs=None)` writes it (`store`: a `query.reader.Reader`, such as a `Store`). The file opens with no network: plotly.js is inlined once in the head
(each chart is a `<div>` plus a `Plotly.newPlot` call, `charts.div_html`),
there are no external stylesheets, fonts or images. Sections, each from the canned views
(`sql/statements/report.sql`; `runs` is a scope of runs, `analysis.runs`: a name, run_id,
directory or GLOB, applied to every section; runs are shown by `run_label`):

1. the store, the run filter, the `kl_threshold` in force and the time of the last ingest
   (the manifest's `last_ingest`);
2. run summary (`run_summary`);
3. KL health: `kl_health`, flagged runs first, and the KL chart (`charts.kl_chart`);
4. reward trends (`charts.reward_chart`);
5. the slowest spans of each run (`slowest_spans`, the `top_spans` first by total time);
6. latest checkpoints (`latest_checkpoints`).

Every value written into the page is HTML-escaped (figure JSON is escaped as plotly escapes
it, `charts.figure`: `<`, `>` and `/` become `\\u003c`, `\\u003e`, `\\u002f`, so no value can close a `<script>`). To keep the
file usable with hundreds of runs, each chart's lines share a budget of `CHART_POINTS` points
(downsampled as `charts.keep_indices` does, and said so in the chart's subtitle), tables
scroll inside their section, and one filter box hides the rows of every table whose run name
does not contain what is typed (a few lines of inline JavaScript; the page works without it).
The tables are read as plain rows and the charts as plain data: writing the report imports
neither plotly's Python package, pyarrow nor numpy (numpy only to cut a line past its budget).
"""

from __future__ import annotations

import html
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import QueryError
from ..numbers import nonfinite_name
from ..query.rows import Rows, from_relation
from ..query.session import AT_ONCE
from ..query.statements import named
from . import charts
from .scope import ids, no_data_error, scope_text

if TYPE_CHECKING:
    import pyarrow as pa

    from ..analysis.runs import Scope

    from ..query.reader import Reader

CHART_POINTS = 200_000  # all lines of one chart together; each line keeps at least MIN_LINE_POINTS
MIN_LINE_POINTS = 200
TOP_SPANS = 5


def _cell(value: Any) -> tuple[str, str]:
    """(text, css class) for one table cell; the text is escaped by the caller."""
    if value is None:
        return "—", "null"
    if isinstance(value, bool):
        return ("yes", "yes") if value else ("no", "")
    if isinstance(value, float):
        if not math.isfinite(value):
            return nonfinite_name(value), "num"
        return f"{value:.4g}", "num"
    if isinstance(value, int):
        return str(value), "num"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds"), ""
    return str(value), ""


def table_html(table: "pa.Table | Rows", columns: Sequence[str], *, flag: str | None = None,
               empty: str = "nothing to show") -> str:
    """An HTML table of `columns` of `table`; rows whose `flag` column is true get a class."""
    if table.num_rows == 0:
        return f'<p class="empty">{html.escape(empty)}</p>'
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in columns)
    body = []
    for row in table.select(list(columns) + ([flag] if flag and flag not in columns else [])).to_pylist():
        cls = ' class="flagged"' if flag and row.get(flag) else ""
        cells = []
        for c in columns:
            text, css = _cell(row[c])
            cells.append(f'<td class="{css}">{e(text)}</td>' if css else f"<td>{e(text)}</td>")
        run = e(str(row.get("run_label") or ""))
        body.append(f'<tr data-run="{run}"{cls}>{"".join(cells)}</tr>')
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def figure_html(chart: Any, div_id: str) -> str:
    """One chart (its plain data, or a Figure) as a `<div>` and its `Plotly.newPlot` call;
    plotly.js is not included."""
    return charts.div_html(chart, div_id)


def _chart(build: Any, div_id: str) -> str:
    try:
        return figure_html(build(), div_id)
    except QueryError as e:  # e.g. no run logs KL: say so where the chart would be
        return f'<p class="empty">{html.escape(str(e))}</p>'


def _line_budget(n_lines: int) -> int:
    return max(MIN_LINE_POINTS, min(charts.MAX_POINTS, CHART_POINTS // max(1, n_lines)))


def _last_ingest(store: "Reader") -> str:
    info = store.manifest().last_ingest or {}
    at = info.get("at")
    if not at:
        return "never"
    try:
        when = datetime.fromisoformat(at).astimezone(timezone.utc)
        text = when.strftime("%Y-%m-%d %H:%M:%S UTC")
    except (TypeError, ValueError):
        text = str(at)
    details = []
    for key, word in (("runs_new", "new"), ("runs_updated", "updated"),
                      ("runs_unchanged", "unchanged")):
        if isinstance(info.get(key), int):
            details.append(f"{info[key]} {word}")
    if details:
        text += f" (runs: {', '.join(details)})"
    return text


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1f2328;background:#fff}
header{padding:18px 28px 10px;border-bottom:1px solid #d0d7de;background:#f6f8fa}
h1{font-size:22px;margin:0 0 6px}
h2{font-size:18px;margin:28px 0 8px}
main{padding:0 28px 40px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}
dl.meta dt{color:#57606a}dl.meta dd{margin:0}
.scroll{max-height:420px;overflow:auto;border:1px solid #d0d7de;border-radius:6px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #eaeef2;text-align:left;white-space:nowrap}
thead th{position:sticky;top:0;background:#f6f8fa;z-index:1}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.null{color:#8c959f}
td.yes{color:#cf222e;font-weight:600}
tr.flagged td{background:#fff1f0}
.empty{color:#57606a;font-style:italic}
.filter{margin:14px 0 0}
.filter input{font:inherit;padding:4px 8px;width:320px}
nav a{margin-right:14px}
"""

FILTER_JS = """
(function(){
  var box = document.getElementById("run-filter");
  if (!box) return;
  box.addEventListener("input", function(){
    var q = box.value.toLowerCase();
    var rows = document.querySelectorAll("tr[data-run]");
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      r.style.display = (!q || r.getAttribute("data-run").toLowerCase().indexOf(q) >= 0) ? "" : "none";
    }
  });
})();
"""


def build(store: "Reader", runs: Scope = None, *, top_spans: int = TOP_SPANS) -> str:
    """The report as one HTML document (see the module docstring)."""
    head, tail = _page(store, runs, top_spans)
    return head + charts.plotly_js() + tail


def _page(store: "Reader", runs: Scope, top_spans: int) -> tuple[str, str]:
    """The report before plotly.js and after it. Its sections' statements run `AT_ONCE` at a
    time (query/session.py), each on its own cursor; a chart starts once the table that
    sizes its line budget is in."""
    from concurrent.futures import ThreadPoolExecutor

    e = html.escape
    params = {"runs": ids(store, runs)}
    scope = scope_text(runs)

    def rows(name: str, values: dict[str, Any]) -> "Rows | pa.Table":
        return store.fetch(named(name), values, convert=from_relation)

    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        tables = {name: pool.submit(rows, f"report.{name}", values) for name, values in (
            ("summary", params), ("kl", params), ("spans", {**params, "top": top_spans}),
            ("checkpoints", params))}
        summary = tables["summary"].result()
        if summary.num_rows == 0:
            raise no_data_error(store, runs, "")
        n_runs = summary.num_rows
        reward_chart = pool.submit(_chart, lambda: charts.reward_chart(
            store, runs=runs, max_points=_line_budget(2 * n_runs)), "chart-rewards")
        kl = tables["kl"].result()
        kl_chart = pool.submit(_chart, lambda: charts.kl_chart(
            store, runs=runs, max_points=_line_budget(2 * max(1, kl.num_rows))), "chart-kl")
        spans, checkpoints = tables["spans"].result(), tables["checkpoints"].result()
        kl_html, reward_html = kl_chart.result(), reward_chart.result()
    threshold = store.settings().get("kl_threshold")
    flagged = [r["run_label"] for r in kl.select(["run_label", "flagged"]).to_pylist()
               if r["flagged"]]

    meta = [("store", str(store.path)),
            ("runs", f"{n_runs}" + (f" matching {scope}" if scope else " (all)")),
            ("KL flagged", f"{len(flagged)} (kl_threshold {threshold:g})"
             if isinstance(threshold, (int, float)) else str(len(flagged))),
            ("last ingest", _last_ingest(store)),
            ("report written", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))]
    sections = [
        ("runs", "Run summary", table_html(summary, [
            "run_label", "kind", "model_name", "learning_rate", "status", "n_steps", "last_step",
            "last_reward_ma10", "best_reward", "max_kl", "kl_flagged", "n_checkpoints",
            "last_checkpoint"], flag="kl_flagged", empty="no runs")),
        ("kl", "KL health", table_html(kl, [
            "run_label", "flagged", "steps_over", "first_step_over", "last_step_over",
            "longest_streak_over", "max_kl_v1", "max_kl_v2", "last_kl_v1", "last_kl_v2",
            "nan_steps"], flag="flagged", empty="no run logs KL") + kl_html),
        ("rewards", "Reward trends", reward_html),
        ("spans", f"Slowest spans (top {top_spans} per run by total time)", table_html(spans, [
            "run_label", "rank", "name", "calls", "total_s", "mean_s", "p50_s", "p95_s", "max_s",
            "share", "wall_s", "wall_share"], empty="no run has timing spans")),
        ("checkpoints", "Latest checkpoints", table_html(checkpoints, [
            "run_label", "n_checkpoints", "latest_name", "batch", "epoch", "rolling",
            "state_path", "sampler_name", "latest_sampler_path", "final_name"],
            empty="no run wrote a checkpoint")),
    ]
    nav = "".join(f'<a href="#{sid}">{e(title.split(" (")[0])}</a>' for sid, title, _ in sections)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>runstore report{e(' — ' + scope) if scope else ''}</title>",
        f"<style>{CSS}</style>",
        # plotly.js goes here, once for every chart; inlined so the file opens with no network.
        '<script type="text/javascript">',
    ]
    rest = [
        "</script>",
        "</head><body>",
        "<header><h1>runstore report</h1><dl class=\"meta\">",
        "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in meta),
        f"</dl><nav>{nav}</nav>",
        '<div class="filter"><input id="run-filter" type="search" '
        'placeholder="filter table rows by run name" aria-label="filter by run name"></div>',
        "</header><main>",
    ]
    for sid, title, body in sections:
        rest.append(f'<section id="{sid}"><h2>{e(title)}</h2>{body}</section>')
    rest += ["</main>", f"<script>{FILTER_JS}</script>", "</body></html>", ""]
    return "\n".join(parts), "\n".join(rest)


def write(store: "Reader", path: str | Path, runs: Scope = None, *,
          top_spans: int = TOP_SPANS) -> Path:
    """Write the report to `path` (UTF-8) and return the path (plotly.js copied as the
    package's bytes, `charts.write_page`)."""
    return charts.write_page(path, *_page(store, runs, top_spans))
