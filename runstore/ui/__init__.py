"""`runstore ui`: a local web app over the store (docs/ui.md).

Layout: `server` (bind, print the URL, serve, the `--watch` thread) → `app` (routes, static
files, live events) → `security` (Host, token, same-origin writes) and `api` (one read-only
`Store` call per endpoint) → `queries` (the statements); chart lines (smoothing, min/max
downsampling) are `present.series`. The pages are ES modules in `static/`, with plotly.js
served from the installed plotly package. Every answer comes through `Store` (its sandbox,
its snapshot, its whole results: a check with its rule counts, the runs of each group), so
the UI sees exactly what the CLI sees; like the CLI, it imports `runstore.store`, `present`
and the base modules, never the packages below (an import-linter contract).

Nothing here is imported by `import runstore`; starlette and uvicorn load only when the
server starts.
"""
