"""`*_logtree.json` → `conversations` and `messages` rows.

Contract: `normalize(data, ctx) -> {"conversations": rows, "messages": rows}`; `data` is the raw
bytes of one logtree file (`Trace.to_dict()`, FORMATS.md "*_logtree.json").

* Every node whose `data.type == "conversation"` is one conversation, numbered `k = 0, 1, ...`
  in document order; `conversation_id = f"{ctx.source_id}:{k}"`. `title` is the tree's title;
  `split`/`iteration` come from `ctx` (the file name says them, the tree does not).
* `section` is the header path: for every enclosing `section` node, the text of its first
  `h1`..`h6` child (HTML entities unescaped), joined with `" / "`, e.g. `Group Rollout / Prompt`.
* `group_idx`: the 0-based document-order index of the outermost enclosing section headed
  `Group Rollout` (null outside one). Checked against the rollout summaries of the sample runs:
  the k-th logged group is `group_idx` k (group sections are opened in group order).
* `traj_idx`: NOT the occurrence order. Upstream rolls the trajectories of a group out
  concurrently and each env logs its conversation when its step runs, so conversations appear in
  completion order; in the sample runs the order within a group is a permutation of `traj_idx`
  (verified with the tool outputs of `gsm8k_tool_rl`). The tree does say `traj_idx` in its
  `Trajectory Details` section (`Trajectory k Episode`, in index order, with the turn count and
  `total_return`), so conversations are matched to episodes conservatively:
    - a group's direct child sections are cut into trajectory units, each closed by its
      `Reward` section (`[Prompt, Policy Response, Reward]` or `[Conversation, Reward]`);
    - a unit's signature is (number of assistant messages, the `reward` row of its Reward
      table rounded to 3 decimals); an episode's is (`num_turns` row or number of `Turn n`
      sections, its `total_return` row rounded to 3 decimals);
    - only when the group has as many units as episodes, numbered 0..n-1, and the two multisets
      of signatures are equal, does a unit whose signature is unique get that episode's index.
      Every other conversation in a group gets null (the tree does not tell it).
* Messages: `message_idx` is the position in the list; `content` is a string content as is, or
  the `text` of `text` parts and the `thinking` of `thinking` parts joined with `"\\n"` (other
  parts, e.g. images, are skipped); `parts` is the content list as JSON text (null for string
  content). `tool_calls` is JSON text of a list: the message's `tool_calls` entries as written,
  followed by each `unparsed_tool_calls` entry wrapped as `{"type": "unparsed", "unparsed": e}`
  (so a consumer filtering `type = 'function'` sees only parsed calls); null when the message
  has neither. NUL characters and huge texts are kept as they are.
* Tolerance: an empty, cut or invalid file, or one whose top level is not an object with a `root`
  node, is reported once with `ctx.warn(None, ...)` and yields no rows. Nesting deeper than
  `MAX_DEPTH` nodes is not descended (one warning); the tree is walked without recursion.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from typing import Any, Iterator

from .. import parse as jsonl
from .base import Batch, Context, Output, clean_str as _clean_str, json_text as _json_text

__all__ = ["Logtree", "normalize", "MAX_DEPTH", "GROUP_HEADER"]

MAX_DEPTH = 500
GROUP_HEADER = "Group Rollout"
_HEADER_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_EPISODE_RE = re.compile(r"^Trajectory (\d+) Episode$")
_TURN_RE = re.compile(r"^Turn \d+$")


# ---------------------------------------------------------------------------------------------
# Small tree helpers (all iterative and depth-capped)


def _children(node: dict) -> list:
    kids = node.get("children")
    return kids if isinstance(kids, list) else []


def _iter_subtree(node: dict) -> Iterator[dict]:
    """Element nodes of a subtree in document order (the node itself first), MAX_DEPTH deep."""
    max_depth = MAX_DEPTH
    stack: list[tuple[dict, int]] = [(node, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        cur, depth = pop()
        yield cur
        kids = cur.get("children")
        if depth >= max_depth or not isinstance(kids, list):
            continue
        depth += 1
        for child in reversed(kids):
            if isinstance(child, dict):
                push((child, depth))


def _text(node: dict) -> str:
    """All text below a node, HTML entities unescaped, outer whitespace stripped."""
    kids = node.get("children")
    if isinstance(kids, list) and len(kids) == 1 and isinstance(kids[0], str):
        return html.unescape(kids[0]).strip()  # the usual leaf: one string child
    parts: list[str] = []
    max_depth = MAX_DEPTH
    stack: list[tuple[Any, int]] = [(node, 0)]
    while stack:
        cur, depth = stack.pop()
        if isinstance(cur, str):
            parts.append(cur)
        elif isinstance(cur, dict) and depth < max_depth:
            for child in reversed(_children(cur)):
                stack.append((child, depth + 1))
    return html.unescape("".join(parts)).strip()


def _header(section: dict) -> str | None:
    """Text of the first h1..h6 child of a section node."""
    for child in _children(section):
        if isinstance(child, dict) and isinstance(child.get("tag"), str) \
                and child["tag"] in _HEADER_TAGS:
            return _text(child)
    return None


def _table_rows(node: dict) -> dict[str, str]:
    """key → value text of every two-cell `tr` below a node (logtree's `table_from_dict`)."""
    out: dict[str, str] = {}
    for n in _iter_subtree(node):
        if n.get("tag") != "tr":
            continue
        cells = [c for c in _children(n) if isinstance(c, dict) and c.get("tag") in ("td", "th")]
        if len(cells) == 2 and cells[0].get("tag") == "td":
            out.setdefault(_text(cells[0]), _text(cells[1]))
    return out


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _sig_reward(value: float | None) -> float | None:
    # Tables print rewards with 3 decimals ("%.3f"); compare at that precision.
    return None if value is None or value != value else round(value, 3)


# ---------------------------------------------------------------------------------------------
# Group bookkeeping for traj_idx


class _Group:
    """Events of one `Group Rollout` section, in document order, for matching to episodes."""

    __slots__ = ("index", "units", "current", "episodes")

    def __init__(self, index: int) -> None:
        self.index = index
        self.units: list[tuple[list[tuple[int, int]], float | None]] = []
        self.current: list[tuple[int, int]] = []  # (conversation row index, assistant messages)
        self.episodes: dict[int, tuple[int | None, float | None]] = {}

    def add_conversation(self, row_index: int, n_assistant: int) -> None:
        self.current.append((row_index, n_assistant))

    def close_unit(self, reward: float | None) -> None:
        self.units.append((self.current, reward))
        self.current = []

    def parse_details(self, details: dict) -> None:
        for node in _iter_subtree(details):
            if node.get("tag") != "section":
                continue
            m = _EPISODE_RE.match(_header(node) or "")
            if not m or len(m.group(1)) > 18:  # an index that no int64 column holds
                continue
            rows = _table_rows(node)
            turns: int | None
            try:
                turns = int(rows["num_turns"])
            except (KeyError, ValueError):
                turns = sum(
                    1
                    for n in _iter_subtree(node)
                    if n.get("tag") == "section" and _TURN_RE.match(_header(n) or "")
                )
            self.episodes[int(m.group(1))] = (turns, _sig_reward(_float(rows.get("total_return"))))

    def resolve(self) -> dict[int, int]:
        """conversation row index → traj_idx, for the units that match unambiguously."""
        units = list(self.units)
        if self.current:
            units.append((self.current, None))
        n = len(units)
        if n == 0 or n != len(self.episodes) or set(self.episodes) != set(range(n)):
            return {}
        unit_sigs = [(sum(a for _, a in convs), _sig_reward(r)) for convs, r in units]
        ep_sigs = {k: sig for k, sig in self.episodes.items()}
        if any(r is None for _, r in unit_sigs) or any(r is None for _, r in ep_sigs.values()):
            return {}
        if Counter(unit_sigs) != Counter(ep_sigs.values()):
            return {}  # the two sides disagree: the tree does not follow the expected shape
        by_sig: dict[tuple, list[int]] = {}
        for k, sig in ep_sigs.items():
            by_sig.setdefault(sig, []).append(k)
        out: dict[int, int] = {}
        for (convs, _), sig in zip(units, unit_sigs):
            candidates = by_sig[sig]
            if len(candidates) == 1:
                for row_index, _ in convs:
                    out[row_index] = candidates[0]
        return out


# ---------------------------------------------------------------------------------------------
# Messages


def _message_row(msg: dict, conversation_id: str, idx: int, base: dict, problems: list[str]) -> dict:
    role = msg.get("role")
    if role is not None and not isinstance(role, str):
        problems.append(f"message {idx}: role is not a string")
        role = None
    content = msg.get("content")
    parts_json: str | None = None
    text: str | None
    if content is None or isinstance(content, str):
        text = content
    elif isinstance(content, list):
        pieces: list[str] = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                kind = part.get("type")
                value = part.get("text") if kind == "text" else part.get("thinking") if kind == "thinking" else None
                if isinstance(value, str):
                    pieces.append(value)
        text = "\n".join(pieces)
        parts_json = _json_text(content)
    else:
        problems.append(f"message {idx}: content is a {type(content).__name__}")
        text = None
        parts_json = _json_text(content)

    calls: list | None = None
    tool_calls = msg.get("tool_calls")
    if tool_calls is not None:
        calls = list(tool_calls) if isinstance(tool_calls, list) else [tool_calls]
    unparsed = msg.get("unparsed_tool_calls")
    if unparsed is not None:
        calls = calls or []
        entries = unparsed if isinstance(unparsed, list) else [unparsed]
        calls.extend({"type": "unparsed", "unparsed": u} for u in entries)

    return {
        **base,
        "conversation_id": conversation_id,
        "message_idx": idx,
        "role": _clean_str(role) if role is not None else None,
        "content": _clean_str(text) if text is not None else None,
        "parts": parts_json,
        "tool_calls": _json_text(calls) if calls is not None else None,
        "tool_call_id": _clean_str(msg["tool_call_id"]) if isinstance(msg.get("tool_call_id"), str) else None,
        "name": _clean_str(msg["name"]) if isinstance(msg.get("name"), str) else None,
        "trainable": msg["trainable"] if isinstance(msg.get("trainable"), bool) else None,
    }


# ---------------------------------------------------------------------------------------------


def _load(data: bytes, ctx: Context) -> dict | None:
    if not data or not data.strip():
        ctx.warn(None, "logtree file is empty")
        return None
    try:
        tree = jsonl.loads(data)
    except RecursionError:
        ctx.warn(None, "logtree JSON is nested too deeply to parse; skipped")
        return None
    except ValueError as exc:  # JSONDecodeError (cut file) and UnicodeDecodeError
        ctx.warn(None, f"logtree is not valid JSON, probably cut while being written ({exc})")
        return None
    if not isinstance(tree, dict) or not isinstance(tree.get("root"), dict):
        ctx.warn(None, "logtree JSON has no `root` node object; skipped")
        return None
    return tree


def normalize(data: bytes, ctx: Context) -> dict[str, list[dict]]:
    conversations: list[dict] = []
    messages: list[dict] = []
    tree = _load(data, ctx)
    if tree is None:
        return {"conversations": conversations, "messages": messages}

    base = ctx.base()
    title = tree.get("title")
    title = _clean_str(title) if isinstance(title, str) else None
    groups: list[_Group] = []
    too_deep = False

    # Frame: (node, depth, header path, group, in_unit_section, in_details).
    # `in_unit_section` is True below a direct child section of a group (so deeper sections are
    # not mistaken for the group's own children).
    stack: list[tuple[dict, int, tuple[str, ...], _Group | None, bool, bool]] = [
        (tree["root"], 0, (), None, False, False)
    ]
    while stack:
        node, depth, path, group, in_child, in_details = stack.pop()

        if node.get("tag") == "section":
            header = _header(node)
            if header is not None:
                path = path + (header,)
            if group is None and header == GROUP_HEADER:
                group = _Group(len(groups))
                groups.append(group)
            elif group is not None and not in_child:
                # A direct child section of the group: a trajectory's Prompt/Response/
                # Conversation, the Reward that closes it, or the Trajectory Details.
                in_child = True
                if header == "Reward":
                    group.close_unit(_float(_table_rows(node).get("reward")))
                elif header == "Trajectory Details":
                    in_details = True
                    group.parse_details(node)

        data = node.get("data")
        if isinstance(data, dict) and data.get("type") == "conversation":
            k = len(conversations)
            conversation_id = f"{ctx.source_id}:{k}"
            raw = data.get("messages")
            problems: list[str] = []
            if not isinstance(raw, list):
                if raw is not None:
                    problems.append("`messages` is not a list")
                raw = []
            n_rows = 0
            n_assistant = 0
            for idx, msg in enumerate(raw):
                if not isinstance(msg, dict):
                    problems.append(f"message {idx} is not an object (skipped)")
                    continue
                messages.append(_message_row(msg, conversation_id, idx, base, problems))
                n_rows += 1
                if msg.get("role") == "assistant":
                    n_assistant += 1
            if problems:
                ctx.warn(None, f"conversation {k} ({' / '.join(path)}): " + "; ".join(problems))
            if group is not None and not in_details:
                group.add_conversation(k, n_assistant)
            conversations.append(
                {
                    **base,
                    "split": ctx.split,
                    "iteration": ctx.iteration,
                    "conversation_id": conversation_id,
                    "section": _clean_str(" / ".join(path)) if path else None,
                    "group_idx": group.index if group is not None else None,
                    "traj_idx": None,
                    "n_messages": n_rows,
                    "title": title,
                }
            )

        if depth >= MAX_DEPTH:
            if not too_deep and any(isinstance(c, dict) for c in _children(node)):
                too_deep = True
                ctx.warn(None, f"logtree nests deeper than {MAX_DEPTH} nodes; deeper nodes skipped")
            continue
        for child in reversed(_children(node)):
            if isinstance(child, dict):
                stack.append((child, depth + 1, path, group, in_child, in_details))

    for group in groups:
        for row_index, traj_idx in group.resolve().items():
            conversations[row_index]["traj_idx"] = traj_idx
    return {"conversations": conversations, "messages": messages}


class Logtree:
    """`*_logtree.json` → `conversations` and `messages`."""

    kinds = ("logtree",)
    tables = ("conversations", "messages")

    def normalize(self, batch: Batch) -> Output:
        out = Output()
        out.rows(normalize(batch.data, batch.ctx))
        return out
