"""The skill runstore ships for coding agents: `runstore skill` prints it, `--install` writes it.

Contract: `text()` is the SKILL.md (front matter `name: runstore` and a `description:` saying
when an agent should use it; a body in the shape of tinker-cookbook's own logging skill:
what the store holds, the questions and the command or MCP tool that answers each, the
debugging tips mapped to `check`, `doctor` and the views). It lives beside this module as
`SKILL.md` and ships in the wheel; the doc tests run every command in it against the demo
store. `install(directory=None, force=False)` writes it to `directory/SKILL.md` (default
`DEFAULT_DIR`, where Claude Code looks for a project's skills, under the working directory)
and returns an `Installed` saying what happened: `wrote` (a new file), `unchanged` (the same
text was there), `replaced` (with `force`). A different file already there is never
overwritten without `force`: `UsageError` naming it and saying how to compare. The file is
written whole (`present.outfile`: a temporary file renamed over it), never half.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

DEFAULT_DIR = os.path.join(".claude", "skills", "runstore")
FILE = "SKILL.md"


def text() -> str:
    """The SKILL.md runstore ships."""
    return (Path(__file__).parent / FILE).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Installed:
    """Where the skill is, and what `install` did: `wrote`, `unchanged` or `replaced`."""

    path: Path
    action: str

    def message(self) -> str:
        said = {"wrote": "wrote", "unchanged": "already up to date:", "replaced": "replaced"}
        return f"{said[self.action]} {self.path}"


def install(directory: str | os.PathLike[str] | None = None, *, force: bool = False) -> Installed:
    """Write the skill to `directory/SKILL.md` (see the module)."""
    folder = Path(directory if directory is not None else DEFAULT_DIR).expanduser()
    path = folder / FILE
    wanted = text()
    action = "wrote"
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give the directory to hold SKILL.md instead")
    if path.exists():
        try:
            there = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            there = f"(unreadable: {e})"
        if there == wanted:
            return Installed(path, "unchanged")
        if not force:
            raise UsageError(f"{path} exists and differs from runstore's skill (changed by "
                             f"hand, or from another version); compare with `runstore skill | "
                             f"diff {path} -`, then pass --force to replace it")
        action = "replaced"
    try:
        from ..present.outfile import replace

        folder.mkdir(parents=True, exist_ok=True)
        replace(path, [wanted.encode("utf-8")])
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}; give another directory "
                         "(runstore skill --install DIR)") from e
    return Installed(path, action)
