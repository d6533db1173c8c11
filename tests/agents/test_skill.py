"""`runstore skill`: the SKILL.md it prints (front matter an agent reads to decide when to use
it, every MCP tool named, every tool named exists) and `--install`, which writes it where
Claude Code finds a project's skills and never overwrites a changed file without --force.
(The doc tests run every command in the skill against the demo store.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runstore.agents import skill
from runstore.agents.server import tools
from runstore.agents.tools import State
from storekit import assert_clear_error, cli

SHIPPED = Path(__file__).resolve().parents[2] / "runstore" / "agents" / "SKILL.md"


def front_matter(text: str) -> dict[str, str]:
    m = re.match(r"\A---\n(.*?)\n---\n", text, re.S)
    assert m, text[:200]
    return dict(line.split(": ", 1) for line in m.group(1).splitlines())


def test_the_skill_is_printed_whole() -> None:
    result = cli(None, "skill")
    assert result.exit_code == 0 and result.stdout == SHIPPED.read_text(encoding="utf-8")


def test_the_front_matter_says_when_to_use_it() -> None:
    meta = front_matter(skill.text())
    assert set(meta) == {"name", "description"} and meta["name"] == "runstore"
    said = meta["description"].lower()
    for topic in ("training logs", "metrics", "kl", "reward", "rollouts", "timing",
                  "comparing runs"):
        assert topic in said, topic
    assert len(meta["description"]) <= 1024  # what agents read of a description


def test_every_tool_is_named_and_every_name_is_a_tool() -> None:
    """The questions table's MCP tool column names only tools the server offers, and every
    tool it offers is in that column."""
    names = {t.name for t in tools(State(None))}
    body = skill.text().split("| question | command | MCP tool |", 1)[1]
    rows = [line for line in body.split("\n\n", 1)[0].splitlines()[1:] if line.startswith("|")]
    column = {n for line in rows for n in re.findall(r"`([a-z_]+)`", line.split("|")[-2])}
    assert column == names, (column ^ names)


def test_install_writes_it_where_claude_code_looks(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / ".claude" / "skills" / "runstore" / "SKILL.md"
    result = cli(None, "skill", "--install")
    assert result.exit_code == 0, result.stderr
    assert target.read_text(encoding="utf-8") == skill.text()
    assert result.stdout == "" and "wrote" in result.stderr
    again = cli(None, "skill", "--install")
    assert again.exit_code == 0 and "already up to date" in again.stderr
    assert [p.name for p in target.parent.iterdir()] == ["SKILL.md"]  # no temporary left


def test_a_changed_skill_is_kept_without_force(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    assert cli(None, "skill", "--install", str(folder)).exit_code == 0
    path = folder / "SKILL.md"
    path.write_text(skill.text() + "\nmy own notes\n", encoding="utf-8")
    refused = cli(None, "skill", "--install", str(folder))
    assert refused.exit_code == 2
    assert_clear_error(refused.stderr, str(path), "differs", "--force")
    assert path.read_text(encoding="utf-8").endswith("my own notes\n")
    forced = cli(None, "skill", "--install", str(folder), "--force")
    assert forced.exit_code == 0 and "replaced" in forced.stderr
    assert path.read_text(encoding="utf-8") == skill.text()


def test_bad_install_targets_are_clear_errors(tmp_path: Path) -> None:
    result = cli(None, "skill", "--force")
    assert result.exit_code == 2 and "--force goes with --install" in result.stderr
    (tmp_path / "d" / "SKILL.md").mkdir(parents=True)
    result = cli(None, "skill", "--install", str(tmp_path / "d"))
    assert result.exit_code == 2
    assert_clear_error(result.stderr, "is a directory")
    blocked = tmp_path / "file"
    blocked.write_text("x")
    result = cli(None, "skill", "--install", str(blocked / "sub"))
    assert result.exit_code == 2
    assert_clear_error(result.stderr, "cannot write", "runstore skill --install DIR")
