"""Tools about rollouts and transcripts: `rollouts` and `search_transcripts`.

Contract: `rollouts` without an iteration lists what a run logged per split and iteration
(`Store.rollout_index`); with one, a page of its trajectories there, lowest total reward first
(or highest), and the logtree conversations the tree ties to each (`Store.trajectories`,
`Store.messages`), every message cut to `chars` characters with the count of what was cut.
A conversation the tree ties only to a group (not to one trajectory) is shown once, under
its group, and says so. `search_transcripts` is a page of the messages whose text contains
some text across every run (or a scope), with a snippet around the first match
(`Store.search`), whole in markdown too (`context` says how long it is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import Field

from ...numbers import INT64_MAX
from ..answer import UNPAGED, Answer, Page
from ..args import MaxChars, Offset, Run, Runs, TextFormat, limit
from .base import Toolbox, tool
from .common import page, run_header, said

if TYPE_CHECKING:
    import polars as pl

    from ...store import Store

TrajectoryLimit = limit(5, 100, "trajectories")
SearchLimit = limit(20, 500, "messages")
IndexLimit = 200  # (split, iteration) rows of the index shown

Iteration = Annotated[Optional[int], Field(
    ge=0, le=INT64_MAX,
    description="The training step whose rollouts to show; omit to list the iterations with "
                "rollouts (per split).", examples=[10])]
Split = Annotated[str, Field(
    description="`train`, or `eval/<evaluator>` (the index lists them).",
    examples=["train", "eval/test"])]
Order = Annotated[Literal["lowest", "highest"], Field(
    description="Which trajectories first: lowest or highest total_reward.")]
Chars = Annotated[int, Field(
    ge=0, le=20000, description="Characters of each message to show (the rest is counted, not "
                                "shown); 0 shows no conversations.", examples=[600])]


class RolloutTools(Toolbox):
    """rollouts, search_transcripts."""

    @tool("Rollouts of a run")
    def rollouts(self, run: Run, iteration: Iteration = None, split: Split = "train",
                 order: Order = "lowest", chars: Chars = 600, limit: TrajectoryLimit = 5,
                 offset: Offset = 0, max_chars: MaxChars = None) -> str:
        """A run's trajectories at one iteration, lowest (or highest) total reward first, with
        their conversations (prompts, responses, tool calls) cut to a budget. Without an
        iteration, the iterations and splits that have rollouts."""
        store = self.store
        found = store.resolve([run])[0]
        out = self.answer(max_chars)
        if iteration is None:
            index = store.rollout_index(found.run_id)
            out.line(f"# rollouts of {run_header(found)}: {index.height} (split, iteration) "
                     "with trajectories or conversations")
            out.table(*page(index, 0, IndexLimit), what="iterations",
                      more=f"give iteration=N for any iteration (the index lists the first "
                           f"{IndexLimit}), or {UNPAGED}")
            return out.note("Give iteration (and split) to see trajectories and their "
                            "conversations.").render()
        t = store.trajectories(found.run_id, iteration=iteration, split=split,
                               highest=order == "highest", limit=limit, offset=offset)
        total = int(t["n_total"][0]) if t.height else _count(store, found.run_id, split,
                                                               iteration)
        out.line(f"# {split} iteration {iteration} of {run_header(found)}: {total} "
                 f"trajectories, {order} total_reward first")
        shown = t.drop("n_total", "metrics")
        out.table(shown.to_arrow(), Page(offset, limit, total), what="trajectories")
        if chars and t.height:
            self._conversations(out, found.run_id, t, iteration, split, chars)
        return out.render()

    def _conversations(self, out: Answer, run_id: str, t: "pl.DataFrame", iteration: int,
                       split: str, chars: int) -> None:
        import polars as pl

        groups = sorted(set(t["group_idx"].to_list()))
        m = self.store.messages(run_id, iteration=iteration, groups=groups, split=split,
                                chars=chars)
        if m.height == 0:
            out.line("(the logtree holds no conversation for these trajectories)")
            return
        for row in t.iter_rows(named=True):
            g, k = row["group_idx"], row["traj_idx"]
            own = m.filter((pl.col("group_idx") == g) & (pl.col("traj_idx") == k))
            if own.height:
                out.text(f"## group {g}, trajectory {k} (total_reward "
                         f"{row['total_reward']})\n" + _messages(own))
        for g in groups:
            shared = m.filter((pl.col("group_idx") == g) & pl.col("traj_idx").is_null())
            if shared.height:
                out.text(f"## group {g}: conversations the logtree ties to the group, not to "
                         "one trajectory\n" + _messages(shared))

    @tool("Search transcripts")
    def search_transcripts(self, text: Annotated[str, Field(
                               min_length=1, description="Text to find in message contents "
                                                         "(any case).",
                               examples=["\\boxed", "I cannot"])],
                           runs: Runs = None,
                           role: Annotated[Optional[Literal["system", "user", "assistant",
                                                            "tool"]], Field(
                               description="Only messages of this role.")] = None,
                           context: Annotated[int, Field(
                               ge=0, le=2000, description="Characters shown either side of "
                                                          "the first match.")] = 80,
                           limit: SearchLimit = 20, offset: Offset = 0,
                           format: TextFormat = "markdown", max_chars: MaxChars = None) -> str:
        """Find messages containing some text across every run's logged conversations (the
        transcripts view): where each was logged (run, split, iteration, group, trajectory,
        conversation) and a snippet around the match."""
        found = self.store.search(text, runs=runs, role=role, context=context, limit=limit,
                                  offset=offset)
        if not found.height and offset:  # past the last page: count them on the first
            found_first = self.store.search(text, runs=runs, role=role, limit=1)
            total = int(found_first["n_total"][0]) if found_first.height else 0
        else:
            total = int(found["n_total"][0]) if found.height else 0
        out = self.answer(max_chars).line(f"{total} message{'s' if total != 1 else ''} "
                                          f"contain {said(text)}" + (f" (role {role})" if role else "")
                                          + ":")
        table = found.drop("n_total").to_arrow()
        return out.table(table, Page(offset, limit, total), fmt=format, what="messages",
                         whole=("snippet",)).render()  # as long as `context` asked


def _messages(m: "pl.DataFrame") -> str:
    """Conversations as `**role**: text` lines, a conversation's messages together."""
    out: list[str] = []
    current = None
    for r in m.iter_rows(named=True):
        if r["conversation_id"] != current:
            current = r["conversation_id"]
            out.append(f"### {r['section'] or 'conversation'} ({current})")
        cut = r["content_chars"] - len(r["content"])
        more = f" … (+{cut:,} characters)" if cut > 0 else ""
        calls = f"\n  tool calls: {r['tool_calls']}" if r["tool_calls"] else ""
        who = r["role"] + (f" {r['name']}" if r["name"] else "")
        out.append(f"**{who}**: {r['content']}{more}{calls}")
    return "\n".join(out)


def _count(store: "Store", run_id: str, split: str, iteration: int) -> int:
    """How many trajectories there are when the page asked for is past the last one."""
    first = store.trajectories(run_id, iteration=iteration, split=split, limit=1)
    return int(first["n_total"][0]) if first.height else 0
