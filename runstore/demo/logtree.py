"""Logtree documents (`Trace.to_dict()` of tinker-cookbook's logtree) and their HTML sibling.

Contract: `_el`, `_section`, `_table` and `_conversation` build the JSON node tree of a
`*_logtree.json` file; `_render_html(title, root)` renders the same tree as the `.html` file
beside it. Text children are stored HTML-escaped (`_text`), as upstream does. `_iso` formats
the `started_at` / "Generated" timestamps. Pure functions, no I/O.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence


def _iso(epoch: float, *, micro: bool = True) -> str:
    # Naive "local" time as upstream writes it; UTC keeps the output machine-independent.
    dt = datetime.fromtimestamp(epoch, tz=timezone.utc).replace(tzinfo=None)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f" if micro else "%Y-%m-%dT%H:%M:%S")


def _el(tag: str, children: Iterable[Any] = (), cls: str | None = None,
        data: dict[str, Any] | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {"tag": tag, "attrs": {"class": cls} if cls else {},
                            "children": list(children)}
    if data is not None:
        node["data"] = data
    return node


def _text(s: str) -> str:
    return html.escape(s, quote=False)


def _section(depth: int, title: str, body: list[Any]) -> dict[str, Any]:
    level = min(depth + 1, 6)  # h2..h6 by depth, capped at 6
    return _el("section", [_el(f"h{level}", [_text(title)], f"lt-h{level}"),
                           _el("div", body, "lt-section-body")], "lt-section")


def _table(pairs: Sequence[tuple[str, Any]], caption: str | None = None) -> list[dict[str, Any]]:
    head = _el("thead", [_el("tr", [_el("th", ["key"]), _el("th", ["value"])])])
    body = _el("tbody", [_el("tr", [_el("td", [_text(str(k))]), _el("td", [_text(str(v))])])
                         for k, v in pairs])
    out = [_el("div", [_text(caption)], "lt-table-caption")] if caption else []
    return out + [_el("table", [head, body], "lt-table")]


def _conversation(messages: list[dict[str, Any]]) -> dict[str, Any]:
    # With `data` present upstream omits the raw-HTML children.
    return _el("div", [], data={"type": "conversation", "messages": messages})


_CSS = """
body { font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, sans-serif;
       line-height: 1.45; max-width: 1200px; margin: 0 auto; padding: 14px; }
.lt-root { background: white; padding: 1.2rem 1.4rem; border-radius: 8px; }
.lt-title { color: #2563eb; border-bottom: 2px solid #e5e7eb; }
.lt-subtitle { color: #666; font-size: 0.875rem; }
.lt-section { margin: 0.95rem 0; padding-left: 0.75rem; border-left: 2px solid #e5e7eb; }
.lt-table { border-collapse: collapse; } .lt-table td, .lt-table th { border: 1px solid #ddd; }
.lt-message { white-space: pre-wrap; margin: 0.3rem 0; }
"""


def _render_html(title: str, root: dict[str, Any]) -> str:
    parts = ["<!doctype html>\n<html lang=\"en\">\n<head>\n<title>", _text(title),
             "</title>\n<meta charset=\"UTF-8\">\n<style>", _CSS, "</style>\n</head>\n"]
    _render_node(root, 0, parts)
    parts.append("</html>\n")
    return "".join(parts)


def _render_node(node: Any, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(node, str):
        out.append(f"{pad}{node}\n")  # already escaped text
        return
    attrs = "".join(f' {k}="{html.escape(v)}"' for k, v in node["attrs"].items())
    out.append(f"{pad}<{node['tag']}{attrs}>\n")
    data = node.get("data")
    if data and data.get("type") == "conversation":
        for m in data["messages"]:
            content = m["content"]
            if not isinstance(content, str):
                content = "\n".join(p.get("text") or p.get("thinking") or "" for p in content)
            # Raw UTF-8 with &, <, > escaped; control characters (even NUL) pass through.
            out.append(f'{pad}  <div class="lt-message lt-message-{m["role"]}">'
                       f"<b>{m['role']}</b>: {_text(content)}</div>\n")
    for child in node["children"]:
        _render_node(child, depth + 1, out)
    out.append(f"{pad}</{node['tag']}>\n")
