"""Notifications: POST each (run, rule) that starts firing, once, to chat webhooks.

Contract: `Notifier(urls, store=..., timeout=, retries=, backoff=, on_warning=)` delivers
alerts (watch.Alert, or anything with its fields and `text()`) to every URL:

* `notify(alert)` returns at once: it only queues the message. Each URL has its own daemon
  thread and queue, so a slow, hanging or failing endpoint never stops, slows or fails the
  caller (an ingest, a watch pass, a check) nor delays the other URLs. A (run, rule) — keyed
  by `run_id` and `rule` — is sent once per Notifier however often it is notified.
* The message is one JSON object (UTF-8, `Content-Type: application/json`): `text` (the
  alert's one line, with `&`, `<`, `>` escaped as Slack asks; Slack and Mattermost incoming
  webhooks show it), `run` (run_name), `rule`, `step` (where it started firing: first_step),
  `value` (its peak), `latest`, `last_step`, `steps_over`, `status`, `store`. JSON has no NaN
  or Infinity: such numbers are null in the fields (the text says NaN / Infinity).
* Delivery: a POST with `timeout` seconds per socket operation (connect, each read); user
  info in the URL (`https://user:password@host/...`) is sent as Basic authorization. A
  connection error, a timeout, HTTP 429 or 5xx is retried `retries` times, waiting
  `backoff`, 2 x `backoff`, 4 x `backoff`, ... seconds; then, or at once for any other
  status (a 4xx means the URL or payload is wrong; a redirect is not followed, so the
  payload never goes where it was not sent), one warning says it was not sent. At most
  `max_pending` messages wait per URL; past that the oldest is dropped, with a warning.
* `close(timeout)` waits up to `timeout` seconds for what is queued, then returns; what is
  still pending is reported in one warning per URL (the threads are daemons: they never keep
  the process alive).
* Secrets: webhook URLs carry their secret in the path (Slack: /services/T.../B.../XXXX), the
  query or the user info. Every warning and error names a URL as `redact(url)`
  (`https://hooks.slack.com/…`), and any text from the HTTP stack is scrubbed of the URL and
  its parts before it is shown. `check_url` refuses anything but an http(s) URL with a host.
* Warnings go to `on_warning` (the CLI prints them to stderr), else to the `runstore.notify`
  logger; an `on_warning` that raises is logged, never propagated.

Sources of URLs (`urls`): `--notify URL` (repeatable), else `RUNSTORE_NOTIFY` (URLs
separated by whitespace; click's rule for a multiple option's environment variable), plus the
`notify = [...]` list of runstore.toml's `[check]` table (`config_urls`).
"""

from __future__ import annotations

import json
import logging
import math
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence
from urllib.parse import urlsplit

from ..errors import UsageError

ENV = "RUNSTORE_NOTIFY"
TIMEOUT_S = 5.0
RETRIES = 3
BACKOFF_S = 0.5
MAX_PENDING = 1000
LOG = logging.getLogger("runstore.notify")


def redact(url: str) -> str:
    """`url` without user info, path, query or fragment: what messages may show.

    >>> redact("https://user:pw@hooks.slack.com:443/services/T0/B0/XXXX?x=1#f")
    'https://hooks.slack.com:443/…'
    >>> redact("http://127.0.0.1:8080"), redact("not a url")
    ('http://127.0.0.1:8080', '<a URL>')
    """
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "<a URL>"
    if not parts.scheme or not host:
        return "<a URL>"
    shown = f"[{host}]" if ":" in host else host
    netloc = f"{shown}:{port}" if port is not None else shown
    secret = bool(parts.path.strip("/") or parts.query or parts.fragment)
    return f"{parts.scheme}://{netloc}" + ("/…" if secret else "")


def _secrets(url: str) -> list[str]:
    """The parts of `url` that must not appear in a message, longest first: the URL, its user
    info, path, query and fragment whole, and each path segment and query value long enough
    to be a token (6 characters; shorter ones, like `hooks` or `400`, are words, and replacing
    them would garble the message while the whole path is already gone)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    whole = [url, parts.path if len(parts.path) > 1 else "", parts.query, parts.fragment,
             parts.username or "", parts.password or ""]
    if "@" in parts.netloc:
        whole.append(parts.netloc)
    tokens = [p for p in parts.path.split("/")] + [
        v for kv in parts.query.split("&") for v in kv.split("=")]
    pieces = [p for p in whole if len(p) >= 3] + [p for p in tokens if len(p) >= 6]
    return sorted({p for p in pieces if p != parts.hostname}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` with every secret part of `url` replaced by `…`."""
    for piece in _secrets(url):
        text = text.replace(piece, "…")
    return text


def check_url(url: Any) -> str:
    """`url` if it is an http(s) URL with a host; `UsageError` (naming it redacted) if not."""
    if not isinstance(url, str) or not url.strip():
        raise UsageError(f"a notification URL is an http(s) URL, got {url!r}"
                         if not isinstance(url, str) else "a notification URL is empty")
    try:
        parts = urlsplit(url.strip())
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        ok = False
    if not ok:
        raise UsageError(f"notification URL {redact(url)} is not an http(s) URL with a host; "
                         "give the webhook URL your chat tool shows (https://hooks.slack.com/"
                         "services/...)")
    return url.strip()


def split_env(value: str | None) -> list[str]:
    """The URLs of a `RUNSTORE_NOTIFY` value (separated by whitespace)."""
    return value.split() if value else []


def config_urls(section: dict[str, Any], where: str) -> list[str]:
    """The `notify` list of a runstore.toml `[check]` table (`where` names the file)."""
    value = section.get("notify", [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
        raise UsageError(f"{where}: check.notify is a list of webhook URLs")
    return [check_url(u) for u in value]


def urls(given: Iterable[str] = (), *, env: str | None = None,
         config: Iterable[str] = ()) -> list[str]:
    """The URLs to notify: the config file's, then `given` (`--notify`), else `env`'s,
    without duplicates, each checked."""
    chosen = list(given) or split_env(env)
    return list(dict.fromkeys(check_url(u) for u in [*config, *chosen]))


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def payload(alert: Any, store: str | None) -> dict[str, Any]:
    """The JSON object posted for `alert` (see the module)."""
    text = alert.text().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return {"text": text, "run": alert.run_name, "rule": alert.rule,
            "step": alert.first_step, "value": _finite(alert.peak),
            "latest": _finite(alert.latest), "last_step": alert.last_step,
            "steps_over": alert.steps_over, "status": alert.status, "store": store}


@dataclass
class _Message:
    body: bytes
    what: str  # "run: rule", for warnings


def _without_userinfo(url: str) -> tuple[str, dict[str, str]]:
    """`url` without `user:password@`, and the Authorization header that carries them."""
    import base64
    from urllib.parse import unquote, urlunsplit

    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, {}
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    token = base64.b64encode(user.encode("utf-8")).decode("ascii")
    return urlunsplit(parts._replace(netloc=netloc)), {"Authorization": f"Basic {token}"}


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
        self.target, self.headers = _without_userinfo(url)

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
        tries, reason = 0, ""
        for attempt in range(1 + self.owner.retries):
            if attempt and self.owner.closing.wait(self.owner.backoff * 2 ** (attempt - 1)):
                reason += "; stopped retrying: closing"
                break
            tries += 1
            retry, reason = self.post(message.body)
            if retry is None:
                return
            if not retry:
                break
        self.owner.warn(f"notification for {message.what} to {redact(self.url)} not sent after "
                        f"{tries} attempt{'s' if tries != 1 else ''}: {scrub(reason, self.url)}")

    def post(self, body: bytes) -> tuple[bool | None, str]:
        """(None, "") when delivered, else (whether to retry, why not)."""
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.target, data=body, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": "runstore", **self.headers})
        try:
            with self.opener.open(request, timeout=self.owner.timeout) as response:
                response.read(65536)
            return None, ""
        except urllib.error.HTTPError as e:
            retry = e.code == 429 or e.code >= 500
            return retry, f"HTTP {e.code} {e.reason}"
        except (urllib.error.URLError, OSError) as e:  # refused, DNS, timeout, reset
            why = getattr(e, "reason", None) or e
            return True, f"{type(why).__name__ if not str(why) else why}"


class Notifier:
    """Sends alerts to webhooks without ever blocking the caller (see the module)."""

    def __init__(self, urls: Sequence[str], *, store: str | None = None,
                 timeout: float = TIMEOUT_S, retries: int = RETRIES,
                 backoff: float = BACKOFF_S, max_pending: int = MAX_PENDING,
                 on_warning: Callable[[str], None] | None = None):
        self.urls = list(dict.fromkeys(check_url(u) for u in urls))
        self.store = store
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.max_pending = max(1, int(max_pending))
        self.on_warning = on_warning
        self.closing = threading.Event()
        self.sent: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
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

    def notify(self, alert: Any) -> bool:
        """Queue `alert` for every URL; False when this (run, rule) was already sent."""
        key = (alert.run_id, alert.rule)
        with self._lock:
            if key in self.sent or self.closing.is_set():
                return False
            self.sent.add(key)
        body = json.dumps(payload(alert, self.store), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
        message = _Message(body, f"{alert.run_name}: {alert.rule}")
        for s in self._senders:
            s.put(message)
        return True

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
