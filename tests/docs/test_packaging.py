"""The wheel carries sql/ and migrations/; the docs that are generated stay in step."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from runstore.storage import schema

REPO = Path(__file__).resolve().parents[2]


def test_schema_doc_is_current() -> None:
    assert (REPO / "docs" / "schema.md").read_text() == schema.markdown(), (
        "docs/schema.md is stale: regenerate it with "
        "python -c \"from runstore.storage import schema; print(schema.markdown(), end='')\" > "
        "docs/schema.md"
    )


def outer_site_dirs() -> list[str]:
    """The site-packages directories of the interpreter running the tests, however its
    environment was made (system, venv, conda, uv): where duckdb, polars, ... are."""
    import site

    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


@pytest.mark.slow
def test_wheel_installs_and_ingests(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(dist), str(REPO)], check=True, capture_output=True)
    wheel = next(dist.glob("runstore-*.whl"))
    env_dir = tmp_path / "venv"
    # An isolated venv: `system_site_packages=True` would give it the *base* interpreter's
    # packages, which are not the test environment's when the tests run inside a venv. The
    # dependencies come from the test environment's own site directories instead, listed in
    # a .pth file. A .pth line only adds the directory: the .pth files inside it (such as an
    # editable install's, which points at the source tree) are not processed, and the venv's
    # own site-packages, holding the wheel, comes first.
    venv.EnvBuilder(system_site_packages=False, with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    inner_site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True).stdout.strip()
    (Path(inner_site) / "_outer_site.pth").write_text("".join(f"{d}\n" for d in outer_site_dirs()))
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True,
                   capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # The installed wheel writes the tree: its subpackages (runstore.demo, ...) must ship too.
    made = subprocess.run(
        [str(py), "-c", "import sys; from runstore import demo; print(demo.__file__); "
         "demo.generate_tree(sys.argv[1], [demo.RunSpec(name='exp/a', steps=12)], seed=1)",
         str(work / "runs")], cwd=work, env=env, check=True, capture_output=True, text=True)
    assert str(env_dir) in made.stdout, made.stdout
    found = subprocess.run(
        [str(py), "-c", "import runstore.resources as r; print(r.sql_dir()); print(r.migrations_dir())"],
        cwd=work, env=env, check=True, capture_output=True, text=True).stdout.split()
    assert all(str(env_dir) in p for p in found), found
    assert Path(found[0], "kl_health.sql").is_file() or Path(found[0], "metrics.sql").is_file()
    assert Path(found[1], "0001_initial.py").is_file()
    # The web UI's pages ship in the wheel and are found from the installed package.
    assets = subprocess.run(
        [str(py), "-c", "import runstore.ui.app as a; print(a.STATIC); print(sorted(a.load_assets()))"],
        cwd=work, env=env, check=True, capture_output=True, text=True).stdout.splitlines()
    assert str(env_dir) in assets[0], assets
    for name in ("index.html", "app.css", "js/main.js", "js/lib.js", "js/pages/runs.js",
                 "js/pages/charts.js", "js/pages/sql.js", "js/pages/checkpoints.js",
                 "js/pages/timing.js", "js/pages/rollouts.js", "vendor/plotly.min.js"):
        assert repr(name) in assets[1], name
    run = subprocess.run([str(env_dir / "bin" / "runstore"), "--store", "st", "ingest", "runs"],
                         cwd=work, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "runs: 1 new" in run.stderr
    out = subprocess.run([str(env_dir / "bin" / "runstore"), "--store", "st", "sql",
                          "select run_name, kind from runs", "--format", "csv"],
                         cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["run_name,kind", "exp/a,rl"]


def test_cli_reference_is_current_and_every_command_has_an_example() -> None:
    import click

    from runstore.cli import main
    from gen_docs import cli_markdown

    assert (REPO / "docs" / "cli.md").read_text() == cli_markdown(), (
        "docs/cli.md is stale: regenerate it with python tools/gen_docs.py cli -o docs/cli.md")

    def commands(cmd: click.Command, path: str) -> list[tuple[str, click.Command]]:
        found = [(path, cmd)]
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                found += commands(sub, f"{path} {name}")
        return found

    missing = [path for path, cmd in commands(main, "runstore")
               if "Example" not in (cmd.help or "")]
    assert not missing, f"commands without an Example block in their help: {missing}"
