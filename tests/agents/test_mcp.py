"""`runstore mcp` through the SDK's own stdio client: the tools it lists, their answers against
the CLI's, every tool refusing bad arguments with a line that says what to send, the bounds
of every answer (rows and characters, and the offsets that continue a cut answer), the store
chosen as for every command, and a start that imports nothing heavy before the first call.

The demo store (`ui_demo`) is shared and read-only; `runstore mcp` answers over a real pipe.
What the answers hold is checked against the CLI here and against the demo tree's own files in
test_mcp_answers.py; hostile SQL is test_mcp_sandbox.py's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcpkit import REPO, McpSession, clean_env, csv_block, csv_rows, notice_offset, table

import oracle
import runstore
from runstore.agents import answer
from runstore.cli import agents as cli_agents
from storekit import cli

BASE_TOOLS = ["list_runs", "describe_run", "compare_runs", "metric_keys", "metric_history",
              "check", "rollouts", "search_transcripts", "slowest_spans", "step_timeline", "sql",
              "views"]
FLAGGED = "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"
RL_RUN = "math_rl_sweep/qwen3-8b/lr_1e-5"


def expected_tools() -> list[str]:
    return BASE_TOOLS[:6] + ["doctor"] + BASE_TOOLS[6:]


@pytest.fixture(scope="module")
def store(ui_demo: tuple[Path, Path]) -> Path:
    return ui_demo[1]


@pytest.fixture(scope="module")
def n_runs(ui_demo: tuple[Path, Path]) -> int:
    """How many runs the demo tree holds, counted from its directories (tests/oracle.py)."""
    return len(oracle.run_dirs(ui_demo[0]))


@pytest.fixture(scope="module")
def session(store: Path):  # type: ignore[no-untyped-def]
    with McpSession(store) as s:
        yield s
        assert "Traceback" not in s.stderr(), s.stderr()


# ---------------------------------------------------------------------------------------------
# What is offered


def test_tools_are_typed_described_and_read_only(session: McpSession) -> None:
    tools = session.tools()
    assert [t.name for t in tools] == expected_tools()
    for t in tools:
        assert t.title and t.description and len(t.description) > 60, t.name
        hints = t.annotations
        assert hints.read_only_hint is True and hints.destructive_hint is False, t.name
        assert hints.idempotent_hint is True and hints.open_world_hint is False, t.name
        schema = t.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False, t.name
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (t.name, name)
        assert t.output_schema is None, "answers are text"
    props = {t.name: t.input_schema["properties"] for t in tools}
    # The arguments an agent fills in from the question carry examples.
    for tool, arg in [("describe_run", "run"), ("list_runs", "runs"), ("list_runs", "where"),
                      ("metric_history", "keys"), ("sql", "query"), ("sql", "params"),
                      ("search_transcripts", "text"), ("check", "rules")]:
        assert props[tool][arg].get("examples"), (tool, arg)
    assert props["list_runs"]["limit"]["maximum"] == 1000
    assert props["list_runs"]["limit"]["minimum"] == 1
    assert props["metric_history"]["x"]["enum"] == ["step", "time", "tokens", "cost"]


def test_initialize_says_what_the_server_is(store: Path) -> None:
    with McpSession(store) as s:
        assert s.client.server_info.name == "runstore"
        assert s.client.server_capabilities.tools is not None
        assert "list_runs" in s.client.instructions and "check" in s.client.instructions


def test_the_cli_and_the_server_share_the_bounds() -> None:
    assert (cli_agents.DEFAULT_CHARS, cli_agents.MIN_CHARS, cli_agents.MAX_CHARS) == \
        (answer.DEFAULT_CHARS, answer.MIN_CHARS, answer.MAX_CHARS)


# ---------------------------------------------------------------------------------------------
# Same rows as the command line


COLUMNS = ["run_id", "run_label", "kind", "status", "learning_rate", "best_reward", "max_kl",
           "kl_flagged"]


@pytest.mark.parametrize("tool,args,command", [
    ("list_runs", {"columns": COLUMNS}, ["runs", "--columns", ",".join(COLUMNS)]),
    ("list_runs", {"runs": "math_rl_sweep/*", "kind": "rl", "where": "best_reward > 0.5",
                   "columns": ["run_id", "run_label", "best_reward"]},
     ["runs", "--name", "math_rl_sweep/*", "--kind", "rl", "--where", "best_reward > 0.5",
      "--columns", "run_id,run_label,best_reward"]),
    ("metric_keys", {"like": "reward"}, ["keys", "--like", "reward"]),
    ("metric_keys", {"runs": "sl/*"}, ["keys", "--runs", "sl/*"]),
    ("sql", {"query": "select run_label, max_kl_v1, nan_steps from kl_health order by 1"},
     ["sql", "select run_label, max_kl_v1, nan_steps from kl_health order by 1"]),
    ("sql", {"query": "select step, value from metrics where run_name = $r and key = $k "
                      "order by step", "params": {"r": FLAGGED, "k": "optim/kl_sample_train_v1"}},
     ["sql", "select step, value from metrics where run_name = $r and key = $k order by step",
      "--param", f"r={FLAGGED}", "--param", "k=optim/kl_sample_train_v1"]),
    ("sql", {"query": "select 'NaN'::double as n, 'inf'::double as i, null as z, [1, 2] as l"},
     ["sql", "select 'NaN'::double as n, 'inf'::double as i, null as z, [1, 2] as l"]),
])
def test_answers_are_the_cli_rows(session: McpSession, store: Path, tool: str,
                                  args: dict[str, Any], command: list[str]) -> None:
    text = session.ok(tool, {**args, "format": "csv", "limit": 1000})
    result = cli(store, *command, "-F", "csv")
    assert result.exit_code == 0, result.output
    got = csv_block(text) if tool != "sql" else text
    assert got == result.stdout
    assert len(csv_rows(result.stdout)) > 1  # a question with an answer


def test_markdown_answers_are_the_cli_markdown(session: McpSession, store: Path) -> None:
    text = session.ok("metric_keys", {"like": "kl"})
    assert text.split("\n", 1)[1] == cli(store, "keys", "--like", "kl", "-F", "markdown").stdout
    assert "NaN" in session.ok("sql", {"query": "select 'NaN'::double as x"})
    assert "-Infinity" in session.ok("sql", {"query": "select '-inf'::double as x"})


@pytest.mark.parametrize("fmt", ["csv", "markdown"])
def test_an_empty_answer_keeps_the_cli_header(session: McpSession, store: Path, fmt: str) -> None:
    # `limit 0` is how one asks for a result's columns: the header is the answer.
    query = "select * from kl_health limit 0"
    head = cli(store, "sql", query, "-F", fmt).stdout
    assert head.count("\n") == (2 if fmt == "markdown" else 1)
    assert session.ok("sql", {"query": query, "format": fmt}) == head + "(no rows)\n"
    keys = session.ok("metric_keys", {"like": "no-such-key", "format": fmt})
    assert keys.split("\n", 1)[1] == cli(store, "keys", "--like", "no-such-key", "-F",
                                         fmt).stdout + "(no keys)\n"


@pytest.mark.parametrize("fmt", ["csv", "markdown"])
def test_dates_past_python_years_are_the_cli_text(session: McpSession, store: Path,
                                                  fmt: str) -> None:
    # DuckDB's infinities, years past 9999 and 24:00: Python's datetime cannot hold them. The CLI
    # reads these plain columns as DuckDB's Python values, the tool as Arrow (its worker's).
    for query in ("select 'infinity'::timestamp as t, '-infinity'::date as d, "
                  "date '5877642-06-25' as far, timestamp '294247-01-10 04:00:54' as late",
                  "select time '24:00:00' as day_end, time '12:00:00' as noon"):
        text = session.ok("sql", {"query": query, "format": fmt})
        assert text == cli(store, "sql", query, "-F", fmt).stdout

def test_check_has_the_cli_rows_and_says_its_exit_status(session: McpSession, store: Path) -> None:
    text = session.ok("check", {"format": "csv"})
    result = cli(store, "check", "-F", "csv")
    assert result.exit_code == 1
    assert text.startswith("FIRED: 1 (run, rule) row; `runstore check` would exit 1.\n")
    summary = result.stderr.strip().splitlines()[-1]
    assert text.split("\n")[1] == summary
    rows = csv_rows("\n".join(text.split("\n")[2:]))
    assert [r[1:] for r in rows] == csv_rows(result.stdout)
    assert rows[0][0] == "run_id" and rows[1][0] == cli(
        store, "sql", "select run_id from runs where run_name = $n", "--param", f"n={FLAGGED}",
        "-F", "csv").stdout.split()[1]
    quiet = session.ok("check", {"rules": ["rise(time/total) > 2"], "default_rules": False})
    assert quiet.startswith("OK: no rule fired; `runstore check` would exit 0.\n")
    assert cli(store, "check", "--rule", "rise(time/total) > 2", "--no-default-rules").exit_code == 0
    wrong = session.error("check", {"rules": ["optim/entrpy < 0.5"]})
    failed = cli(store, "check", "--rule", "optim/entrpy < 0.5")
    assert failed.exit_code == 2
    assert wrong == failed.stderr.strip() + " (`runstore check` would exit 2)"
    assert "did you mean optim/entropy?" in wrong


@pytest.mark.parametrize("tool, args", [
    ("check", {"threshold": "x"}), ("check", {"rulez": ["a > 1"]}), ("check", {"limit": 0}),
    ("doctor", {"finding": "kl_spike"}), ("doctor", {"explain": "maybe"}), ("doctor", {"x": 1}),
])
def test_an_argument_the_schema_refuses_says_the_exit_status_too(
        session: McpSession, tool: str, args: Any) -> None:
    """check and doctor say the status their command would exit with for every error, an
    argument of the wrong type or name included (a usage error: 2)."""
    wrong = session.error(tool, args)
    assert wrong.endswith(f"(`runstore {tool}` would exit 2)"), wrong


def test_doctor_has_the_cli_rows_and_says_its_exit_status(session: McpSession,
                                                          store: Path) -> None:
    text = session.ok("doctor", {"format": "csv", "limit": 2000})
    result = cli(store, "doctor", "-F", "csv")
    assert result.exit_code == 1  # the demo's KL spike is an error finding
    assert text.startswith("ERRORS: ") and "`runstore doctor` would exit 1.\n" in text
    assert text.split("\n")[1] == result.stderr.strip().splitlines()[-1]
    rows = csv_rows("\n".join(text.split("\n")[2:]))
    assert rows[0][0] == "run_id" and [r[1:] for r in rows] == csv_rows(result.stdout)
    ids = dict(csv_rows(cli(store, "sql", "select run_name, run_id from runs", "-F",
                            "csv").stdout)[1:])
    assert all(ids[r[1]] == r[0] for r in rows[1:])  # each row's run_id is its run's
    one = session.ok("doctor", {"runs": "sl/*", "finding": ["no_improvement"],
                                "explain": True})
    quiet = cli(store, "doctor", "sl/*", "--finding", "no_improvement", "--explain")
    assert quiet.exit_code == 0 and one.startswith("No error finding; `runstore doctor` "
                                                   "would exit 0.\n")
    assert "## no_improvement (" in one and "-- sql/doctor/no_improvement.sql" in one
    wrong = session.error("doctor", {"finding": ["kl_spik"]})
    failed = cli(store, "doctor", "--finding", "kl_spik")
    assert failed.exit_code == 2
    assert wrong == failed.stderr.strip() + " (`runstore doctor` would exit 2)"
    described = session.ok("describe_run", {"run": FLAGGED})
    header, found = table(described, 5)
    assert header[:2] == ["finding", "severity"] and ["kl_spike", "error"] == found[0][:2]


def test_doctor_statements_are_whole_so_the_sql_tool_runs_them(session: McpSession,
                                                               store: Path) -> None:
    # The markdown answer (the default) cuts long text cells; a statement cut is no statement.
    header, rows = table(session.ok("doctor", {"max_chars": answer.MAX_CHARS}))
    full = csv_rows(cli(store, "doctor", "-F", "csv").stdout)
    assert [r[header.index("statement")] for r in rows] == \
        [r[full[0].index("statement")] for r in full[1:]]
    assert any(len(r[header.index("statement")]) > 200 for r in rows)


def test_snippets_hold_the_context_asked_for(session: McpSession, store: Path) -> None:
    # context may be up to 2000 characters either side: the markdown answer must not cut the
    # snippet back to its 200-character cell limit.
    expected = runstore.open(store).search("the", context=300, limit=4)["snippet"].to_list()
    assert max(map(len, expected)) > 200
    header, rows = table(session.ok("search_transcripts", {"text": "the", "context": 300,
                                                           "limit": 4,
                                                           "max_chars": answer.MAX_CHARS}))
    markdown = str.maketrans({"\n": "⏎", "\r": "", "\t": " "})
    assert [r[header.index("snippet")] for r in rows] == \
        [e.translate(markdown).strip() for e in expected]


def test_compare_runs_has_the_diff_rows(session: McpSession, store: Path) -> None:
    runs = [FLAGGED, "gsm8k_tool_rl/sweep/lr_1e-4/seed_0"]
    text = session.ok("compare_runs", {"runs": runs, "format": "csv"})
    assert csv_block(text) == cli(store, "diff", *runs, "-F", "csv").stdout
    summary = session.ok("compare_runs", {"runs": "gsm8k_tool_rl/*",
                                          "metric": "env/all/reward/total",
                                          "group_by": "learning_rate"})
    header, rows = table(summary, 1)
    groups = {r[0]: dict(zip(header, r)) for r in rows}
    bands = cli(store, "compare", "env/all/reward/total", "--runs", "gsm8k_tool_rl/*",
                "--group-by", "learning_rate", "-F", "csv").stdout
    last: dict[str, list[str]] = {}
    for row in csv_rows(bands)[1:]:
        last[row[0]] = row  # ordered by group, then step: the last row is the last step
    assert set(groups) == set(last)
    for group, row in last.items():
        assert groups[group]["last_step"] == row[2]
        assert float(groups[group]["last_mean"]) == pytest.approx(float(row[6]), rel=1e-5)


# ---------------------------------------------------------------------------------------------
# Bad arguments: one line that says what to send


@pytest.mark.parametrize("tool,args,says", [
    ("list_runs", {"limt": 3}, "list_runs has no argument 'limt'; did you mean limit?"),
    ("list_runs", {"kind": "rlhf"}, "kind: Input should be 'rl', 'sl', 'dpo' or 'unknown'"),
    ("list_runs", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("list_runs", {"limit": "many"}, "limit: Input should be a valid integer"),
    ("list_runs", {"runs": "nope/*"}, "no run matches --runs 'nope/*'"),
    ("list_runs", {"columns": ["best_rewrd"]}, "best_reward"),
    ("list_runs", {"where": "drop table runs"}, "--where takes one SQL condition"),
    ("describe_run", {}, "run: Field required"),
    ("describe_run", {"run": "gsm8k_tool_rl/*"}, "matches 5 runs"),
    ("describe_run", {"run": "nope"}, "no run is named or matches 'nope'"),
    ("compare_runs", {"runs": FLAGGED}, "two or more runs"),
    ("compare_runs", {"runs": "gsm8k_tool_rl/*", "metric": "env/all/rewrd/total"},
     "did you mean env/all/reward/total?"),
    ("metric_keys", {"offset": -1}, "offset: Input should be greater than or equal to 0"),
    ("metric_history", {"keys": "env/all/rewrd/total"}, "did you mean env/all/reward/total?"),
    ("metric_history", {"keys": "optim/entropy", "runs": "math_rl_sweep/*", "x": "cost"},
     "no run in scope has a place on the cost axis (it needs a finite cost/cumulative_usd"),
    ("metric_history", {"keys": "optim/entropy", "x": "epoch"}, "x: Input should be 'step'"),
    ("metric_history", {"keys": "optim/entropy", "smooth": 1.5}, "smooth: Input should be less"),
    ("metric_history", {"keys": [f"k{i}" for i in range(11)]}, "give 1 to 10 keys"),
    ("metric_history", {"keys": "optim/entropy", "x_min": "nan"},
     "x_min is a number on the x axis, got nan"),
    ("check", {"rules": ["optim/entropy <> 3"]}, "`runstore check` would exit 2"),
    ("check", {"threshold": "high"}, "threshold: Input should be a valid number"),
    ("rollouts", {"run": RL_RUN, "iteration": -1}, "iteration: Input should be greater"),
    ("rollouts", {"run": RL_RUN, "order": "worst"}, "order: Input should be 'lowest' or 'highest'"),
    ("search_transcripts", {"text": ""}, "text: String should have at least 1 character"),
    ("search_transcripts", {"text": "x", "role": "robot"}, "role: Input should be 'system'"),
    ("slowest_spans", {"run": "sl/*", "limit": 5000}, "limit: Input should be less than or equal"),
    ("step_timeline", {"run": "sl/*", "step": "three"}, "step: Input should be a valid integer"),
    # Steps and iterations are int64, as the columns they are compared with.
    ("step_timeline", {"run": "sl/*", "step": 2 ** 63}, "step: Input should be less than or equal"),
    ("rollouts", {"run": RL_RUN, "iteration": 2 ** 63}, "iteration: Input should be less than"),
    ("check", {"since_step": -2 ** 63 - 1}, "since_step: Input should be greater than or equal"),
    ("sql", {}, "give a query, or docs="),
    ("sql", {"query": "select * from kl_healt"}, 'Did you mean "kl_health"?'),
    ("sql", {"query": "insert into runs select * from runs"}, "only runs queries"),
    ("sql", {"query": "select 1", "timeout": 0}, "timeout: Input should be greater than 0"),
    ("sql", {"docs": ["kl_helth"]}, "did you mean kl_health"),
    ("sql", {"query": "select 1", "max_chars": 10}, "max_chars: Input should be greater"),
    ("views", {"name": "run_sumary"}, "did you mean run_summary"),
    ("list_run", {}, "no tool 'list_run'; did you mean list_runs?"),
])
def test_bad_arguments_say_what_to_send(session: McpSession, tool: str, args: dict[str, Any],
                                        says: str) -> None:
    line = session.error(tool, args)
    assert says in line, line
    assert "errors.pydantic.dev" not in line and "Error executing tool" not in line


@pytest.mark.parametrize("word", ["null", "true", "false"])
def test_a_text_argument_is_the_text_sent_even_when_it_reads_as_json(
        session: McpSession, store: Path, n_runs: int, word: str) -> None:
    # Clients send lists as JSON text (`'["a", "b"]'`), which the SDK decodes; a string that
    # spells a JSON scalar is still the string: `like="null"` searches for "null", it is not
    # "no filter", and `runs="null"` names a run, it is not "every run".
    keys = csv_rows(cli(store, "keys", "--like", word, "-F", "csv").stdout)[1:]
    said = session.ok("metric_keys", {"like": word})
    assert said.startswith(f"{len(keys)} metric keys containing {word!r}:"), said
    assert f"no run matches --runs {word!r}" in session.error("list_runs", {"runs": word})
    assert f"no view or table {word!r}" in session.error("views", {"name": word})
    everything = session.ok("list_runs", {"where": "true", "columns": ["run_label"]})
    assert everything.startswith(f"{n_runs} runs matching where='true':"), everything


def test_views_and_docs_find_a_name_in_any_case_as_sql_does(session: McpSession,
                                                           store: Path) -> None:
    # DuckDB's names ignore case: `select * from KL_Health` reads kl_health, so its documentation
    # is found under that spelling too.
    assert cli(store, "sql", "select count(*) as n from KL_Health").exit_code == 0
    for spelled, name in (("KL_Health", "kl_health"), ("RUNS", "runs")):
        assert session.ok("views", {"name": spelled}) == session.ok("views", {"name": name})
        assert session.ok("sql", {"docs": [spelled]}) == session.ok("sql", {"docs": [name]})


def test_a_long_argument_does_not_crowd_out_the_answer(session: McpSession, n_runs: int) -> None:
    # A title repeats what was asked; a 5,000-character argument must not fill a 1,000-character
    # answer and leave out what the store holds.
    long = "zz" * 2500
    for tool, args, says in (("metric_keys", {"like": long}, "0 metric keys containing 'zzzz"),
                             ("search_transcripts", {"text": long}, "0 messages contain 'zzzz"),
                             ("list_runs", {"where": f"run_name <> '{long}'"}, f"{n_runs} runs matching")):
        text = session.ok(tool, {**args, "max_chars": 1000})
        assert text.startswith(says) and "reached its character cap" not in text.split("\n")[0]
        assert len(text.split("\n")[0]) < 200, text


@pytest.mark.parametrize("fmt", ["csv", "markdown"])
def test_a_row_cut_at_the_cap_says_so(session: McpSession, fmt: str) -> None:
    """A row larger than the whole answer may be is cut, and a notice says so, how much it
    left out and how to get it (it was cut with an ellipsis alone: a CSV row cut inside a
    quoted value reads as another value)."""
    wide = ", ".join(f"repeat('{c}', 150) as {c}" for c in "abcdefghij")
    for query, more in ((f"select {wide}", ""),
                        (f"select {wide} union all select {wide}", "offset=1")):
        text = session.ok("sql", {"query": query, "format": fmt, "max_chars": 1000})
        assert len(text) <= 1000
        notice = text.rstrip("\n").split("\n")[-1]
        assert notice.startswith("(row 1 cut at the answer's character cap: "), text
        left = int(notice.split(": ", 1)[1].split(" of its ")[0].replace(",", ""))
        whole = int(notice.split(" of its ")[1].split(" characters")[0].replace(",", ""))
        at = 2 if fmt == "markdown" else 1
        row = text.split("\n")[at]
        full = session.ok("sql", {"query": query, "format": fmt,
                                  "max_chars": answer.MAX_CHARS}).split("\n")[at]
        assert len(full) == whole and row[:-1] == full[:len(row) - 1], (row, notice)
        assert row.endswith("…") and len(row) - 1 + left == whole, (row, notice)
        assert "raise max_chars" in notice and more in notice


def test_every_offset_the_schema_admits_is_answered_and_a_larger_one_refused(
        session: McpSession) -> None:
    # An offset past the last row is a notice, however large; one past what a 64-bit row
    # number holds is refused as the schema says, never an "unexpected" error.
    needs = {"compare_runs": {"runs": "gsm8k_tool_rl/*"},
             "metric_history": {"keys": "optim/entropy"},
             "rollouts": {"run": RL_RUN, "iteration": 20}, "search_transcripts": {"text": "e"},
             "slowest_spans": {"run": "sl/*"}, "step_timeline": {"run": "sl/*"},
             "sql": {"query": "select 1 as x"}}
    offsets = {t.name: t.input_schema["properties"]["offset"] for t in session.tools()
               if "offset" in t.input_schema["properties"]}
    assert len(offsets) == 11
    for tool, schema in offsets.items():
        assert schema.get("maximum") == 2**63 - 1, (tool, schema)
        session.ok(tool, {**needs.get(tool, {}), "offset": 2**63 - 1, "limit": 1})
        line = session.error(tool, {**needs.get(tool, {}), "offset": 2**63, "limit": 1})
        assert "offset: Input should be less than or equal to" in line, line


def test_every_tool_refuses_an_unknown_argument(session: McpSession) -> None:
    for t in session.tools():
        line = session.error(t.name, {"bogus_argument": 1})
        assert f"{t.name} has no argument 'bogus_argument'" in line
        assert ", ".join(t.input_schema["properties"]) in line


# ---------------------------------------------------------------------------------------------
# Bounds: rows and characters, and the offsets that continue a cut answer


def pages(session: McpSession, tool: str, args: dict[str, Any]) -> tuple[list[str], list[list[str]], int]:
    """Every row a tool answers, page after page as the notices say; and how many calls."""
    offset, rows, calls, header = 0, [], 0, []
    while True:
        text = session.ok(tool, {**args, "offset": offset})
        calls += 1
        assert len(text) <= args.get("max_chars", answer.DEFAULT_CHARS)
        header, page = table(text)
        rows += page
        nxt = notice_offset(text)
        if nxt is None:
            return header, rows, calls
        assert nxt == offset + len(page) and page, text
        offset = nxt


@pytest.mark.parametrize("tool,args", [
    ("list_runs", {"limit": 3}),
    ("list_runs", {"max_chars": 1000}),
    ("metric_keys", {"limit": 40}),
    ("metric_keys", {"max_chars": 1500, "limit": 500}),
    ("search_transcripts", {"text": "step", "limit": 7}),
    ("search_transcripts", {"text": "step", "limit": 500, "max_chars": 2500}),
    ("sql", {"query": "select run_label, step, reward from reward_trends order by 1, 2",
             "limit": 90}),
    ("sql", {"query": "select run_label, step, reward from reward_trends order by 1, 2",
             "limit": 10000, "max_chars": 6000}),
])
def test_cut_answers_continue_at_the_offset_they_name(session: McpSession, tool: str,
                                                      args: dict[str, Any]) -> None:
    header, rows, calls = pages(session, tool, args)
    most = {t.name: t.input_schema["properties"]["limit"]["maximum"] for t in session.tools()
            if "limit" in t.input_schema["properties"]}
    whole_header, whole = table(session.ok(tool, {k: v for k, v in args.items()
                                                  if k not in ("limit", "max_chars")}
                                          | {"limit": most[tool], "max_chars": answer.MAX_CHARS}))
    assert header == whole_header and rows == whole and len(rows) > 10
    assert calls > 1  # the bound cut it, and the pages put it back together


@pytest.mark.parametrize("tool, args", [
    ("describe_run", {"run": RL_RUN}),
    ("views", {}), ("views", {"name": "run_summary"}),
    ("metric_history", {"keys": ["env/all/reward/total", "optim/entropy"], "max_points": 2000}),
    ("compare_runs", {"runs": "*", "metric": "env/all/reward/total"}),
    ("rollouts", {"run": RL_RUN}),
])
@pytest.mark.parametrize("cap", [1000, 2000])
def test_an_offset_a_notice_names_continues_what_it_cut(session: McpSession, tool: str,
                                                        args: dict[str, Any], cap: int) -> None:
    """A notice names an offset only when the tool takes one and asking with it moves the
    answer on; a table the offset does not page (a tool without one, a second table) says
    to raise max_chars (or which sql call gives the rest) instead, so an agent following the
    notices never loops."""
    takes = {t.name: "offset" in t.input_schema["properties"] for t in session.tools()}
    text = session.ok(tool, {**args, "max_chars": cap})
    assert "character cap" in text  # cut: the case where the notices matter
    offset = notice_offset(text)
    if offset is None:
        assert "raise max_chars" in text or "call sql with query" in text, text[-400:]
        return
    assert takes[tool], text[-400:]
    assert session.ok(tool, {**args, "max_chars": cap, "offset": offset}) != text


def test_the_notice_says_what_was_cut(session: McpSession, n_runs: int) -> None:
    text = session.ok("list_runs", {"limit": 4, "offset": 2})
    assert f"(runs 3–6 of {n_runs} shown (limit=4); ask again with offset=6)" in text
    capped = session.ok("metric_keys", {"max_chars": 1000, "limit": 500})
    assert len(capped) <= 1000
    assert "shown: the answer reached its character cap; ask again with offset=" in capped
    past = session.ok("list_runs", {"offset": 50})
    assert f"offset=50 is past the last of the {n_runs} runs" in past


@pytest.mark.parametrize("tool,args", [
    ("list_runs", {}), ("describe_run", {"run": FLAGGED}),
    ("compare_runs", {"runs": "gsm8k_tool_rl/*", "metric": "env/all/reward/total"}),
    ("metric_keys", {}), ("metric_history", {"keys": ["env/all/reward/total"]}),
    ("check", {}), ("rollouts", {"run": RL_RUN}),
    ("rollouts", {"run": RL_RUN, "iteration": 20, "limit": 8, "chars": 20000}),
    ("search_transcripts", {"text": "e", "limit": 500}),
    ("slowest_spans", {"run": "sl/*"}), ("step_timeline", {"run": "sl/*"}),
    ("sql", {"query": "select * from metrics", "limit": 10000}), ("sql", {"docs": ["*"]}),
    ("views", {}), ("views", {"name": "run_summary", "include_sql": True}),
])
@pytest.mark.parametrize("cap", [1000, 3000])
def test_no_answer_passes_its_character_cap(session: McpSession, tool: str, args: dict[str, Any],
                                            cap: int) -> None:
    text = session.ok(tool, {**args, "max_chars": cap})
    assert len(text) <= cap, (len(text), text[-300:])
    whole = session.ok(tool, {**args, "max_chars": answer.MAX_CHARS})
    if len(whole) > cap:
        assert "character cap" in text, text[-300:]  # cut, and says so
    else:
        assert text == whole


LONG = "x" * 60_000


@pytest.mark.parametrize("tool, args", [
    ("sql", {"query": f"select '{LONG}' order by"}),  # a syntax error quoting the query
    ("sql", {"query": "select $a::integer", "params": {"a": LONG}}),
    ("list_runs", {"where": f"run_name = '{LONG}' and"}),
    ("describe_run", {"run": LONG}),
    ("doctor", {"runs": [LONG]}),
    ("views", {"name": LONG}),
    ("no_such_tool" + LONG, {}),
    ("views", {LONG: 1}),  # an unknown argument
])
@pytest.mark.parametrize("cap", [1000, 3000])
def test_no_error_passes_its_character_cap(session: McpSession, tool: str, args: dict[str, Any],
                                           cap: int) -> None:
    """An error quoting a long query or value is held to the call's cap as an answer is, its
    cause first and the cut said."""
    text = session.error(tool, {**args, "max_chars": cap})
    assert text.startswith("Error: ") and len(text) <= cap, (len(text), text[:300])
    assert "character cap" in text, text[-300:]


def test_a_paged_query_without_order_by_is_said_to_page_unreliably(session: McpSession) -> None:
    """Each page runs the query again: without an ORDER BY its rows may come in another
    order each time, and a paged answer says so; an ordered or a whole answer does not."""
    unordered = "select key, count(*) as n from metrics group by key"
    note = "the query has no ORDER BY"
    assert note in session.ok("sql", {"query": unordered, "limit": 5})
    assert note in session.ok("sql", {"query": unordered, "limit": 5, "offset": 5})
    assert note not in session.ok("sql", {"query": unordered + " order by key", "limit": 5})
    assert note not in session.ok("sql", {"query": unordered, "limit": 10000,
                                          "max_chars": answer.MAX_CHARS})


def test_the_server_cap_is_the_default(store: Path) -> None:
    with McpSession(store, "--max-chars", "1200") as s:
        assert len(s.ok("metric_keys", {"limit": 2000})) <= 1200
        assert len(s.ok("metric_keys", {"limit": 2000, "max_chars": 5000})) > 1200


# ---------------------------------------------------------------------------------------------
# The store, chosen as for every command; a start that loads nothing heavy


def test_the_store_comes_from_the_environment_too(store: Path, tmp_path: Path,
                                                  n_runs: int) -> None:
    with McpSession(None, env={"RUNSTORE_STORE": str(store)}, cwd=tmp_path) as s:
        assert s.ok("list_runs", {"limit": 1}).startswith(f"{n_runs} runs:")


def test_a_missing_store_is_a_clear_error_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / ".runstore"
    with McpSession(missing) as s:
        line = s.error("list_runs")
        assert f"no store at {missing}" in line and "runstore ingest PATH" in line
        assert s.error("sql", {"query": "select 1"}).startswith("Error: no store at")
    assert not (tmp_path / "nowhere").exists()


def raw_exchange(store: Path, messages: list[dict[str, Any]],
                 *args: str) -> tuple[list[dict[str, Any]], str, int]:
    """Send JSON-RPC lines to `runstore mcp`, read a reply to each request, close its stdin:
    (the replies, what it wrote on stderr, its exit status)."""
    with subprocess.Popen([sys.executable, *args, "-m", "runstore", "--store", str(store), "mcp"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env={**clean_env(), "PYTHONPATH": str(REPO)}) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        replies = []
        for m in messages:
            proc.stdin.write(json.dumps(m) + "\n")
            proc.stdin.flush()
            if "id" in m:
                replies.append(json.loads(proc.stdout.readline()))  # every line is JSON
        proc.stdin.close()
        rest = proc.stdout.read()
        err = proc.stderr.read()
        status = proc.wait(timeout=120)
    assert rest == "", rest
    return replies, err, status


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def test_nothing_heavy_is_imported_before_the_first_tool_call(store: Path) -> None:
    replies, err, status = raw_exchange(store, [INITIALIZE, INITIALIZED, LIST], "-X",
                                        "importtime")
    assert status == 0, err[-2000:]
    assert replies[0]["result"]["serverInfo"]["name"] == "runstore"
    assert len(replies[1]["result"]["tools"]) == len(expected_tools())
    imported = {line.split("|")[-1].strip() for line in err.splitlines()
                if line.startswith("import time:")}
    assert "mcp.server.mcpserver" in imported  # the log is the import log
    heavy = {"duckdb", "polars", "pyarrow", "numpy", "sqlglot", "deltalake", "plotly"}
    assert not heavy & imported, heavy & imported


def test_the_command_line_imports_no_mcp() -> None:
    code = ("import sys; from runstore.cli import main; "
            "print(sorted(m for m in ('mcp', 'pydantic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**clean_env(), "PYTHONPATH": str(REPO)}, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


def test_stdout_carries_only_protocol_messages(store: Path) -> None:
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "sql", "arguments": {"query": "select 1 as one"}}}
    replies, err, status = raw_exchange(store, [INITIALIZE, INITIALIZED, call])
    assert [r["id"] for r in replies] == [1, 3] and status == 0
    assert replies[1]["result"]["content"][0]["text"] == "| one |\n|---|\n| 1 |\n"
    assert err == ""


@pytest.mark.timeout(120)  # without the mending, the first call is never answered
def test_half_a_surrogate_pair_is_answered_as_a_replacement_character(store: Path) -> None:
    """A string cut inside an emoji, as JavaScript's `JSON.stringify` writes it (`"\\ud83d"`
    alone, valid JSON), is answered: the half reads as U+FFFD (runstore/agents/stdin.py).
    The SDK's own reader refuses the line and answers nothing, leaving the client waiting.
    The whole pair still reads as the emoji."""
    def search(i: int, text: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": "search_transcripts", "arguments": {"text": text}}}

    replies, err, status = raw_exchange(store, [INITIALIZE, INITIALIZED,
                                                search(3, "ab\ud83d"),
                                                search(4, "ab\ud83d\ude00")])
    assert [r["id"] for r in replies] == [1, 3, 4] and status == 0, err
    lone, pair = (r["result"]["content"][0]["text"] for r in replies[1:])
    assert lone.startswith("0 messages contain 'ab\ufffd'"), lone
    assert pair.startswith("0 messages contain 'ab\U0001F600'"), pair


def test_a_row_larger_than_a_page_is_said_not_dropped(session: McpSession, store: Path) -> None:
    # The worker sends at most PAGE_BYTES of Arrow a page; a row larger than that is not sent.
    # The answer must not read "(no rows)": the row exists, and the answer says why it is not
    # shown and how to ask for it.
    from runstore.agents.tools.sql import PAGE_BYTES

    query = "select 1 as n, repeat('x', $size) as big from range(2)"
    size = PAGE_BYTES + 1
    counted = cli(store, "sql", f"select count(*) as rows from ({query})", "--param",
                  f"size={size}", "-F", "csv").stdout.split()
    assert counted == ["rows", "2"]
    text = session.ok("sql", {"query": query, "params": {"size": size}, "format": "csv"})
    assert "(no rows)" not in text and "x" * 100 not in text
    assert text == ("n,big\n(rows 1–2 of 2 not shown: the first of them alone is larger than "
                    "a page of an answer may be; ask for fewer or shorter columns, e.g. "
                    "left(text, 1000))\n"), text
    small = session.ok("sql", {"query": query.replace("$size", "3"), "format": "csv"})
    assert small == "n,big\n1,xxx\n1,xxx\n"
    docs = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    assert f"as at most {PAGE_BYTES >> 20} MB of Arrow" in docs  # the bound docs/agents.md gives
