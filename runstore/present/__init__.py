"""Present: query results made readable — text formats, plotly charts, the HTML report, trace
export.

`render.py` (table, csv, json, jsonl, markdown; the format list), `charts/` (plotly figures),
`report.py` (one self-contained HTML file), `trace_export.py` (Chrome/Perfetto trace JSON),
`scope.py` (which runs a picture is about). Everything reads the store through
`query.reader.Reader`.
"""
