"""Shared fixtures: realistic run trees written by runstore's own generator, fresh stores."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runstore import demo

SHARED_SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "sample-runs"


@pytest.fixture(scope="session")
def _demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template") / "runs"
    demo.generate_tree(root, seed=7)
    return root


@pytest.fixture(scope="session")
def _awkward_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("awkward") / "runs"
    demo.generate_tree(root, demo.awkward_specs(), seed=11)
    return root


@pytest.fixture
def demo_tree(_demo_template: Path, tmp_path: Path) -> Path:
    """A private copy of the demo tree (tests may change it)."""
    dst = tmp_path / "runs"
    shutil.copytree(_demo_template, dst, symlinks=True)
    return dst


@pytest.fixture
def awkward_tree(_awkward_template: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "awkward"
    shutil.copytree(_awkward_template, dst, symlinks=True)
    return dst


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"
