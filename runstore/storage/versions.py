"""Schema versions: the numbered migrations that exist, and whether this runstore reads a store.

Contract: `migrations/NNNN_name.py` are the migrations, each with a one-line docstring and a
`migrate(ctx)` function; `available()` lists them in order (reading only their names and
docstrings, once per state of the directory), `latest_version()` is the number of the last
one, `pending(version)` those a store at `version` has not applied (read-only). `check_version(version)` refuses a store
whose version is newer than this runstore knows ("upgrade runstore"). Nothing here writes:
applying migrations is `migrate.apply`, under the writer's lock.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import StoreVersionError
from ..resources import migrations_dir

NAME = re.compile(r"^(\d{4})_(\w+)\.py$")


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    doc: str
    path: Path

    def module(self) -> Any:
        spec = importlib.util.spec_from_file_location(f"runstore_migration_{self.number:04d}", self.path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def load(self) -> Callable[[Any], None]:
        return self.module().migrate

    def fills(self) -> tuple[str, ...]:
        """The new tables this migration writes rows into before its snapshot is published
        (its `FILLS`): a kill leaves them on disk, unlisted, and they are written afresh."""
        return tuple(getattr(self.module(), "FILLS", ()))


# (directory, its mtime) -> what `available` read there: every snapshot check asks for the
# latest version, and the shipped migrations do not change under a running process.
_READ: dict[tuple[Path, int], list[Migration]] = {}


def available() -> list[Migration]:
    folder = migrations_dir()
    key = (folder, folder.stat().st_mtime_ns)
    if key not in _READ:
        _READ[key] = _read(folder)
    return list(_READ[key])


def _read(folder: Path) -> list[Migration]:
    out = []
    for path in sorted(folder.glob("*.py")):
        m = NAME.match(path.name)
        if not m:
            continue
        doc = ""
        text = path.read_text()
        doc_match = re.match(r'\s*"""(.*?)"""', text, re.S)
        if doc_match:
            doc = doc_match.group(1).strip().splitlines()[0]
        out.append(Migration(int(m.group(1)), path.stem, doc, path))
    return out


def latest_version() -> int:
    migs = available()
    return migs[-1].number if migs else 0


def check_version(version: int) -> None:
    """Refuse a store of schema `version` when this runstore knows no such version."""
    latest = latest_version()
    if version > latest:
        raise StoreVersionError(
            f"this store has schema version {version} but this runstore only "
            f"knows up to {latest}: upgrade runstore (pip install -U runstore)."
        )


def pending(version: int) -> list[Migration]:
    """The migrations a store at schema `version` (0: no store yet) has not applied."""
    return [m for m in available() if m.number > version]


def filled_by_pending(version: int) -> set[str]:
    """The tables that a migration a store at `version` has not applied fills before it
    publishes: one of them on disk but in no snapshot is what a killed `migrate` left, which
    no reader sees and the next writer deletes (the migration writes it again)."""
    return {name for m in pending(version) for name in m.fills()}
