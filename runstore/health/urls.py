"""Webhook URLs: which ones a command notifies, checked, and never shown with their secret.

Contract: webhook URLs carry their secret in the path (Slack: /services/T.../B.../XXXX), the
query or the user info. `redact(url)` is what a message may show of one
(`https://hooks.slack.com/…`); `scrub(text, url)` removes every secret part of a URL from a
text (what the HTTP stack said about it), whether the text holds the URL as written or as
parsed. `check_url(url, where=)` accepts only an http(s) URL with a host DNS can name (as the
request will encode it) and without any control character or space: a CR or LF could make a
request carry headers nobody wrote, so such a URL is refused before any request, by a
`UsageError` that names where it came from (`where`, e.g. `/path/runstore.toml:
check.notify[2]`) and shows it redacted only.
`without_userinfo(url)` is the URL without `user:password@` and the Basic Authorization
header that carries them. Sources (`urls`): `--notify URL` (repeatable), else
`RUNSTORE_NOTIFY` (URLs separated by whitespace; click's rule for a multiple option's
environment variable), plus the `notify = [...]` list of runstore.toml's `[check]` table
(`config_urls`, each entry named by its key).
"""

from __future__ import annotations

import re
from typing import Any, Iterable
from urllib.parse import urlsplit

from ..errors import UsageError

# What may never be inside a URL that runstore sends a request to: C0 controls, DEL, space.
_UNSAFE = re.compile(r"[\x00-\x20\x7f]")


ENV = "RUNSTORE_NOTIFY"


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
    them would garble the message while the whole path is already gone). The URL is read as
    written and as parsed (urlsplit drops tabs, CRs and LFs), and cut at every control
    character and space too, so a URL that holds them leaves nothing behind either."""
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
    # As written: the user info (before the last `@` of the authority) and everything after
    # the authority, cut at the separators and at every control character and space.
    authority, _, rest = url.partition("://")[2].partition("/")
    if "@" in authority:
        whole.append(authority.rsplit("@", 1)[0])
        tokens += re.split(r"[:\x00-\x20\x7f]", authority.rsplit("@", 1)[0])
    whole += _UNSAFE.split(rest)
    tokens += [p for piece in _UNSAFE.split(rest) for p in re.split(r"[/?&=#]", piece)]
    pieces = [p for p in whole if len(p) >= 3] + [p for p in tokens if len(p) >= 6]
    return sorted({p for p in pieces if p != parts.hostname}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` with every secret part of `url` replaced by `…`."""
    for piece in _secrets(url):
        text = text.replace(piece, "…")
    return text


def check_url(url: Any, where: str | None = None) -> str:
    """`url` (stripped) if it is an http(s) URL with a host and no control character or
    space; a `UsageError` naming `where` it came from, and the URL only redacted, if not."""
    at = f"{where}: " if where else ""
    if not isinstance(url, str) or not url.strip():
        raise UsageError(f"{at}a notification URL is an http(s) URL, got "
                         f"{type(url).__name__}" if not isinstance(url, str)
                         else f"{at}a notification URL is empty")
    url = url.strip()
    if _UNSAFE.search(url):
        raise UsageError(f"{at}notification URL {redact(url)} holds a control character (a CR, "
                         "LF or tab) or a space, which could put headers of its own into the "
                         "request: refused. Copy the webhook URL again, on one line")
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        ok = False
    if ok:
        try:  # as the request will encode it: DNS holds no label over 63 characters
            parts.hostname.encode("idna")  # type: ignore[union-attr]
        except UnicodeError:
            raise UsageError(f"{at}notification URL {redact(url)[:80]}… names a host no DNS "
                             "can hold (a part between dots over 63 characters); give the "
                             "webhook URL your chat tool shows") from None
    if not ok:
        raise UsageError(f"{at}notification URL {redact(url)} is not an http(s) URL with a "
                         "host; give the webhook URL your chat tool shows (https://hooks."
                         "slack.com/services/...)")
    return url


def split_env(value: str | None) -> list[str]:
    """The URLs of a `RUNSTORE_NOTIFY` value (separated by whitespace)."""
    return value.split() if value else []


def config_urls(section: dict[str, Any], where: str) -> list[str]:
    """The `notify` list of a runstore.toml `[check]` table (`where` names the file); an
    error names the file and the entry (`check.notify[2]`, counted from 1)."""
    value = section.get("notify", [])
    if isinstance(value, str):
        return [check_url(value, f"{where}: check.notify")]
    if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
        raise UsageError(f"{where}: check.notify is a list of webhook URLs")
    return [check_url(u, f"{where}: check.notify[{i}]") for i, u in enumerate(value, start=1)]


def urls(given: Iterable[str] = (), *, env: str | None = None,
         config: Iterable[str] = ()) -> list[str]:
    """The URLs to notify: the config file's, then `given` (`--notify`), else `env`'s,
    without duplicates, each checked."""
    if given:
        chosen = [check_url(u, f"--notify (or ${ENV})") for u in given]
    else:
        chosen = [check_url(u, f"${ENV}") for u in split_env(env)]
    return list(dict.fromkeys([*(check_url(u) for u in config), *chosen]))


def without_userinfo(url: str) -> tuple[str, dict[str, str]]:
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
