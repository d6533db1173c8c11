"""Watching live runs: ingest every few seconds, report each health rule that starts firing once.

Contract: `watch(store, paths, interval=S)` runs passes until it is interrupted (Ctrl-C,
SIGINT or SIGTERM), `stop` is set or `max_passes` passes are done, then returns the number of
passes; an interrupt is a normal way to end, never an error. A pass ingests the paths that
exist (incrementally: only new complete lines are read, so a half-written line waits for the
next pass) and, with `check=True`, evaluates the health rules (evaluate.py) and hands each
firing that starts to `on_alert`: a firing is a (run, rule) with the step where it started
(`Alert.key()`), handed over once per process, and again only after a pass where it did not
fire (it ended, then started again). `on_firings(alerts, rule_names)` gets every firing of
every pass and the rules evaluated (every run, every step: what notify.Notifier.settle needs
to forget the firings that ended). With `on_finding`, it also runs the doctor
(health.doctor) and hands each (run, finding) that appears to `on_finding` once, keyed by
`(run_id, finding)`. `on_report` gets the ingest report of the first pass and of every pass that changed something (quiet passes stay quiet). Between
passes it sleeps (`interval` seconds from the start of one pass to the start of the next,
and never less than a tenth of `interval`), so a slow pass does not turn into a busy loop.

The store and the tree may change under it: a path that does not exist yet (or any more), or
that holds no run yet, is reported once through `on_warning` and watched for; a run directory
that appears is picked up, one that vanishes is marked `missing` by the ingest; a pass that
fails for a reason that can pass (the store lock held too long, a file removed mid-read, no
store yet) is reported and retried on the next pass. `Watcher.request_stop()` ends a pass under
way from another thread (`runstore ui --watch`) as Ctrl-C ends an ingest. Errors that would
repeat forever (a corrupt store, a newer store version, a bad rule) propagate. With
`interval=None` there is exactly one pass, and a missing path, or paths holding no run, are an
error, as for a plain ingest.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Callable, Protocol, Sequence

from ..errors import QueryError, SourceNotFound, StoreLocked, StoreNotFound, UsageError
from ..ingest.interrupts import Interrupts
from ..ingest.report import NO_RUNS_HINT, IngestReport, Progress
from ..numbers import seconds
from ..query.reader import Reader
from ..storage.location import Location, location
from .config import choose_rules
from .evaluate import evaluate
from .firing import Alert
from .rules import Rule, TrendRule


class Watched(Reader, Protocol):
    """What a watch needs of a store (a `Store` is one): its queries, and its ingest."""

    def ingest(self, paths: Any, *, progress: Progress | None = ..., on_warning: Any = ...,
               lock_timeout: float = ..., require_runs: bool = ...,
               prefix: str | None = ..., interrupts: Any = ...) -> IngestReport: ...

# Failures that the next pass may not meet: they are reported and the watch goes on.
TRANSIENT: tuple[type[BaseException], ...] = (StoreLocked, SourceNotFound, StoreNotFound,
                                              QueryError, OSError)


class Watcher:
    """The state of one watch: which paths were missing and which alerts were reported."""

    TRANSIENT = TRANSIENT  # what a pass may raise that the next pass may not meet

    def __init__(self, store: "Watched", paths: Sequence[str | os.PathLike[str]], *,
                 check: bool = True, rules: "Sequence[Rule | TrendRule] | None" = None,
                 on_alert: Callable[[Alert], None] | None = None,
                 on_report: Callable[[IngestReport], None] | None = None,
                 on_warning: Callable[[str], None] | None = None,
                 progress: Progress | None = None, lock_timeout: float = 60.0,
                 prefix: str | None = None,
                 on_firings: Callable[[list[Alert], list[str]], None] | None = None,
                 on_finding: Callable[[dict[str, Any]], None] | None = None):
        self.store = store
        self.prefix = prefix  # `ingest --prefix`: names the runs new to the store
        self.on_firings = on_firings
        # The doctor (health.doctor), when asked for: each (run, finding) once, as a rule.
        self.on_finding = on_finding
        self.found: set[tuple[str, str]] = set()
        self.paths: list[Location] = [location(p) for p in paths]
        self.check = check
        self.rules = list(rules) if rules is not None else None
        self.on_alert = on_alert
        self.on_report = on_report
        self.on_warning = on_warning
        self.progress = progress
        self.lock_timeout = lock_timeout
        self.reported: set[tuple[Any, ...]] = set()  # the firings (Alert.key()) of the last pass
        self.missing: set[Location] = set()
        self.empty: set[str] = set()  # paths that held no run at the last pass (said once)
        self.passes = 0
        self._ingesting: Interrupts | None = None  # the signal handling of the ingest under way
        self._stop_asked: str | None = None

    def request_stop(self, why: str = "stopping") -> None:
        """End the pass under way, from any thread, as Ctrl-C ends an ingest: at the next whole
        file (what was read whole is published), at once while it waits for the store's lock;
        the pass then raises KeyboardInterrupt."""
        self._stop_asked = why
        ingesting = self._ingesting
        if ingesting is not None:
            ingesting.request(why)

    def warn(self, text: str) -> None:
        if self.on_warning is not None:
            self.on_warning(text)

    def existing_paths(self) -> list[Location]:
        """The paths that exist now; says once when one goes missing and when it is back."""
        present = []
        for p in self.paths:
            if p.exists():
                present.append(p)
                if p in self.missing:
                    self.missing.discard(p)
                    self.warn(f"{p} exists now; ingesting it")
            elif p not in self.missing:
                self.missing.add(p)
                self.warn(f"{p} does not exist (yet); watching for it")
        return present

    def run_pass(self, *, strict: bool = False) -> list[Alert]:
        """One ingest and, with `check`, one evaluation; the alerts not reported before."""
        self.passes += 1
        paths = self.paths if strict else self.existing_paths()
        if paths:
            # A watched path may hold no run yet: that ends only a one-pass (strict) ingest.
            # The signals that end the watch (`_StopOnSignals`) end its ingest as they end a
            # plain `runstore ingest`: at the next whole file, never inside a commit; and
            # `request_stop` from a thread.
            with Interrupts(_StopOnSignals.SIGNALS) as self._ingesting:
                if self._stop_asked:
                    self._ingesting.request(self._stop_asked)
                try:
                    report = self.store.ingest(paths, progress=self.progress,
                                               on_warning=self.on_warning,
                                               lock_timeout=self.lock_timeout,
                                               require_runs=strict, prefix=self.prefix,
                                               interrupts=self._ingesting)
                finally:
                    self._ingesting = None
            for p in sorted(set(report.empty_paths) - self.empty):
                self.warn(f"{p} holds no runs (yet): {NO_RUNS_HINT}; watching it")
            self.empty = set(report.empty_paths)
            if self.on_report is not None and (self.passes == 1 or _changed(report)):
                self.on_report(report)
        if self.on_finding is not None:
            self.report_findings(strict)
        if not self.check:
            return []
        try:
            if self.rules is None:
                # Chosen once: runstore.toml and the store's setting do not change mid-watch
                # often enough to re-read them every pass.
                self.rules = choose_rules(self.store)
            table = evaluate(self.store, self.rules)
        except StoreNotFound:
            if strict:
                raise
            return []  # nothing ingested yet: no store to check
        firing = [Alert(**{k: row[k] for k in Alert.__dataclass_fields__})
                  for row in table.to_pylist()]
        new = [a for a in firing if a.key() not in self.reported]
        self.reported = {a.key() for a in firing}
        for alert in new:
            if self.on_alert is not None:
                self.on_alert(alert)
        if self.on_firings is not None:
            self.on_firings(firing, [r.name for r in self.rules])
        return new


    def report_findings(self, strict: bool) -> None:
        """The doctor's findings of this pass that were not reported before, to `on_finding`
        (keyed by run and finding: a finding that keeps firing is reported once)."""
        from .doctor import diagnose

        try:
            rows = diagnose(self.store).rows
        except StoreNotFound:
            if strict:
                raise
            return
        for row in rows:
            key = (row["run_id"], row["finding"])
            if key not in self.found:
                self.found.add(key)
                assert self.on_finding is not None
                self.on_finding(row)


def watch(store: "Watched", paths: Sequence[str | os.PathLike[str]], *,
          interval: float | None, check: bool = True,
          rules: "Sequence[Rule | TrendRule] | None" = None,
          on_alert: Callable[[Alert], None] | None = None,
          on_report: Callable[[IngestReport], None] | None = None,
          on_warning: Callable[[str], None] | None = None, progress: Progress | None = None,
          lock_timeout: float = 60.0, stop: threading.Event | None = None,
          max_passes: int | None = None, prefix: str | None = None,
          on_firings: Callable[[list[Alert], list[str]], None] | None = None,
          on_finding: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Ingest `paths` every `interval` seconds (once when None) until interrupted; see module.

    `rules` defaults to `runstore check`'s (the KL rule, runstore.toml, the store setting).
    With `on_finding`, each pass also runs the doctor and hands it each (run, finding) that
    appears, once (`present.findings.finding_text` words one). Returns the number of passes
    run.
    """
    if interval is not None and seconds(interval) is None:
        raise UsageError(f"--watch takes a number of seconds > 0, got {interval!r}")
    watcher = Watcher(store, paths, check=check, rules=rules, on_alert=on_alert,
                      on_report=on_report, on_warning=on_warning, progress=progress,
                      lock_timeout=lock_timeout, prefix=prefix, on_firings=on_firings,
                      on_finding=on_finding)
    if interval is None:
        watcher.run_pass(strict=True)
        return watcher.passes
    if check and watcher.rules is None:
        # A bad runstore.toml is a usage error now, not a failure on every pass.
        watcher.rules = choose_rules(store)
    stop = stop or threading.Event()
    with _StopOnSignals() as interrupted:
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    watcher.run_pass()
                except TRANSIENT as e:
                    if interrupted.is_set():
                        break
                    watcher.warn(f"this pass failed, retrying in {interval:g} s: {_reason(e)}")
                if max_passes is not None and watcher.passes >= max_passes:
                    break
                # Sleep until the next pass is due, but always rest a little: a pass that
                # takes longer than the interval must not make the loop spin.
                rest = max(interval - (time.monotonic() - started), interval / 10)
                stop.wait(rest)
        except KeyboardInterrupt:
            pass
        except BaseException:
            # DuckDB turns an interrupt in the middle of a query into its own error; when we
            # were asked to stop, that is still a clean stop.
            if not interrupted.is_set():
                raise
    return watcher.passes


def _changed(report: IngestReport) -> bool:
    return bool(report.runs_new or report.runs_updated or report.runs_missing
                or report.warnings or any(report.rows_added.values()))


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename:
        return f"{e.strerror or type(e).__name__}: {e.filename}"
    return str(e) or type(e).__name__


class _StopOnSignals:
    """SIGINT and SIGTERM end the watch cleanly (only the main thread can install handlers).

    The handlers raise, so a sleep or an ingest stops at once; the event records that the
    stop was asked for, so an error that the interrupt causes inside a library is not
    mistaken for a failure.
    """

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.saved: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        first = not self.event.is_set()
        self.event.set()
        if first:  # a second signal while stopping must not interrupt the cleanup
            # KeyboardInterrupt, not an Exception: code that catches Exception must let it by.
            raise KeyboardInterrupt(signal.Signals(signum).name)

    def __enter__(self) -> threading.Event:
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                sig = getattr(signal, name, None)
                # A signal the process ignores (a job started with `&` or `nohup`) stays so.
                if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
                    self.saved[sig] = signal.signal(sig, self._handler)
        return self.event

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self.saved.items():
            signal.signal(sig, previous)
