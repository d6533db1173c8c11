"""What the layers above the query engine read a store through: the `Reader` protocol.

Contract: the one protocol of a readable store: comparisons (`analysis`), health rules,
pictures, key lookups and other engines take a `Reader`, not a `Store`: anything with the store's location (`path`), its checked newest snapshot
(`manifest()`), the settings a query sees by default (`settings()`) and read-only queries
answered as Arrow (`arrow(sql, params)`: the guard, the sandbox and bound `$name` params of
`Store.fetch`), or converted by the caller (`fetch(sql, params, convert=)`, e.g. plain rows:
`rows.from_relation`). `Store` is one (it is the object every caller has); naming only what they use
keeps those layers below `store`, so imports run one way (docs/architecture.md). Queries may
be asked from several threads at once (the report's sections, the doctor's findings, a
check's threshold and trend rules): each runs on a cursor of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar

if TYPE_CHECKING:
    import pyarrow as pa

    from ..storage.manifest import Manifest, Root

T = TypeVar("T")


class Reader(Protocol):
    """A store as the query side reads it (a `Store` is one)."""

    @property
    def path(self) -> "Root": ...

    def manifest(self) -> "Manifest": ...

    def settings(self) -> dict[str, Any]: ...

    def arrow(self, sql: str, params: dict[str, Any] | None = None) -> "pa.Table": ...

    def fetch(self, sql: str, params: dict[str, Any] | None = None, *,
              convert: Callable[[Any], T]) -> T: ...
