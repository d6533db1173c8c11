"""Where the shipped `sql/` and `migrations/` directories are.

In a wheel they live inside the package (`runstore/_sql`, `runstore/_migrations`, mapped by
the build config); in a source checkout or editable install they are the top-level
directories of the repository. Callers get a `Path` either way, or a clear error.
"""

from __future__ import annotations

from pathlib import Path

from .errors import RunstoreError

_PKG = Path(__file__).resolve().parent


def _find(packaged: str, top_level: str) -> Path:
    for candidate in (_PKG / packaged, _PKG.parent / top_level):
        if candidate.is_dir():
            return candidate
    raise RunstoreError(
        f"runstore's `{top_level}/` directory is missing from this installation; reinstall "
        "runstore (pip install --force-reinstall runstore)."
    )


def sql_dir() -> Path:
    return _find("_sql", "sql")


def migrations_dir() -> Path:
    return _find("_migrations", "migrations")
