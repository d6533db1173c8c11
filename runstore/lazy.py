"""Modules imported on first use, for modules that name them everywhere but need them rarely.

Contract: `pyarrow` here is a stand-in whose first attribute access imports pyarrow and
hands the attribute over (later accesses find the module in `sys.modules`). A module that
writes `from .lazy import pyarrow as pa` uses `pa.Table` and the rest as usual; only what it
actually calls pays the import (~0.15 s, numpy included), so opening a snapshot for a query
pays nothing for the writer's code beside it. Type checkers see the real module
(`if TYPE_CHECKING: import pyarrow as pa`).
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """A module that is imported when one of its attributes is first read."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


pyarrow = LazyModule("pyarrow")
