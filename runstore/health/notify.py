"""Notifications: POST each firing of a health rule, once, to chat webhooks.

Contract: `Notifier(urls, store=, root=, renotify=, timeout=, retries=, backoff=,
on_warning=)` delivers alerts (firing.Alert, or anything with its fields, `key()` and
`text()`) to every URL:

* `notify(alert)` returns at once: it only queues the message. Each URL has its own daemon
  thread and queue, so a slow, hanging or failing endpoint never stops, slows or fails the
  caller (an ingest, a watch pass, a check) nor delays the other URLs. A firing (its
  `key()`: run_id, rule, first step) is queued once per Notifier however often it is
  notified, until `settle` says it ended.
* Once across processes: with the store's location (`root`), what has been posted is kept
  in the store (notified.py: one record per firing and URL). A sender thread first claims
  the firing's record for its URL (`notify_claimed`), posts, then records it as posted
  (`notify_posted`, `notify_recorded`: the test points where tests/health/test_notify_durable.py
  kills the process). A firing another process posted, or is posting now, is skipped; a
  claim whose holder died is taken over. So a firing is posted to a URL at least once, by
  whichever process sees it first (two `runstore check --notify` in a row, a restarted `ingest
  --watch`, two processes at once), and again only when it ended and started again (`settle`) or
  with `renotify`. It is posted twice only when a process dies (or cannot write the record)
  between the endpoint's answer and the record, or when an answer is lost after the endpoint
  took the POST (at-least-once: an alert lost is worse than an alert twice). Delivery that fails
  after its retries gives the claim back: the next process retries it, and so does this one at
  its next `settle` that finds it still firing (a long-running watch tries again at its next
  pass rather than only after a restart). A store that cannot be written (read-only, no
  permission): nothing is posted (posting what cannot be recorded would post it again on every
  run), and one warning says so; the caller's own work (the check's rows and exit status) is
  unchanged. Without `root`, the once-per-Notifier rule alone holds (library use).
* `settle(firings, rules)`: after an evaluation of `rules` (names) over every run and step,
  `firings` (alerts) is every firing now; a firing of those rules that is not among them
  ended: it may be queued again in this process, and its records are dropped from the store
  (notified.Record.settle). A check limited by `--runs` or `--since-step` does not settle.
* The message is one JSON object (UTF-8, `Content-Type: application/json`): `text` (the
  alert's one line, with `&`, `<`, `>` escaped as Slack asks; Slack and Mattermost incoming
  webhooks show it), `run` (run_name), `rule`, `step` (where it started firing: first_step),
  `value` (its peak), `latest`, `last_step`, `steps_over`, `status`, `store`. JSON has no NaN
  or Infinity: such numbers are written by `numbers.json_number`, as in every UI answer
  (the strings "NaN", "Infinity", "-Infinity"; the text says NaN / Infinity too).
* Delivery: a POST with `timeout` seconds per socket operation (connect, each read); user
  info in the URL (`https://user:password@host/...`) is sent as Basic authorization. A
  connection error, a timeout, HTTP 429 or 5xx is retried `retries` times, waiting
  `backoff`, 2 x `backoff`, 4 x `backoff`, ... seconds, or longer when a 429 or 503 says
  how long in `Retry-After` (seconds or an HTTP date, as Slack and most APIs send it; a wait
  past `MAX_RETRY_AFTER_S` is not waited: the next check or watch tries again); then, or at once for any other
  status (a 4xx means the URL or payload is wrong; a redirect is not followed, so the
  payload never goes where it was not sent), one warning says it was not sent. A 2xx status
  is a delivery, even when the body of the answer then stalls or breaks off (the endpoint
  took the POST: a retry would post it again). At most
  `max_pending` messages wait per URL; past that the oldest is dropped, with a warning.
* `close(timeout)` waits up to `timeout` seconds for what is queued, then returns; what is
  still pending is reported in one warning per URL (the threads are daemons: they never keep
  the process alive; what they had not posted is left to the next process).
* Secrets: every warning and error names a URL as `urls.redact(url)`
  (`https://hooks.slack.com/…`), and any text from the HTTP stack is scrubbed of the URL and
  its parts (`urls.scrub`); `urls.check_url` refuses anything but an http(s) URL with a host
  and no control character. The record holds no URL.
* Warnings go to `on_warning` (the CLI prints them to stderr), else to the `runstore.notify`
  logger; an `on_warning` that raises is logged, never propagated.

Which URLs (`--notify`, `RUNSTORE_NOTIFY`, runstore.toml's `notify`): urls.py. The retry loop
is runstore's own, not urllib3's `Retry` or tenacity: each attempt renews the claim and each
wait ends at `close()` (docs/architecture.md, "Libraries").
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..crashpoints import pause_point
from ..numbers import json_number
from ..storage.location import location
from .notified import Record, note
from .urls import (ENV, check_url, config_urls, redact, scrub, split_env, urls,  # noqa: F401
                   without_userinfo)

TIMEOUT_S = 5.0
RETRIES = 3
BACKOFF_S = 0.5
MAX_RETRY_AFTER_S = 60.0  # the longest `Retry-After` waited for (well inside a claim's TTL)
MAX_PENDING = 1000
LOG = logging.getLogger("runstore.notify")


def payload(alert: Any, store: str | None) -> dict[str, Any]:
    """The JSON object posted for `alert` (see the module)."""
    text = alert.text().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return {"text": text, "run": alert.run_name, "rule": alert.rule,
            "step": alert.first_step, "value": json_number(alert.peak),
            "latest": json_number(alert.latest), "last_step": alert.last_step,
            "steps_over": alert.steps_over, "status": alert.status, "store": store}


@dataclass
class _Message:
    body: bytes
    what: str  # "run: rule", for warnings
    alert: Any  # the firing, for its record


def _opener() -> Any:
    """An opener that follows no redirect: a 3xx becomes an HTTPError, so the payload goes
    only where it was sent. (urllib.request is imported here: ~20 ms that `runstore check`
    without a webhook does not pay.)"""
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(NoRedirect)


class _Sender(threading.Thread):
    """The delivery thread of one URL."""

    STOP = object()

    def __init__(self, url: str, owner: "Notifier"):
        super().__init__(name=f"runstore-notify {redact(url)}", daemon=True)
        self.url, self.owner = url, owner
        self.queue: queue.Queue[Any] = queue.Queue()
        self.opener = _opener()
        # urllib does not take user info in a URL: it becomes a Basic Authorization header
        # (as curl and requests do), and the request goes to the URL without it.
        self.target, self.headers = without_userinfo(url)

    def put(self, message: _Message) -> None:
        if self.queue.qsize() >= self.owner.max_pending:
            try:
                dropped = self.queue.get_nowait()
                self.owner.warn(f"notification for {dropped.what} to {redact(self.url)} "
                                f"dropped: more than {self.owner.max_pending} waiting")
            except queue.Empty:
                pass
        self.queue.put(message)

    def run(self) -> None:
        while True:
            item = self.queue.get()
            if item is self.STOP:
                return
            if self.owner.closing.is_set():  # close() gave up on it and said so
                self.queue.task_done()
                continue
            try:
                self.deliver(item)
            except Exception as e:  # a bug must not kill the thread silently or loudly
                self.owner.warn(f"notification for {item.what} to {redact(self.url)} failed: "
                                f"{scrub(f'{type(e).__name__}: {e}', self.url)}")
            finally:
                self.queue.task_done()

    def deliver(self, message: _Message) -> None:
        owner, claim = self.owner, None
        if owner.record is not None:
            try:
                claim = owner.record.take(message.alert, self.url, renotify=owner.renotify)
            except OSError as e:
                owner.cannot_record(e)
                return
            if claim is None:
                return  # posted already, or being posted by another process
            pause_point("notify_claimed")
        try:
            tries, reason, after = 0, "", None
            for attempt in range(1 + owner.retries):
                if after is not None and after > MAX_RETRY_AFTER_S:
                    reason += f"; asked to wait {after:g} s, longer than {MAX_RETRY_AFTER_S:g} s"
                    break
                wait = max(owner.backoff * 2 ** (attempt - 1), after or 0.0) if attempt else 0.0
                if attempt and owner.closing.wait(wait):
                    reason += "; stopped retrying: closing"
                    break
                tries += 1
                if claim is not None:
                    claim.renew()
                retry, reason, after = self.post(message.body)
                if retry is None:
                    self.posted(message, claim)
                    claim = None
                    return
                if not retry:
                    break
            left = "; the next check or watch tries again" if claim is not None else ""
            owner.warn(f"notification for {message.what} to {redact(self.url)} not sent after "
                       f"{tries} attempt{'s' if tries != 1 else ''}: "
                       f"{scrub(reason, self.url)}{left}")
        finally:
            if claim is not None:
                claim.release()  # not posted: the next process may try
                owner.unsent(message.alert)  # and this one's next settle or pass

    def posted(self, message: _Message, claim: Any) -> None:
        """Record a delivered message in the store (when there is a record)."""
        if claim is None:
            return
        pause_point("notify_posted")
        try:
            claim.done(note(message.alert, self.url))
        except OSError as e:
            self.owner.warn(f"notification for {message.what} to {redact(self.url)} was posted "
                            f"but could not be recorded in the store "
                            f"({e.strerror or type(e).__name__}): it may be posted again")
            return
        pause_point("notify_recorded")

    def post(self, body: bytes) -> tuple[bool | None, str, float | None]:
        """(None, "", None) when delivered, else (whether to retry, why not, the seconds a
        429 or 503 asked to wait in `Retry-After`, or None)."""
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.target, data=body, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": "runstore", **self.headers})
        try:
            with self.opener.open(request, timeout=self.owner.timeout) as response:
                # A 2xx status means the endpoint took the POST: delivered, however its body
                # ends. Retrying because the body stalled or broke would post it again.
                try:
                    response.read(65536)
                except OSError:
                    pass
            return None, "", None
        except urllib.error.HTTPError as e:
            retry = e.code == 429 or e.code >= 500
            after = retry_after(e.headers.get("Retry-After")) if e.code in (429, 503) else None
            return retry, f"HTTP {e.code} {e.reason}", after
        except (urllib.error.URLError, OSError) as e:  # refused, DNS, timeout, reset
            why = getattr(e, "reason", None) or e
            return True, f"{type(why).__name__ if not str(why) else why}", None


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """The seconds an HTTP `Retry-After` header asks to wait (RFC 9110: a whole number of
    seconds, or an HTTP date), 0 for a date already past, None when absent or unreadable.

    >>> retry_after("30"), retry_after(" 0 "), retry_after(None), retry_after("soon")
    (30.0, 0.0, None, None)
    >>> retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=784111767.0)
    10.0
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    from datetime import timezone
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)  # HTTP dates are GMT
        at = when.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, at - (time.time() if now is None else now))


class Notifier:
    """Sends alerts to webhooks without ever blocking the caller (see the module)."""

    def __init__(self, urls: Sequence[str], *, store: str | None = None, root: Any = None,
                 renotify: bool = False, timeout: float = TIMEOUT_S, retries: int = RETRIES,
                 backoff: float = BACKOFF_S, max_pending: int = MAX_PENDING,
                 on_warning: Callable[[str], None] | None = None):
        self.urls = list(dict.fromkeys(check_url(u) for u in urls))
        self.store = store
        self.record = Record(location(root)) if root is not None else None
        self.renotify = renotify
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.max_pending = max(1, int(max_pending))
        self.on_warning = on_warning
        self.closing = threading.Event()
        self.sent: set[tuple[Any, ...]] = set()  # the firings queued (Alert.key())
        self.retry: dict[tuple[Any, ...], Any] = {}  # not delivered: queued again by `settle`
        self._lock = threading.Lock()
        self._record_failed = False
        self._senders = [_Sender(u, self) for u in self.urls]
        for s in self._senders:
            s.start()

    def warn(self, text: str) -> None:
        try:
            if self.on_warning is not None:
                self.on_warning(text)
                return
        except Exception:
            LOG.exception("on_warning failed while reporting a notification problem")
        LOG.warning("%s", text)

    def cannot_record(self, e: OSError) -> None:
        """Say once that the store takes no record, so nothing is posted (see the module)."""
        with self._lock:
            if self._record_failed:
                return
            self._record_failed = True
        self.warn(f"notifications not sent: cannot record them in the store {self.store or ''} "
                  f"({e.strerror or type(e).__name__}), and posting what is not recorded "
                  "would post it again on every run. Run this as a user who can write the "
                  "store, or drop --notify")

    def notify(self, alert: Any) -> bool:
        """Queue `alert` for every URL; False when this firing was queued already."""
        key = alert.key()
        with self._lock:
            if key in self.sent or self.closing.is_set():
                return False
            self.sent.add(key)
        body = json.dumps(payload(alert, self.store), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
        message = _Message(body, f"{alert.run_name}: {alert.rule}", alert)
        for s in self._senders:
            s.put(message)
        return True

    def unsent(self, alert: Any) -> None:
        """`alert` was not delivered to some URL: the next `settle` that finds it still firing
        (a watch's next pass) queues it again; the store's record keeps the URLs that took it
        from a second post."""
        with self._lock:
            self.sent.discard(alert.key())
            self.retry[alert.key()] = alert

    def settle(self, firings: Iterable[Any], rules: Iterable[str]) -> None:
        """`firings` is every firing of `rules` now: the others ended (see the module)."""
        firings, rules = list(firings), set(rules)
        now = {a.key() for a in firings}
        with self._lock:
            self.sent = {k for k in self.sent if k[1] not in rules or k in now}
            again = [a for a in firings if self.retry.pop(a.key(), None) is not None]
            self.retry = {k: a for k, a in self.retry.items() if k[1] not in rules or k in now}
        if self.record is not None:
            try:
                self.record.settle(firings, rules)
            except OSError as e:
                self.cannot_record(e)
        for alert in again:  # not delivered the last time, and firing still: try again
            self.notify(alert)

    def close(self, timeout: float = 10.0) -> None:
        """Wait up to `timeout` s for queued messages, then stop (see the module)."""
        deadline = time.monotonic() + max(0.0, timeout)
        for s in self._senders:
            while (s.queue.unfinished_tasks and time.monotonic() < deadline):
                time.sleep(0.01)
        self.closing.set()
        for s in self._senders:
            pending = s.queue.unfinished_tasks
            if pending:
                self.warn(f"{pending} notification{'s' if pending != 1 else ''} to "
                          f"{redact(s.url)} not delivered within {timeout:g} s; giving up")
            s.queue.put(_Sender.STOP)

    def __enter__(self) -> "Notifier":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
