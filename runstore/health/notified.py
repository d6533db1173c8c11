"""What has been notified: which firing was posted to which webhook, kept in the store.

Contract: `Record(root)` is the notification record of the store at `root`: one claim record
(storage.claims) per firing and destination under `AREA` (`_runstore/notify/`, beside the
snapshots: no snapshot, migration or store lock is involved, so `runstore check` stays a
reader of the data). A firing is an `Alert`'s `key()` — the run's `run_id`, the rule, the
step where it started firing — and a destination is a webhook URL; `key(alert, url)` names
their record by hashes (the URL holds a secret: the record never does; its `done` note
holds the run, rule and first step as text and the URL redacted).

* `take(alert, url, renotify=)` is the claim on posting that firing there: None when it was
  posted already (by any process) or another live process is posting it; with `renotify`
  the record of that firing and URL is dropped first, so it is posted again.
* `settle(firings, rules)` forgets the records of firings that ended: for each rule of
  `rules` (names) that was evaluated over every run and every step, a record of a (run,
  rule) that fires no more, or fires from another first step now, is removed — so a firing
  that ends and starts again is posted again, once. Only a complete evaluation may settle
  (a check limited by `--runs` or `--since-step` does not see the rest).

`OSError` from the store (read-only, no permission, S3 unreachable) comes out of both: the
caller decides (notify.py posts nothing it could not record, and says so).
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from ..storage.claims import Claim, Claims
from ..storage.location import Location
from .urls import redact

AREA = "_runstore/notify"


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _step(step: int | None) -> str:
    """A first step as a key part: `22`, `n3` for -3, `none`."""
    if step is None:
        return "none"
    return str(step) if step >= 0 else f"n{-step}"


def key(alert: Any, url: str) -> str:
    """The record key of posting `alert`'s firing to `url` (see the module)."""
    return f"{_h(alert.run_id)}-{_h(alert.rule)}-{_h(url)}-{_step(alert.first_step)}"


class Record:
    """The store's record of what was notified (see the module)."""

    def __init__(self, root: Location):
        self.claims = Claims(root, AREA)

    def take(self, alert: Any, url: str, *, renotify: bool = False) -> Claim | None:
        k = key(alert, url)
        if renotify:
            self.claims.forget([k])
        return self.claims.take(k, note(alert, url))

    def settle(self, firings: Iterable[Any], rules: Iterable[str]) -> int:
        """Forget the records of firings that ended (see the module); how many keys."""
        evaluated = {_h(r) for r in rules}
        now: dict[tuple[str, str], set[str]] = {}
        for a in firings:
            now.setdefault((_h(a.run_id), _h(a.rule)), set()).add(_step(a.first_step))
        ended = []
        for k in self.claims.keys():
            parts = k.split("-")
            if len(parts) != 4 or parts[1] not in evaluated:
                continue
            if parts[3] not in now.get((parts[0], parts[1]), ()):
                ended.append(k)
        self.claims.forget(ended)
        return len(ended)


def note(alert: Any, url: str) -> dict[str, Any]:
    """What a record says of its firing and destination, readable (the URL redacted)."""
    return {"run_id": alert.run_id, "run_name": alert.run_name, "rule": alert.rule,
            "first_step": alert.first_step, "destination": redact(url)}
