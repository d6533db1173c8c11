"""`runstore mcp` and `runstore skill`: the store for coding agents (runstore.agents)."""

from __future__ import annotations

import click

from .common import Size, handle_errors

# The answer bounds of `runstore.agents.answer`, spelt here so `runstore --help` imports no
# MCP SDK (tests/agents/test_mcp.py holds them equal).
DEFAULT_CHARS, MIN_CHARS, MAX_CHARS = 16_000, 1_000, 200_000


@click.command()
@click.option("--max-chars", type=click.IntRange(MIN_CHARS, MAX_CHARS), default=DEFAULT_CHARS,
              show_default=True, metavar="N",
              help="Most characters in one tool answer, unless a call asks for another cap. "
                   "A cut answer says where it stopped and how to ask for the rest.")
@click.option("--memory-limit", "memory_limit", type=Size(), default=None, metavar="SIZE",
              help="Memory of the worker process that runs the sql tool's queries (and "
                   "list_runs' where): a query that needs more fails with an error naming the "
                   "limit (default: $RUNSTORE_MEMORY_LIMIT, else a quarter of the machine's "
                   "memory).")
@click.pass_context
@handle_errors
def mcp(ctx: click.Context, max_chars: int, memory_limit: int | None) -> None:
    """Serve the store to a coding agent as an MCP server over stdio.

    An MCP client (Claude Code, Cursor, VS Code, Codex...) starts this command and talks to
    it on stdin/stdout until it closes them (requests piped in and closed at once are all
    answered before it ends). Its tools answer in bounded text: list_runs,
    describe_run, compare_runs, metric_keys, metric_history, check, rollouts,
    search_transcripts, slowest_spans, step_timeline, doctor, sql and views. Nothing they do
    writes the store or the run directories: sql is `runstore sql`'s read-only guard and
    sandbox, run in a worker process capped at --memory-limit, under a time limit. Give the store as an absolute
    path: the client may start the server in another directory. See docs/agents.md.

    Example:

    \b
        runstore --store /home/me/runs/.runstore mcp
        runstore --store /home/me/runs/.runstore mcp --memory-limit 4GB --max-chars 8000
        claude mcp add runstore -- runstore --store /home/me/runs/.runstore mcp
    """
    from ..agents.server import serve

    serve(ctx.obj.get("store"), max_chars=max_chars, memory_limit=memory_limit,
          debug=bool(ctx.obj.get("debug")))  # Ctrl-C or SIGTERM: `interrupted`, 130


@click.command()
@click.option("--install", "install", is_flag=False, flag_value="", default=None,
              metavar="[DIR]",
              help="Write the skill to DIR/SKILL.md instead of printing it (DIR: "
                   ".claude/skills/runstore, where Claude Code finds a project's skills).")
@click.option("--force", is_flag=True,
              help="With --install, replace a SKILL.md that differs from runstore's.")
@handle_errors
def skill(install: str | None, force: bool) -> None:
    """Print the skill (a SKILL.md) that teaches a coding agent to use runstore.

    The skill says what the store holds, which command or MCP tool answers each question
    about training runs (metrics, KL, rewards, rollouts, timing, comparing runs) and how
    the logging guide's debugging tips map to `check` and the views. With --install it is
    written where agents look for a project's skills; a different file already there is
    kept unless --force.

    Example:

    \b
        runstore skill
        runstore skill --install
    """
    from ..agents import skill as skill_mod

    if install is None:
        if force:
            raise click.UsageError("--force goes with --install")
        click.echo(skill_mod.text(), nl=False)
        return
    done = skill_mod.install(install or None, force=force)
    click.echo(done.message(), err=True)
