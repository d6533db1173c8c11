"""`runstore ui`: a local web app over the store (docs/ui.md).

Layout: `server` (bind, print the URL, serve, the `--watch` thread) → `app` (routes, static
files, live events) → `security` (Host, token, same-origin writes) and `api` (one read-only
`Store` call per endpoint) → `queries` (the statements) and `series` (chart lines:
smoothing, min/max downsampling). The pages are ES modules in `static/`, with plotly.js
served from the installed plotly package. Every query goes through `Store` (its sandbox, its
snapshot), so the UI sees exactly what the CLI sees; what `Store` does not return whole (a
check's rule counts, the runs of each group, smoothing, the trace export) comes from the same
health, analysis and present functions the CLI's commands use.

Nothing here is imported by `import runstore`; starlette and uvicorn load only when the
server starts.
"""
