"""Manifests: the numbered files that make the store's tables one snapshot, read and checked.

Contract:

* `_runstore/manifests/N.json` is snapshot N: each table's Delta version, its live files (and
  the content hash recorded for each when it was written, see integrity.py), the ledger file,
  the schema version, the applied migrations, the store's settings. The newest is the state.
* A manifest is published by creating its file (written aside and hard-linked into place, or a
  conditional put on S3), so it appears whole or not at all, and a number is never reused.
* Everything read from a manifest is checked before use (`Manifest.from_json`): every field
  of the right type, every path a relative one inside its own place in the store (a table's
  files under `tables/<table>/`, the ledger under `_runstore/ledger/`), every number in range,
  the number inside equal to the file's name. A manifest that fails is an `InvalidManifest`
  (a ValueError) saying which field and why; `read_manifest` turns it into a `StoreCorrupt`
  that names the file and says to run `runstore repair`. Fields this runstore does not know
  are ignored (a later runstore may add some), as are extra keys inside table entries; a
  manifest of a newer schema version than this runstore knows is not checked further
  (`NewerManifest`), and `read_manifest` refuses it with "upgrade runstore".
* `mend(data)` resets the fields that do not change what a snapshot holds (settings,
  checksums, migrations, created_at, last_ingest) when they are invalid; `runstore repair`
  uses it instead of setting the whole snapshot aside.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import StoreCorrupt, StoreNotFound
from .location import Location, location
from .versions import check_version, latest_version

MANIFESTS = "_runstore/manifests"
LEDGERS = "_runstore/ledger"

Root = Location  # a store on local disk, or under an S3 prefix (see location.py)


def utcnow() -> datetime:
    """Now, in UTC: the time manifests, migrations and records are stamped with."""
    return datetime.now(timezone.utc)


class InvalidManifest(ValueError):
    """A manifest whose content is not what runstore writes; the text says which field."""


class NewerManifest(InvalidManifest):
    """A manifest of a newer schema version than this runstore knows: not checked further
    (a later runstore may write it differently); the version check refuses the store."""

    def __init__(self, version: int):
        super().__init__(f"schema version {version} is newer than this runstore knows")
        self.version = version


@dataclass
class Manifest:
    """One published snapshot of the store."""

    seq: int
    # name -> {"version": int, "files": [rel paths], "checksums": {rel path: "sha256:…"}}
    tables: dict[str, dict[str, Any]]
    ledger: str | None  # rel path of the ledger parquet, None when empty
    schema_version: int
    migrations: list[dict[str, str]] = field(default_factory=list)
    created_at: str = ""
    last_ingest: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, *, seq: int | None = None) -> "Manifest":
        """The manifest in `text`, checked (`seq`: the number its file name says)."""
        try:
            data = json.loads(text)
        except ValueError as e:
            raise InvalidManifest(f"not JSON ({e})" if text.strip() else "the file is empty")
        check(data, seq=seq)
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
REQUIRED = ("seq", "tables", "ledger", "schema_version")


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _need_int(value: Any, where: str, least: int) -> None:
    # bool is an int to Python, never to a manifest
    if type(value) is not int or value < least:
        raise InvalidManifest(f"{where} must be an integer of at least {least}, got {_show(value)}")


def _need(ok: bool, where: str, what: str, value: Any) -> None:
    if not ok:
        raise InvalidManifest(f"{where} must be {what}, got {_show(value)}")


def safe_rel(value: Any, prefix: str, suffix: str) -> bool:
    """Whether `value` is a relative path of the store below `prefix` ending with `suffix`
    (no `..`, no absolute path, nothing a reader could be led outside the store with)."""
    if not isinstance(value, str) or not value.startswith(prefix) or not value.endswith(suffix):
        return False
    if "\\" in value or "\0" in value or "//" in value:
        return False
    return all(part not in ("", ".", "..") for part in value.split("/"))


def check(data: Any, *, seq: int | None = None) -> None:
    """Raise `InvalidManifest` unless `data` (parsed JSON) is a manifest runstore can use."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if type(version) is int and version > latest_version():
        raise NewerManifest(version)
    check_core(data, seq=seq)
    for why in soft_problems(data).values():
        raise InvalidManifest(why)


def check_core(data: Any, *, seq: int | None = None) -> None:
    """The fields that say what the snapshot holds: without them there is no snapshot."""
    _need(isinstance(data, dict), "the manifest", "a JSON object", data)
    for key in REQUIRED:
        if key not in data:
            raise InvalidManifest(f"the field {key!r} is missing")
    _need_int(data["seq"], "seq", 0)
    if seq is not None and data["seq"] != seq:
        raise InvalidManifest(f"seq is {data['seq']} but the file is snapshot {seq}")
    _need_int(data["schema_version"], "schema_version", 0)
    tables = data["tables"]
    _need(isinstance(tables, dict), "tables", "an object of table entries", tables)
    for name, entry in tables.items():
        where = f"tables.{name}"
        _need(bool(_TABLE_NAME.match(name)), "a table name", "lower-case letters, digits and _",
              name)
        _need(isinstance(entry, dict), where, "an object with version and files", entry)
        if "version" not in entry or "files" not in entry:
            raise InvalidManifest(f"{where} lacks {'version' if 'version' not in entry else 'files'}")
        _need_int(entry["version"], f"{where}.version", -1)
        files = entry["files"]
        _need(isinstance(files, list), f"{where}.files", "a list of paths", files)
        for i, f in enumerate(files):
            _need(safe_rel(f, f"tables/{name}/", ".parquet"), f"{where}.files[{i}]",
                  f"a .parquet path inside tables/{name}/", f)
        _need(len(set(files)) == len(files), f"{where}.files", "a list without repeats", files)
    ledger = data["ledger"]
    _need(ledger is None or safe_rel(ledger, f"{LEDGERS}/", ".parquet"), "ledger",
          f"null or a .parquet path inside {LEDGERS}/", ledger)


def _checksums(entry: dict[str, Any], where: str) -> None:
    sums = entry.get("checksums", {})
    _need(isinstance(sums, dict), f"{where}.checksums", "an object", sums)
    for f, digest in sums.items():
        _need(f in entry["files"], f"{where}.checksums", "keyed by the table's files", f)
        _need(isinstance(digest, str) and bool(DIGEST.match(digest)),
              f"{where}.checksums[{f}]", "'sha256:' and 64 hex digits", digest)


_MIGRATION = re.compile(r"^(\d{4})_\w+$")


def _migrations(migrations: Any, version: int) -> None:
    _need(isinstance(migrations, list), "migrations", "a list", migrations)
    numbers = []
    for i, m in enumerate(migrations):
        _need(isinstance(m, dict) and isinstance(m.get("name"), str)
              and bool(_MIGRATION.match(m["name"])) and isinstance(m.get("applied_at"), str)
              and isinstance(m.get("doc", ""), str), f"migrations[{i}]",
              "an object with name (NNNN_name), applied_at and doc", m)
        numbers.append(int(m["name"][:4]))
    _need(numbers == sorted(set(numbers)), "migrations", "in order, each once", numbers)
    # The schema version is the number of the last migration applied.
    _need((numbers[-1] if numbers else 0) == version, "migrations",
          f"a list ending at schema_version {version}", [m["name"] for m in migrations])


def _created_at(created: Any) -> None:
    _need(isinstance(created, str), "created_at", "a time as ISO text", created)


def _last_ingest(last: Any) -> None:
    _need(last is None or isinstance(last, dict), "last_ingest", "null or an object", last)


def check_settings(settings: Any) -> None:
    _need(isinstance(settings, dict), "settings", "an object", settings)
    for name, value in settings.items():
        _need(_setting_ok(value), f"settings.{name}", "a finite number or a string", value)


def _setting_ok(value: Any) -> bool:
    return isinstance(value, str) or (type(value) in (int, float) and math.isfinite(value))


_SOFT = {"migrations": ([], lambda v, d: _migrations(v, d["schema_version"])),
         "created_at": ("", lambda v, d: _created_at(v)),
         "last_ingest": (None, lambda v, d: _last_ingest(v)),
         "settings": ({}, lambda v, d: check_settings(v))}


def soft_problems(data: dict[str, Any]) -> dict[str, str]:
    """What is wrong with the fields `mend` can reset without losing the snapshot (given a
    `data` that passed `check_core`): field -> why."""
    out = {}
    for key, (default, fn) in _SOFT.items():
        try:
            fn(data.get(key, default), data)
        except InvalidManifest as e:
            out[key] = str(e)
    for name, entry in data["tables"].items():
        try:
            _checksums(entry, f"tables.{name}")
        except InvalidManifest as e:
            out[f"tables.{name}.checksums"] = str(e)
    return out


def mend(data: dict[str, Any]) -> tuple[Manifest, dict[str, str]]:
    """A manifest from `data` (which passed `check_core`) with each bad field of
    `soft_problems` reset: a bad setting dropped (the others kept), bad checksums dropped (to
    be computed again), migrations emptied (the caller rebuilds them), created_at and
    last_ingest cleared. Returns it and what was reset (field -> why)."""
    problems = soft_problems(data)
    fixed = dict(data)
    fixed["tables"] = {k: dict(v) for k, v in data["tables"].items()}
    for key in problems:
        if key == "settings" and isinstance(data.get("settings"), dict):
            fixed["settings"] = {k: v for k, v in data["settings"].items() if _setting_ok(v)}
        elif key.startswith("tables."):
            fixed["tables"][key.split(".")[1]].pop("checksums", None)
        else:
            fixed[key] = _SOFT[key][0]
    known = {k: fixed[k] for k in Manifest.__dataclass_fields__ if k in fixed}
    return Manifest(**known), problems


def manifest_paths(root: Root) -> list[tuple[int, Any]]:
    d = location(root) / MANIFESTS
    out = []
    for n in d.list():
        if n.endswith(".json") and n[:-5].isdigit():
            out.append((int(n[:-5]), d / n))
    return sorted(out)


def load(path: Any, seq: int | None = None) -> Manifest:
    """The checked manifest at `path`; OSError when it cannot be read, InvalidManifest when
    its content is not a manifest."""
    try:
        text = path.read_text()
    except UnicodeDecodeError as e:
        raise InvalidManifest(f"not UTF-8 text ({e})") from e
    return Manifest.from_json(text, seq=seq)


def read_manifest(root: Root) -> Manifest | None:
    """The newest published manifest, or None for a store with none yet. `root` may also be
    a plain path or URI."""
    paths = manifest_paths(location(root))
    if not paths:
        return None
    seq, path = paths[-1]
    try:
        return load(path, seq)
    except NewerManifest as e:
        check_version(e.version)
        raise  # not reached: check_version refuses it
    except InvalidManifest as e:
        raise StoreCorrupt(
            f"the store manifest {path} is invalid: {e}. Run `runstore repair`: it sets the "
            "file aside and falls back to the previous snapshot (then `runstore ingest` "
            "again).") from e
    except OSError as e:
        why = "a directory, not a file" if isinstance(e, IsADirectoryError) else e.strerror or e
        raise StoreCorrupt(
            f"cannot read the store manifest {path}: {why}. Run `runstore repair`: it sets the "
            "file aside and falls back to the previous snapshot (then `runstore ingest` again)."
        ) from e


def require_store(root: Root) -> Manifest:
    root = location(root)
    m = read_manifest(root)  # None when there is no manifests directory at all
    if m is None and _has_data_files(root):
        raise StoreCorrupt(f"the store at {root} has tables but no manifest in "
                           f"{root / MANIFESTS}. Run `runstore repair` to rebuild it.")
    if m is None:
        raise StoreNotFound(
            f"no store at {root} — run `runstore ingest PATH` first, or pass --store "
            "(or set $RUNSTORE_STORE)"
        )
    return m


def _has_data_files(root: Root) -> bool:
    """Whether any table directory holds a Parquet file (the empty tables a first ingest
    creates before its first snapshot hold none)."""
    tables = root / "tables"
    try:
        names = tables.list()
    except OSError:
        return False
    for name in names:
        try:
            if any(n.endswith(".parquet") for n in tables.list(name)):
                return True
        except OSError:
            continue
    return False


def publish_manifest(root: Root, m: Manifest) -> None:
    """Publish snapshot `m`: its file appears whole, once (`Location.create`); when another
    writer published this number first, it fails."""
    location(root).create(f"{MANIFESTS}/{m.seq:08d}.json", m.to_json().encode())
