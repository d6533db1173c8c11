"""Docs are tested: every example in README.md, docs/*.md and each command's `--help` runs on
the store `runstore demo` writes and prints what the docs show (issue 13, item 8).

What is an example
------------------
* Pages: README.md, every docs/*.md (found when the tests are collected, so a new page is
  tested without touching this file) and the skill runstore ships (runstore/agents/SKILL.md,
  which `runstore skill` prints). docs/cli.md is left out: it is the `--help` texts
  rendered, and their Example: blocks are collected from the commands themselves.
* In a fenced block of a shell language (none, sh, bash, shell, console): every line whose
  first word is `runstore` (a trailing `\\` continues it). In a block with `$ ` prompts, the
  lines up to the next prompt are the output the doc shows, and `$ echo $?` the exit status.
* In a ```python block: `>>>` blocks are doctests (ELLIPSIS on), other blocks scripts that
  must run without an exception. A page's Python blocks share one namespace, in page order, as
  a reader's session does; it starts empty, so the page imports and opens what it uses.
* A ```sql block followed by a markdown table (its answer; the cookbook's, after an optional
  `Params:` line): `runstore sql -F markdown` prints exactly that table, with those params.
  (docs/views.md's SQL is view bodies with no table after them, so not an example.)
* Every command's `--help`: each `runstore` line of its Example: block.

How they run
------------
A session fixture runs `runstore demo` in-process, as README.md tells a new user to, in an
empty directory, so the demo's own logic puts its tree in `runstore-demo/runs` and its store
in `runstore-demo/store`. Every example then runs as the docs tell the reader to: in
`runstore-demo/` (so `runs/` is the demo tree) with `RUNSTORE_STORE` set to the demo's store,
on a terminal of 200 columns (stdout says it is a terminal, so rows print as a table, unless a
`>` redirects them to a file). Each shell block and each page's Python starts from the demo's
store as the demo left it (an example that ingests or compacts changes only its own copy).
`runstore` commands run in-process (click's CliRunner); `&&`, `||`, `;`, `( … )`, `> FILE`,
`>> FILE` and `echo` behave as in sh. Anything else (a pipe, another program) fails the test
with the example's place, so an unsupported example is never silently passed over.
`FILES` are the reader's own files that examples name (`teams.csv`, `question.sql`).

Exit status: 0 unless the doc says otherwise, by a shown `$ echo $?`, by `exit N` in the
line's comment, or by an `Error:` in the shown output (then any status but 0; the output is
still compared). An example whose output the doc does not show must still answer something:
a command that prints rows and prints none (a glob that matches no run), or a `check` that
checks no run, fails. A traceback always fails.

Also here: every `runstore.x.y` name and source path the docs name exists (modules move), every
command's `--help` has an Example, and the demo's own printed KL answer is the cookbook's.

Compared output is normalised only where it truly varies between two runs of the same
example: durations (`0.08 s`) and rates (`5.1 MB/s`), which become `… s` and `… MB/s` in
both the doc and the output, and the working directory's absolute path, which is removed from
the output (it prints as the relative path a reader sees). Trailing spaces are ignored.
Nothing else is: run ids, values and row counts must match the doc exactly.

`SKIP` lists the examples that cannot run here, each with its reason; a failure names the
page (or source file of the command) and the line of the example.
"""

from __future__ import annotations

import contextlib
import doctest
import inspect
import os
import re
import shlex
import shutil
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import click
import pytest
from click.testing import CliRunner

from runstore.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
LEFT_OUT = {"docs/cli.md": "generated from --help, whose Example: blocks are collected directly"}
SHELL_LANGS = {"", "sh", "bash", "shell", "console"}
ENV = {"COLUMNS": "200"}

# (scope, pattern, reason): "command" patterns are searched in the example's command line,
# "block" patterns in the whole fenced block (or the whole Python block).
SKIP: tuple[tuple[str, str, str], ...] = (
    ("command", r"^runstore demo\b", "the session fixture runs it: its store is what every "
                                     "example reads"),
    ("command", r"^runstore (.* )?ui\b", "serves until stopped (tests/ui/test_ui_cli.py runs it)"),
    ("command", r"--watch\b", "runs until Ctrl-C (tests/health/test_checks.py runs the watch "
                             "loop)"),
    ("command", r"^runstore (.* )?mcp\b", "serves until its MCP client closes stdin "
                                          "(tests/agents/test_mcp.py runs it with the SDK's "
                                          "client)"),
    ("command", r"s3://", "needs an S3 service (tests/storage/test_s3.py runs it against moto)"),
    ("block", r"(?m)^export RUNSTORE_STORE=", "the block's commands use another store (on S3, "
                                              "or the reader's own in a cron script)"),
    ("block", r"SparkSession", "needs a Spark session (tests/query/test_spark.py)"),
    ("block", r"runstore\.open\(\"s3://", "needs an S3 service (tests/storage/test_s3.py)"),
)

# The reader's own files that examples read (None: an empty directory).
FILES: dict[str, str | None] = {
    "teams.csv": "run_name,team\nsl/tulu3_qwen3-8b_lr2e-4,post-training\n",
    "question.sql": "select run_name, max_kl_v1 from kl_health where flagged order by run_name\n",
    "notes.txt": "lr 1e-3 diverged; retry with 3e-4\n",
    "empty": None,
}


# --------------------------------------------------------------------------------------------
# Collecting examples


@dataclass
class Block:
    page: str  # repository-relative path
    line: int  # 1-based line of the opening fence
    lang: str
    lines: list[str]  # the block's lines, dedented to the fence
    after: list[str] = field(default_factory=list)  # the page's lines after the closing fence


@dataclass
class ShellExample:
    where: str  # "page:line"
    command: str
    shown: list[str] | None = None  # the output the doc shows (None: none shown)
    status: int | None = None  # the exit status the doc shows, if any


def pages() -> list[Path]:
    found = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
             REPO / "runstore" / "agents" / "SKILL.md"]
    return [p for p in found if p.relative_to(REPO).as_posix() not in LEFT_OUT]


def blocks(path: Path) -> Iterator[Block]:
    lines = path.read_text().split("\n")
    rel = path.relative_to(REPO).as_posix()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start, body = len(m.group(1)), m.group(2), i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        yield Block(rel, start, lang, body, lines[i + 1:i + 120])
        i += 1


def joined(lines: list[str], first: int) -> Iterator[tuple[int, str]]:
    """(line number, logical line): `\\`-continued lines joined."""
    i = 0
    while i < len(lines):
        start, text = first + i, lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1].rstrip() + " " + lines[i].strip()
        yield start, text
        i += 1


def shell_examples(block: Block) -> list[ShellExample]:
    logical = list(joined(block.lines, block.line + 1))
    prompted = any(text.startswith("$ ") for _, text in logical)
    out: list[ShellExample] = []
    for k, (number, text) in enumerate(logical):
        command = text[2:] if prompted and text.startswith("$ ") else text
        if prompted and not text.startswith("$ "):
            continue
        if command.split(" ", 1)[0] != "runstore":
            continue
        ex = ShellExample(f"{block.page}:{number}", command.strip())
        if prompted:
            shown: list[str] = []
            rest = logical[k + 1:]
            j = 0
            while j < len(rest) and not rest[j][1].startswith("$ "):
                shown.append(rest[j][1])
                j += 1
            ex.shown = shown
            if j < len(rest) and rest[j][1].strip() == "$ echo $?" and j + 1 < len(rest):
                ex.status = int(rest[j + 1][1])
        out.append(ex)
    return out


def help_examples() -> list[tuple[str, list[ShellExample]]]:
    """(command path, its Example: lines) for every command and subcommand."""
    found: list[tuple[str, list[ShellExample]]] = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        text = inspect.cleandoc(cmd.help or "")
        source = inspect.unwrap(cmd.callback) if cmd.callback else None
        src_file = Path(inspect.getsourcefile(source)) if source else None
        src_lines = src_file.read_text().split("\n") if src_file else []
        exs: list[ShellExample] = []
        if "Example:" in text:
            body = text.split("Example:", 1)[1].split("\n")
            for _, line in joined([b.strip() for b in body], 0):
                if not line.startswith("runstore"):
                    continue
                first = line.split(" \\", 1)[0][:60]
                number = next((n for n, s in enumerate(src_lines, 1) if first in s), 0)
                rel = src_file.relative_to(REPO).as_posix() if src_file else "?"
                exs.append(ShellExample(f"{rel}:{number} ({' '.join(path)} --help)", line))
        found.append((" ".join(path), exs))
        if isinstance(cmd, click.Group):
            for name in sorted(cmd.commands):
                walk(cmd.commands[name], path + [name])

    walk(cli_main, ["runstore"])
    return found


def skip_reason(scope: str, text: str) -> str | None:
    for s, pattern, reason in SKIP:
        if s == scope and re.search(pattern, text):
            return reason
    return None


def shell_cases() -> list[Any]:
    cases = []
    for path in pages():
        for block in blocks(path):
            if block.lang not in SHELL_LANGS:
                continue
            exs = shell_examples(block)
            if exs:
                reason = skip_reason("block", "\n".join(block.lines))
                marks = [pytest.mark.skip(reason=reason)] if reason else []
                cases.append(pytest.param(exs, id=f"{block.page}:{block.line}", marks=marks))
    for name, exs in help_examples():
        if exs:
            cases.append(pytest.param(exs, id=f"{name} --help"))
    return cases


def python_cases() -> list[Any]:
    cases = []
    for path in pages():
        found = [b for b in blocks(path) if b.lang == "python"]
        if found:
            cases.append(pytest.param(found, id=path.relative_to(REPO).as_posix()))
    return cases


def sql_cases() -> list[Any]:
    cases = []
    for path in pages():
        for block in blocks(path):
            if block.lang != "sql":
                continue
            after = [line for line in block.after]
            while after and not after[0].strip():
                after.pop(0)
            params: list[str] = []
            if after and after[0].startswith("Params:"):
                params = shlex.split(after[0].split("`")[1])
                after.pop(0)
                while after and not after[0].strip():
                    after.pop(0)
            table = []
            while after and after[0].startswith("|"):
                table.append(after.pop(0))
            if table:
                where = f"{block.page}:{block.line}"
                cases.append(pytest.param(where, "\n".join(block.lines), params, table,
                                          id=where))
    return cases


# --------------------------------------------------------------------------------------------
# Running them


class Terminal(CliRunner):
    """A CliRunner whose stdout says it is a terminal, as a reader's is (unless redirected)."""

    tty = True

    @contextlib.contextmanager
    def isolation(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with super().isolation(*args, **kwargs) as streams:
            if self.tty:
                sys.stdout.isatty = lambda: True  # type: ignore[method-assign]
            yield streams


@dataclass
class Demo:
    home: Path  # where `runstore demo` ran
    directory: Path  # the demo's directory (runs/, store/): examples run in it
    store: Path
    pristine: Path  # a copy of the store as the demo left it
    printed: str  # what `runstore demo` printed

    def reset(self) -> None:
        shutil.rmtree(self.store)
        shutil.copytree(self.pristine, self.store)


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    home = tmp_path_factory.mktemp("doc-examples")
    old = Path.cwd()
    os.chdir(home)
    try:
        result = CliRunner().invoke(cli_main, ["demo"], env={"RUNSTORE_STORE": None})
    finally:
        os.chdir(old)
    assert result.exit_code == 0, result.output
    # Where the demo put its tree and store, as it says (its own location logic decides).
    runs = Path(re.search(r"^wrote a demo run tree to (.+)$", result.output, re.M).group(1))
    store = Path(re.search(r"^ingested into (.+?): ", result.output, re.M).group(1))
    directory = (home / runs).parent
    store = home / store
    assert store.is_dir() and store.parent == directory, result.output
    pristine = home / "pristine-store"
    shutil.copytree(store, pristine)
    for name, text in FILES.items():
        if text is None:
            (directory / name).mkdir()
        else:
            (directory / name).write_text(text)
    return Demo(home, directory, store, pristine, result.output)


@pytest.fixture
def in_demo(demo_store: Demo, monkeypatch: pytest.MonkeyPatch) -> Demo:
    demo_store.reset()
    monkeypatch.chdir(demo_store.directory)
    monkeypatch.setenv("RUNSTORE_STORE", str(demo_store.store))
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    return demo_store


class Shell:
    """Just enough of sh to run the docs' command lines, with `runstore` run in-process."""

    def __init__(self, where: str, cwd: Path, monkeypatch: pytest.MonkeyPatch):
        self.where, self.cwd = where, cwd
        self.screen: list[str] = []  # what the terminal shows
        self.status = 0
        self.empty: list[str] = []  # commands whose rows were none at all
        self._rows: list[int] = []
        from runstore.cli import query

        def counting_emit(table: Any, *args: Any, **kwargs: Any) -> None:
            self._rows.append(table.num_rows)
            emit(table, *args, **kwargs)

        emit = query.emit
        monkeypatch.setattr(query, "emit", counting_emit)

    def fail(self, text: str) -> None:
        pytest.fail(f"{self.where}: {text}", pytrace=False)

    def run(self, line: str) -> int:
        # Words split at blanks only, as sh does (`--columns a,b`); `( ) ; < > | &` apart.
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        tokens = list(lex)
        pos, status = self._list(tokens, 0)
        if pos != len(tokens):
            self.fail(f"cannot read {line!r} at {tokens[pos]!r}")
        return status

    def _list(self, toks: list[str], pos: int) -> tuple[int, int]:
        pos, status = self._and_or(toks, pos)
        while pos < len(toks) and toks[pos] == ";":
            pos, status = self._and_or(toks, pos + 1)
        return pos, status

    def _and_or(self, toks: list[str], pos: int, skip: bool = False) -> tuple[int, int]:
        pos, status = self._simple(toks, pos, skip)
        while pos < len(toks) and toks[pos] in ("&&", "||"):
            op = toks[pos]
            run_next = (status == 0) if op == "&&" else (status != 0)
            pos, new = self._simple(toks, pos + 1, skip or not run_next)
            if run_next and not skip:
                status = new
        return pos, status

    def _simple(self, toks: list[str], pos: int, skip: bool) -> tuple[int, int]:
        if pos < len(toks) and toks[pos] == "(":
            depth, end = 0, pos
            while end < len(toks):
                depth += {"(": 1, ")": -1}.get(toks[end], 0)
                if depth == 0:
                    break
                end += 1
            if skip:
                return end + 1, self.status
            _, status = self._list(toks[pos + 1:end], 0)
            return end + 1, status
        words: list[str] = []
        redirect: tuple[str, str] | None = None
        while pos < len(toks) and toks[pos] not in (";", "&&", "||", ")", "("):
            tok = toks[pos]
            if tok in (">", ">>"):
                redirect = (tok, toks[pos + 1])
                pos += 2
                continue
            if tok == "|" or tok.startswith(("<", "&")):
                self.fail(f"shell syntax {tok!r} is not supported by this test; write the "
                          "example without it or add it to SKIP with a reason")
            words.append(tok)
            pos += 1
        if skip:
            return pos, self.status
        self.status = self._command(words, redirect)
        return pos, self.status

    def _command(self, words: list[str], redirect: tuple[str, str] | None) -> int:
        if words and words[0] == "echo":
            self.screen.append(" ".join(str(self.status) if w == "$?" else w for w in words[1:]))
            return 0
        if not words or words[0] != "runstore":
            self.fail(f"{' '.join(words)!r}: only runstore and echo run here")
        runner = Terminal()
        runner.tty = redirect is None
        self._rows.clear()
        result = runner.invoke(cli_main, words[1:], prog_name="runstore")
        # An example that answers nothing on the demo shows nothing (`check` is green on 0 rows,
        # but must have checked some run).
        if (self._rows and not any(self._rows) and words[1:2] != ["check"]) or any(
                "(0 checked" in line for line in result.output.splitlines()):
            self.empty.append(" ".join(words))
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            self.fail(f"`{' '.join(words)}` raised (a user would see a traceback):\n"
                      + "".join(traceback.format_exception(*result.exc_info)))
        if redirect:
            mode = "a" if redirect[0] == ">>" else "w"
            with open(self.cwd / redirect[1], mode) as f:
                f.write(result.stdout)
            self.screen.extend(result.stderr.splitlines())
        else:
            self.screen.extend(result.output.splitlines())
        return result.exit_code


def normalised(lines: list[str], cwd: Path) -> list[str]:
    out = []
    for line in lines:
        line = line.replace(str(cwd) + os.sep, "").replace(str(cwd), ".")
        line = re.sub(r"\b\d+(\.\d+)? MB/s\b", "… MB/s", line)
        line = re.sub(r"\b\d+(\.\d+)? s\b", "… s", line)
        out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return out


def expected_status(ex: ShellExample) -> int | None:
    """The status the doc states (None: any but 0, for a shown error)."""
    if ex.status is not None:
        return ex.status
    m = re.search(r"#.*\bexit (\d+)\b", ex.command)
    if m:
        return int(m.group(1))
    if ex.shown and any(line.startswith("Error:") for line in ex.shown):
        return None
    return 0


@pytest.mark.parametrize("examples", shell_cases())
def test_shell_example(examples: list[ShellExample], in_demo: Demo,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    for ex in examples:
        reason = skip_reason("command", ex.command)
        if reason:
            continue  # listed in SKIP; the block's other lines still run
        shell = Shell(ex.where, in_demo.directory, monkeypatch)
        status = shell.run(ex.command)
        if ex.shown is None:  # a shown output decides for itself
            assert not shell.empty, (f"{ex.where}: `{ex.command}` answers no rows (or checks no "
                                     f"run) on the demo store: {shell.empty}")
        want = expected_status(ex)
        shown = "\n".join(shell.screen)
        if want is None:
            assert status != 0, f"{ex.where}: `{ex.command}` shows an error but exited 0:\n{shown}"
        else:
            assert status == want, (f"{ex.where}: `{ex.command}` exited {status}, the doc says "
                                    f"{want}; it printed:\n{shown}")
        if ex.shown is not None:
            got = normalised(shell.screen, in_demo.directory)
            doc = normalised(ex.shown, in_demo.directory)
            assert got == doc, (f"{ex.where}: `{ex.command}` printed something else than the "
                                "doc shows.\n--- doc\n" + "\n".join(doc)
                                + "\n--- printed\n" + "\n".join(got))


@pytest.mark.parametrize("found", python_cases())
def test_python_examples(found: list[Block], in_demo: Demo) -> None:
    reasons = [skip_reason("block", "\n".join(b.lines)) for b in found]
    if all(reasons):
        pytest.skip("; ".join(sorted({r for r in reasons if r})))
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    parser = doctest.DocTestParser()
    for block, reason in zip(found, reasons):
        if reason:
            continue
        text = "\n".join(block.lines) + "\n"
        where = f"{block.page}:{block.line}"
        if ">>>" in text:
            test = parser.get_doctest(text, namespace, where, block.page, block.line)
            report: list[str] = []
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            result = runner.run(test, out=report.append, clear_globs=False)
            assert result.failed == 0, "\n".join(report)
            namespace.update(test.globs)  # the DocTest ran on a copy
        else:
            try:
                exec(compile(text, where, "exec"), namespace)
            except Exception:
                pytest.fail(f"{where}: the example raised:\n{traceback.format_exc()}",
                            pytrace=False)


@pytest.mark.parametrize("where,sql,params,table", sql_cases())
def test_sql_answer(where: str, sql: str, params: list[str], table: list[str],
                    in_demo: Demo) -> None:
    result = CliRunner().invoke(cli_main, ["sql", sql, "-F", "markdown", *params],
                                prog_name="runstore")
    assert result.exit_code == 0, f"{where}: the query failed:\n{result.output}"
    got = [line.rstrip() for line in result.stdout.rstrip("\n").split("\n")]
    assert len(table) > 2, f"{where}: the doc shows a table with no rows; ask what has an answer"
    assert got == [line.rstrip() for line in table], (
        f"{where}: the doc's table is not what `runstore sql -F markdown` prints:\n--- doc\n"
        + "\n".join(table) + "\n--- printed\n" + "\n".join(got))


def test_every_command_has_an_example() -> None:
    missing = [name for name, exs in help_examples() if not exs]
    assert not missing, f"commands whose --help has no runnable Example: line: {missing}"


def test_the_collector_finds_the_examples_it_should() -> None:
    """A guard on the collector itself: a bug that finds nothing would pass every test."""
    shell = [ex for case in shell_cases() for ex in case.values[0]]
    assert any(ex.shown and ex.where.startswith("docs/checks.md") for ex in shell)
    assert any(ex.where.startswith("README.md") for ex in shell)
    assert len(sql_cases()) >= 15  # the cookbook's questions
    assert any(case.id == "docs/python.md" for case in python_cases())
    assert any(ex.where.startswith("runstore/agents/SKILL.md") for ex in shell)


def references(path: Path) -> Iterator[tuple[int, str]]:
    """(line, name) of every `runstore.x.y` name and repository source file the page names."""
    for number, line in enumerate(path.read_text().split("\n"), 1):
        for m in re.finditer(r"\b(runstore(?:\.[A-Za-z_]\w*)+)", line):
            if m.group(1) != "runstore.toml":
                yield number, m.group(1)
        # Source files only (bench/out/... are what commands write; NNNN_name.py a pattern).
        for m in re.finditer(r"(?<![\w/.])((?:runstore|tests|tools|bench|sql|migrations)/"
                             r"[\w./-]*\.(?:py|sql|sh))\b", line):
            if not re.search(r"[A-Z]{3}", m.group(1)):
                yield number, m.group(1)


def resolves(name: str) -> bool:
    if "/" in name:
        return (REPO / name).exists()
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


# Names the docs give for code that another branch brings; each must go once it resolves.
NOT_YET: dict[str, str] = {}


def test_the_code_the_docs_name_exists() -> None:
    """Module paths and dotted names in the docs and --help exist (moves leave none stale)."""
    named = [(f"{path.relative_to(REPO)}:{number}", name)
             for path in [*pages(), REPO / "docs" / "cli.md"]
             for number, name in references(path)]
    stale = [f"{where}: {name}" for where, name in named
             if name not in NOT_YET and not resolves(name)]
    assert not stale, "the docs name code that does not exist:\n" + "\n".join(stale)
    landed = [name for name in NOT_YET if resolves(name)]
    assert not landed, f"{landed} exist now: remove them from NOT_YET"


def test_the_demo_prints_what_the_cookbook_shows(demo_store: Demo) -> None:
    """The issue's case: the demo and the docs once used different seeds, so the demo's KL
    answer and the cookbook's first question named different values."""
    section = demo_store.printed.split("## Which runs had KL above 0.01")[1].split("\n## ")[0]
    rows = [line.split() for line in section.splitlines()
            if re.match(r"^\S+/\S+\s+\d", line)]  # run_name then numbers
    assert rows, section
    page = (REPO / "docs" / "cookbook.md").read_text()
    q1 = page.split('<a id="q1"></a>')[1].split('<a id="q2"></a>')[0]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in q1.splitlines()
             if line.startswith("| ") and "run_name" not in line]
    assert [(c[0], float(c[1])) for c in cells] == [
        (r[0], round(float(r[1]), 4)) for r in rows]
