"""The writing commands other than a plain ingest (`forget`, `compact`, `migrate`, `repair`,
`set_setting`), tried with hostile input and on a store damaged between two commands.

What must hold: a damaged store gives one `Error:` line naming the file and `runstore repair`,
exit 3 (never "a runstore bug", never a machine fault), and publishes nothing. Each check compares with the
store read back before the command (`storekit.digest`) or with the manifests on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

import runstore
from runstore.errors import StoreCorrupt
from runstore.storage.manifest import manifest_paths, read_manifest
from conftest import copy_store
from storekit import assert_clear_error, cli, digest


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])  # the footer is gone


DAMAGES: dict[str, Callable[[Path], None]] = {"cut": cut, "deleted": Path.unlink}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_forget_on_a_damaged_file_names_it(damage: str, shared_small_store: Path,
                                           tmp_path: Path) -> None:
    store = copy_store(shared_small_store, tmp_path / "store")
    m = read_manifest(store)
    assert m is not None
    rel = m.tables["metrics_raw"]["files"][0]
    untouched = digest(store, ("runs", "config", "spans"))
    published = manifest_paths(store)
    DAMAGES[damage](store / rel)

    result = cli(store, "forget", "b/c/sl")
    assert result.exit_code == 3, result.output
    assert_clear_error(result.stderr, rel, "runstore repair")
    with pytest.raises(StoreCorrupt, match="runstore repair"):
        runstore.open(store).forget(["b/c/sl"])
    assert manifest_paths(store) == published  # nothing published
    assert digest(store, ("runs", "config", "spans")) == untouched
