"""Plotly charts over the store's views: metrics, KL health, reward trends, step timing.

Contract
--------
* `plot_metric(store, keys, runs=, color_by=, smooth=)`, `plot_kl(store, runs=, threshold=)`,
  `plot_rewards(store, runs=, color_by=)` and `plot_spans(store, run, step=)` return a
  `plotly.graph_objects.Figure`. Each is made once, as plain data: `metric_chart`,
  `kl_chart`, `reward_chart` and `spans_chart` take the same arguments and return the chart as the dict
  plotly.js reads (`{"data": [...], "layout": {...}}`, `figure.py`), and the Figure is
  `go.Figure` of that dict (`to_figure`). `write_html(chart, path)` writes a chart (the dict,
  or a Figure) as one self-contained HTML file without importing plotly's Python package:
  plotly.js and the `plotly_white` template are read from the installed plotly package's
  files, and the page is laid out, and the figure's JSON written, as plotly's own
  `write_html` does, so the file draws what the Figure draws. Every number they draw comes from read-only statements over
  the store's tables and canned views (`sql/statements/charts.sql`, run by `Store.arrow` with
  values as bound parameters): `metrics`, `kl_steps`, `kl_health`, `reward_trends`, `spans`,
  `config`. Nothing is recomputed from source files. `store` is any `query.reader.Reader`
  (a `Store`).
* `runs` is a scope of runs (a run_name, run_id or unique prefix, directory or GLOB over
  `run_name`, `*` matching `/` too: `runstore.analysis.runs`); lines are keyed by `run_id`
  and named by the run's `run_label` (a name two runs share gets a run_id prefix); `color_by`
  is a flattened config key (`learning_rate`, `dataset_builder.group_size`): runs get one
  colour per value of that key (values equal as `compare` groups them: 1 and 1.0 alike),
  numbers on an ordered scale, text on a qualitative palette, runs without the key in grey.
* `smooth=W` is runstore's one smoothing (`analysis.smooth`: the debiased EMA of weight W in
  [0, 1), as in `compare`, the web UI and trend rules).
* Each line trace carries `meta = {"run_name", "key", "kind"}` (`run_name`: the run's
  `run_label`; `kind`: `raw`, `ema`,
  `reward`, `reward_ma10`, `kl_v1`, `kl_v2`) so callers and tests can find it without parsing
  the (HTML-escaped) legend names.
* A line with more than `max_points` (default 5,000) points is reduced by `keep_indices`: the
  steps are cut into equal buckets and each bucket keeps its minimum and maximum (and the line
  its first and last point), so spikes, the global minimum and the global maximum survive. The
  chart's subtitle says when this happened.
* Text that plotly renders as pseudo-HTML (names, titles, hover labels) is HTML-escaped.
* Errors (`QueryError`) say what was missing and how to list what exists.

The package: `figure.py` (a chart as plain data; the HTML writer and the Figure),
`lines.py` (what every chart shares), `metrics.py` (metric, KL and reward charts),
`spans.py` (the timing chart). The charts read their statements as plain rows: without a
smoothing weight they import neither plotly, polars, pyarrow nor numpy (numpy only to cut a
line past `max_points` or to average the bars of a run past `MAX_BARS` steps).
"""

from .figure import (PLOTLY_CONFIG, Chart, div_html, document, plotly_js, to_figure,
                     write_html, write_page)
from .lines import (MAX_POINTS, UNSET, UNSET_COLOR, Coloring, downsample, keep_indices, label,
                    run_colors)
from .metrics import (REWARD_KEY, kl_chart, kl_series, metric_chart, metric_series, plot_kl,
                      plot_metric, plot_rewards, reward_chart, reward_series)
from .spans import MAX_BARS, SpanRow, nesting_order, plot_spans, span_shares, spans_chart

__all__ = ["MAX_BARS", "MAX_POINTS", "PLOTLY_CONFIG", "REWARD_KEY", "UNSET", "UNSET_COLOR",
           "Chart", "Coloring", "SpanRow", "div_html", "document", "downsample", "keep_indices",
           "kl_chart", "kl_series", "label", "metric_chart", "metric_series", "nesting_order",
           "plot_kl", "plot_metric", "plot_rewards", "plot_spans", "plotly_js", "reward_chart",
           "reward_series", "run_colors", "span_shares", "spans_chart", "to_figure",
           "write_html", "write_page"]
