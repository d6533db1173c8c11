"""Agent access: the MCP server (`runstore mcp`) and the skill shipped for coding agents.

Contract: `server.build(store, ...)` is an MCP server (the official `mcp` SDK) whose tools
(`tools.TOOLBOXES`) read the store through `Store` only, typed and bounded (`answer`,
`args`); `server.serve(...)` runs it over stdio. `skill` is the SKILL.md that `runstore
skill` prints and installs. Nothing here writes the store or the run directories. A sibling
of `ui/`: it imports `store` and the layers below, never the CLI or the web UI.
"""
