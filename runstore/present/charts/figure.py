"""A chart as plain data, and its two renderings: a self-contained HTML page and a plotly Figure.

Contract: a chart is a plain dict, `{"data": [trace, ...], "layout": {...}}`, the JSON that
plotly.js reads (each trace a dict with its `type`; `layout.template` the name of a plotly
template, `plotly_white`, or a template dict). The chart builders make it once; then

* `to_figure(chart)` is the `plotly.graph_objects.Figure` of it (`go.Figure(chart)`: the only
  function here that imports plotly's Python package);
* `document(chart)` is one self-contained HTML page (plotly.js inlined: it opens with no
  network) laid out as plotly's own `write_html(include_plotlyjs=True, full_html=True)` lays
  it out, `div_html(chart, div_id)` the chart's `<div>` and `Plotly.newPlot` call for a page
  that loads plotly.js itself (the report), `write_html(chart, path)` writes `document`, and
  `write_page(path, head, tail)` any page with plotly.js between `head` and `tail`.
  These read plotly.js and the template from the installed plotly package's files
  (`package_data/plotly.min.js`, `package_data/templates/NAME.json`, found without importing
  it) and write the figure as plotly's JSON writer writes `to_figure(chart)`: the numeric `x`
  and `y` columns (numpy arrays there) as plotly.js typed arrays (`{"dtype", "bdata"}`, the
  values in base64: integers in the smallest of int8/int16/int32 that holds them, else a list;
  floats as float64, a missing value as NaN), NaN and ±Infinity elsewhere as `null`, `<`, `>`
  and `/` as `\\u003c`, `\\u003e`, `\\u002f` (so no value can close a `<script>`), a named
  template replaced by its definition. A plotly Figure given to them is read as its
  `to_dict()`.

`PLOTLY_CONFIG` is the plotly.js config every written chart gets.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

Chart = dict[str, Any]

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}

# What plotly's JSON writer (plotly.io.json._swap_json) swaps so a value cannot end a script.
_SWAP = (("<", "\\u003c"), (">", "\\u003e"), ("/", "\\u002f"))
# A JSON string, or a non-finite number outside strings (json.dumps writes NaN, Infinity).
_NONFINITE = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


# Trace columns a Figure holds as numpy arrays when they are all numbers (plotly validates a
# list element by element, a numpy array at once: seconds for a chart of 100 long runs).
_COLUMNS = ("x", "y", "base")


def to_figure(chart: Chart | Any) -> "go.Figure":
    """The plotly Figure of `chart` (a Figure is returned as it is): its numeric `x`, `y` and
    `base` columns as numpy arrays (a missing value, None, as NaN: both are a gap)."""
    import plotly.graph_objects as go

    if isinstance(chart, go.Figure):
        return chart
    return go.Figure({**chart, "data": [_numpy_columns(t) for t in chart.get("data", [])]})


def _column_kind(values: Any) -> str | None:
    """What a trace column is as an array: "int" (all integers), "float" (all numbers, a
    missing value None), None (anything else, or empty: it stays a list)."""
    if not isinstance(values, list) or not values:
        return None
    types = set(map(type, values))  # at C speed: a chart's columns are long
    if types == {int}:
        return "int"
    if types <= {int, float, type(None)}:
        return "float"
    return None


def _numpy_columns(trace: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    out = dict(trace)
    for key in _COLUMNS:
        kind = _column_kind(out.get(key))
        if kind == "int":
            out[key] = np.array(out[key], dtype=np.int64)
        elif kind == "float":
            out[key] = np.array(out[key], dtype=float)  # None becomes NaN
    return out


# The columns plotly's writer writes as typed arrays when they are numpy arrays (a bar's
# `base` it writes as a list).
_TYPED = ("x", "y")
# The integer typed arrays plotly's writer turns an int64 numpy column into (the smallest
# that holds it): `array` typecode, plotly.js dtype, bytes.
_INT_TYPES = (("b", "i1", 1), ("h", "i2", 2), ("i", "i4", 4))


def _typed_columns(trace: Any) -> Any:
    """`trace` with the columns `to_figure` makes numpy arrays as the typed arrays plotly's
    writer writes for them (see the module)."""
    if not isinstance(trace, dict):
        return trace
    out = dict(trace)
    for key in _TYPED:
        kind = _column_kind(out.get(key))
        if kind is not None:
            out[key] = _typed(out[key], kind)
    return out


def _typed(values: list[Any], kind: str) -> Any:
    """A column of `kind` ("int" or "float", `_column_kind`) as plotly's writer writes it:
    a typed array, or the list itself when no typed array holds its integers."""
    import base64
    from array import array

    if kind == "float":
        try:
            data = array("d", values)
        except TypeError:  # a None among the numbers
            nan = float("nan")
            data = array("d", [nan if v is None else v for v in values])
        dtype = "f8"
    else:
        for code, dtype, size in _INT_TYPES:
            if array(code).itemsize != size:
                continue
            try:  # the smallest that holds them: a value out of range stops the copy there
                data = array(code, values)
                break
            except OverflowError:
                continue
        else:
            return values  # wider than int32 (plotly.js has no int64): a list, as plotly writes
    if sys.byteorder != "little":
        data.byteswap()  # plotly.js reads typed arrays little-endian
    return {"dtype": dtype, "bdata": base64.b64encode(data.tobytes()).decode("ascii")}


def as_chart(chart: Chart | Any) -> Chart:
    """`chart` as a plain dict: a plotly Figure's `to_dict()`, a dict as it is."""
    return chart.to_dict() if hasattr(chart, "to_dict") else chart


@lru_cache(maxsize=None)
def _package_data() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("plotly")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("plotly is not installed: `pip install plotly` (runstore needs "
                           "its plotly.js to write charts)")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data"


def _plotly_js_path() -> Path:
    return _package_data() / "plotly.min.js"


@lru_cache(maxsize=None)
def plotly_js() -> str:
    """The installed plotly package's plotly.js (what `plotly.offline.get_plotlyjs` returns)."""
    return _plotly_js_path().read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _template_text(name: str) -> str:
    path = _package_data() / "templates" / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"plotly has no template {name!r}")
    return path.read_text(encoding="utf-8")


def template(name: str) -> dict[str, Any]:
    """The definition of plotly's template `name` (what `plotly.io.templates[name]` holds)."""
    return json.loads(_template_text(name))


def _plain(value: Any) -> Any:
    """A value json cannot write: numpy arrays and scalars as Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} into a chart")


def to_json(value: Any) -> str:
    """`value` as plotly's JSON writer writes it (see the module)."""
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False, default=_plain)
    except ValueError:  # a NaN or an infinity: written as null, as plotly.js reads no NaN
        text = _NONFINITE.sub(lambda m: "null" if m.group(1) else m.group(0),
                              json.dumps(value, separators=(",", ":"), default=_plain))
    for unsafe, safe in _SWAP:
        text = text.replace(unsafe, safe)
    return text


def _parts(chart: Chart | Any) -> tuple[str, str, Any]:
    """The data and layout JSON of `chart` (its template written out), and its height."""
    spec = as_chart(chart)
    layout = dict(spec.get("layout", {}))
    named = layout.get("template")
    if isinstance(named, str):
        layout["template"] = template(named)
    height = layout.get("height", (layout.get("template") or {}).get("layout", {}).get("height"))
    return (to_json([_typed_columns(t) for t in spec.get("data", [])]), to_json(layout),
            height)


def div_html(chart: Chart | Any, div_id: str) -> str:
    """The chart's `<div>` and its `Plotly.newPlot` call (plotly.js is not included)."""
    data, layout, height = _parts(chart)
    return _div(div_id, data, layout, height, "")


def _div(div_id: str, data: str, layout: str, height: Any, load: str) -> str:
    size = f"{height}px" if isinstance(height, (int, float)) else "100%"
    return (f'<div style="height:{size}; width:100%;">{load}'
            f'<div id="{div_id}" class="plotly-graph-div" style="height:100%; width:100%;">'
            "</div><script>window.PLOTLYENV=window.PLOTLYENV || {};"
            f'if (document.getElementById("{div_id}")) {{Plotly.newPlot("{div_id}", '
            f"{data}, {layout}, {json.dumps(PLOTLY_CONFIG)})}};</script></div>")


_JS = "\0plotly.js\0"  # where plotly.js goes in the page (NUL: in no JSON, no markup)


def _page(chart: Chart | Any, div_id: str) -> tuple[str, str]:
    """The page before plotly.js and after it."""
    data, layout, height = _parts(chart)
    load = ("<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
            f"<script>{_JS}</script>")
    page = ('<!doctype html>\n<html>\n<head>\n<meta charset="utf-8" />\n'
            "<style>html, body {height: 100%;}</style>\n</head>\n<body>\n"
            f"{_div(div_id, data, layout, height, load)}\n</body>\n</html>")
    head, tail = page.split(_JS)
    return head, tail


def document(chart: Chart | Any, div_id: str = "chart") -> str:
    """The chart as one self-contained HTML page (plotly.js inlined)."""
    head, tail = _page(chart, div_id)
    return head + plotly_js() + tail


def write_html(chart: Chart | Any, path: str | Path) -> Path:
    """Write `document(chart)` to `path` (UTF-8) and return the path."""
    return write_page(path, *_page(chart, "chart"))


def write_page(path: str | Path, head: str, tail: str) -> Path:
    """Write `head + plotly_js() + tail` to `path` (UTF-8; replaced whole, `outfile`) and
    return the path; plotly.js is copied as the package's bytes, never decoded."""
    from ..outfile import replace

    return replace(path, [head.encode("utf-8"), _plotly_js_path().read_bytes(),
                          tail.encode("utf-8")])
