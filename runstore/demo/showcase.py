"""`runstore demo`: write a realistic run tree, ingest it, and answer a few questions.

Contract: `run_demo(base, store=None, echo=print)` writes the demo tree (`demo.default_specs()`
with seed `DEMO_SEED`) into `base/runs` unless it is already there (aside, in
`base/.runs.partial`, then renamed into place, so a stopped demo leaves no partial tree),
ingests it into `store` (default `base/store`), and prints the answers to the questions the
design names (which runs went unstable, reward trends, slow spans, checkpoints, cost and
crashes, eval scores), each with the SQL that answered it, so the output doubles as a
tutorial; it ends with the `runstore sql` and `runstore ui` lines to try next. Returns the
ingest report. A store that already holds runs or eval stores from elsewhere (one's own store,
given by an exported `RUNSTORE_STORE` or `--store`; a demo store whose tree has moved) is a
`UsageError` naming one of them, before anything is written: the demo never mixes its runs
into other runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..errors import StoreNotFound, UsageError
from ..present import render as output
from ..store import Store
from .specs import DEMO_SEED
from .tree import generate_tree

if TYPE_CHECKING:
    from ..store.writing import IngestReport

QUESTIONS: list[tuple[str, str]] = [
    ("What kinds of runs are there, and in which layout?",
     "select kind, layout, count(*) as runs from runs group by kind, layout order by kind, layout"),
    ("Which runs had KL above 0.01, when, and how high?",
     "select run_name, max_kl_v1, max_kl_v2, steps_over, first_step_over, longest_streak_over\n"
     "from kl_health where flagged order by run_name"),
    ("Which runs have the best recent reward?",
     "select run_name, kind, last_step, round(last_reward_ma10, 3) as reward_ma10, status\n"
     "from run_summary where last_reward_ma10 is not null\n"
     "order by last_reward_ma10 desc limit 5"),
    ("Which spans dominate step time in each RL run? (share adds up concurrent spans, so it "
     "can pass 1; wall_share counts the wall time they cover, at most 1)",
     "select run_name, name, round(total_s, 1) as total_s, round(share, 3) as share,\n"
     "       round(wall_s, 1) as wall_s, round(wall_share, 3) as wall_share\n"
     "from slowest_spans where rank = 1 order by total_s desc limit 5"),
    ("Which is the latest checkpoint of each run?",
     "select run_name, latest_name, final_name from latest_checkpoints order by run_name"),
    ("What did each run cost, and which runs crashed with what error? (tinker-cookbook 0.6 "
     "logs its cost; logs.log keeps the traceback)",
     "select run_name, status, round(cost_usd, 4) as cost_usd, last_error from run_summary\n"
     "where cost_usd is not null order by last_error is null, cost_usd desc limit 5"),
    ("Which checkpoint scored best on each benchmark of the eval store?",
     "select benchmark, run_name, checkpoint, score\n"
     "from (select *, row_number() over (partition by benchmark\n"
     "                                   order by score desc, step desc, checkpoint) as place\n"
     "      from eval_scores where run_id is not null)\n"
     "where place = 1 order by benchmark"),
]


# What a store holds from outside the tree at $tree (either spelling of it): its runs and
# eval stores by the directory they were read from.
FOREIGN = """
select count(*) as n, min(path) as example
from (select run_path as path from runs union select eval_store from eval_runs)
where not (path = $tree or starts_with(path, $tree || '/')
           or path = $spelled or starts_with(path, $spelled || '/'))
   or path is null
"""


def run_demo(base: Path, *, store: str | None = None,
             echo: Callable[[str], None] = print) -> IngestReport:
    base = Path(base)
    runs_dir = base / "runs"
    st = Store(store if store else base / "store")
    _refuse_other_runs(st, runs_dir)
    # A store path no writer can use is said before the tree is written (after the demo's own
    # directory, whose error says to choose another DIRECTORY).
    base.mkdir(parents=True, exist_ok=True)
    st.check_writable()
    if not runs_dir.is_dir():
        # Written aside, then renamed into place: a demo stopped while writing (Ctrl-C, a
        # kill) leaves no part of a tree that the next demo would take for the whole one.
        partial = base / ".runs.partial"
        if partial.is_dir():
            shutil.rmtree(partial)
        generate_tree(partial, seed=DEMO_SEED)
        partial.rename(runs_dir)
        echo(f"wrote a demo run tree to {runs_dir}")
    report = st.ingest([runs_dir])
    echo(f"ingested into {st.path}: {report.summary()}")
    for question, sql in QUESTIONS:
        echo("")
        echo(f"## {question}")
        echo("")
        echo("    " + sql.replace("\n", "\n    "))
        echo("")
        echo(output.render(st.arrow(sql), "table", width=110).rstrip("\n"))
    echo("")
    echo(f"Ask your own: runstore --store {st.path} sql \"select * from run_summary\"")
    echo(f"Browse it:    runstore --store {st.path} ui   (then open http://127.0.0.1:8765)")
    return report


def _refuse_other_runs(st: Store, runs_dir: Path) -> None:
    """A `UsageError` if `st` holds runs or eval stores read from outside `runs_dir`."""
    try:
        (found,) = st.rows(FOREIGN, {"tree": str(runs_dir.resolve()),
                                     "spelled": str(runs_dir.absolute())}).to_pylist()
    except StoreNotFound:
        return  # a new store: the demo makes it
    if found["n"]:
        raise UsageError(
            f"the store {st.path} already holds {found['n']} run(s) or eval store(s) not read "
            f"from the demo's tree {runs_dir} (e.g. {found['example']}), and the demo does "
            "not mix its runs into others. Give it a store of its own (`runstore --store "
            "NEW_DIR demo`, or unset RUNSTORE_STORE), or delete this store if an earlier "
            "demo wrote it")
