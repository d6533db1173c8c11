"""runstore.health.notify against a real HTTP server on 127.0.0.1 that the tests start and stop.

The server records every request; paths choose its behaviour (`/ok`, `/fail/N/...` fails N
times with 500 first, `/status/CODE`, `/redirect`, `/hang` waits until the test releases it,
`/slow` answers after 0.1 s). Secrets are put in every part of the URLs, and every message a
Notifier emits is searched for them.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import runstore
from runstore.health import watch
from webhook import Hook, server, strict, wait_for  # noqa: F401 - server is a fixture
from runstore.errors import UsageError
from runstore.health import notify
from runstore.health.notify import Notifier, redact

SECRETS = ("hunter2", "SECRETPATH", "SECRETQ", "SECRETF", "alice")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alert(run: str = "sweep/lr_1e-3/seed_0", rule: str = "kl_sample_train_v1|v2 > 0.01",
          peak: float = 0.162, latest: float = 0.06) -> watch.Alert:
    return watch.Alert(run_id=f"id-{run}", run_name=run, rule=rule, first_step=22,
                       last_step=29, steps_over=8, longest_streak=8, peak=peak, latest=latest,
                       status="running")


def test_each_firing_is_posted_once_as_json(server: tuple[str, Hook]) -> None:
    base, hook = server
    n = Notifier([base + "/ok/a"], store="/data/store", on_warning=pytest.fail)
    a = alert()
    assert n.notify(a) is True
    assert n.notify(a) is False  # the same (run, rule) again: not sent again
    assert n.notify(alert(rule="optim/entropy < 0.05")) is True
    n.close(5)
    got = hook.received("/ok/a")
    assert len(got) == 2 and all(r["type"] == "application/json" for r in got)
    first = strict(got[0]["body"])
    assert first == {
        "text": "FIRED sweep/lr_1e-3/seed_0: kl_sample_train_v1|v2 &gt; 0.01 since step 22 "
                "(peak 0.162, latest 0.06, 8 steps over, run running)",
        "run": "sweep/lr_1e-3/seed_0", "rule": "kl_sample_train_v1|v2 > 0.01", "step": 22,
        "value": 0.162, "latest": 0.06, "last_step": 29, "steps_over": 8, "status": "running",
        "store": "/data/store"}
    assert strict(got[1]["body"])["rule"] == "optim/entropy < 0.05"


def test_non_finite_numbers_are_named_in_fields_and_text(
        server: tuple[str, Hook]) -> None:
    base, hook = server
    with Notifier([base + "/ok/nan"], on_warning=pytest.fail) as n:
        n.notify(alert(peak=math.inf, latest=math.nan, rule="a&b <c>"))
    body = strict(hook.received("/ok/nan")[0]["body"])
    assert body["value"] == "Infinity" and body["latest"] == "NaN"
    assert "peak Infinity, latest NaN" in body["text"]
    assert "a&amp;b &lt;c&gt;" in body["text"] and body["rule"] == "a&b <c>"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1.5, -0.0])
def test_one_rule_for_numbers_in_json(value: float) -> None:
    """A webhook payload, a UI table cell and a UI chart point write a number alike: by
    numbers.json_number (issue 30: one rule, not null in some places and names in others)."""
    import polars as pl

    from runstore.numbers import json_number
    from runstore.present import series
    from runstore.ui import answers

    want = json_number(value)
    assert want == (value if math.isfinite(value) else
                    {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(value)])
    assert notify.payload(alert(peak=value, latest=value), None)["value"] == want
    assert answers.plain(value) == want
    (line,) = series.lines(pl.DataFrame({"run_id": ["i"], "run_label": ["r"], "step": [1],
                                         "value": [value]}))
    assert line.to_json()["values"] == [want]
    assert json.loads(json.dumps(want)) == want  # plain JSON, no bare NaN token


def test_retries_with_backoff_then_delivers(server: tuple[str, Hook]) -> None:
    base, hook = server
    warnings: list[str] = []
    with Notifier([base + "/fail/2/x"], retries=3, backoff=0.1, timeout=2,
                  on_warning=warnings.append) as n:
        n.notify(alert())
        assert wait_for(lambda: len(hook.received("/fail/2/x")) == 3)
    times = [r["at"] for r in hook.received("/fail/2/x")]
    assert len(times) == 3 and warnings == []
    assert times[1] - times[0] >= 0.1 and times[2] - times[1] >= 0.2  # 0.1, then 0.2


def test_gives_up_after_the_retries_with_one_warning(server: tuple[str, Hook]) -> None:
    base, hook = server
    warnings: list[str] = []
    with Notifier([base + "/fail/99/y"], retries=2, backoff=0.01,
                  on_warning=warnings.append) as n:
        n.notify(alert())
        assert wait_for(lambda: len(warnings) == 1)
    assert len(hook.received("/fail/99/y")) == 3
    assert warnings == [f"notification for sweep/lr_1e-3/seed_0: kl_sample_train_v1|v2 > 0.01 "
                        f"to {base}/… not sent after 3 attempts: HTTP 500 Internal Server Error"]


@pytest.mark.parametrize("path, code", [("/status/400", "HTTP 400"), ("/status/404", "HTTP 404"),
                                        ("/redirect", "HTTP 302")])
def test_client_errors_and_redirects_are_not_retried(server: tuple[str, Hook], path: str,
                                                     code: str) -> None:
    base, hook = server
    warnings: list[str] = []
    with Notifier([base + path], retries=3, backoff=0.01, on_warning=warnings.append) as n:
        n.notify(alert())
        assert wait_for(lambda: len(warnings) == 1)
    assert len(hook.received(path)) == 1
    assert "after 1 attempt: " + code in warnings[0]
    assert hook.received("/ok") == []  # the redirect was not followed


def test_429_is_retried(server: tuple[str, Hook]) -> None:
    base, hook = server
    warnings: list[str] = []
    with Notifier([base + "/status/429"], retries=1, backoff=0.01,
                  on_warning=warnings.append) as n:
        n.notify(alert())
        assert wait_for(lambda: len(warnings) == 1)
    assert len(hook.received("/status/429")) == 2


@pytest.mark.parametrize("code", [429, 503])
def test_retry_after_is_waited_for(server: tuple[str, Hook], code: int) -> None:
    # The endpoint asks for 1 s: the retry comes no sooner, though the backoff says 0.01 s.
    base, hook = server
    path = f"/after/{code}/1/1/x"
    warnings: list[str] = []
    with Notifier([base + path], retries=2, backoff=0.01, on_warning=warnings.append) as n:
        n.notify(alert())
        assert wait_for(lambda: len(hook.accepted(path)) == 1)
    times = [r["at"] for r in hook.received(path)]
    assert len(times) == 2 and warnings == []
    assert times[1] - times[0] >= 1.0


def test_a_retry_after_date_is_waited_for(server: tuple[str, Hook]) -> None:
    from email.utils import formatdate
    from urllib.parse import quote

    base, hook = server
    when = formatdate(time.time() + 2, usegmt=True)  # whole seconds: 1 to 2 s from now
    path = f"/after/429/{quote(when)}/1/x"
    with Notifier([base + path], retries=1, backoff=0.01) as n:
        n.notify(alert())
        assert wait_for(lambda: len(hook.accepted(path)) == 1)
    times = [r["at"] for r in hook.received(path)]
    assert len(times) == 2 and times[1] - times[0] >= 0.9


@pytest.mark.parametrize("value", ["3600", "99999999999999999999999"])
def test_a_retry_after_past_the_limit_is_left_to_the_next_check(server: tuple[str, Hook],
                                                                 value: str) -> None:
    base, hook = server
    path = f"/after/429/{value}/9/x"
    warnings: list[str] = []
    with Notifier([base + path], retries=3, backoff=0.01, on_warning=warnings.append) as n:
        n.notify(alert())
        assert wait_for(lambda: len(warnings) == 1)
    assert len(hook.received(path)) == 1  # not retried at once, not waited for an hour
    assert "after 1 attempt: HTTP 429" in warnings[0]
    assert f"asked to wait {float(value):g} s, longer than 60 s" in warnings[0]


def test_the_retry_after_limit_bounds_only_what_the_endpoint_asks(
        server: tuple[str, Hook], monkeypatch: pytest.MonkeyPatch) -> None:
    # A backoff of its own longer than the limit is still waited: the limit is on Retry-After.
    from runstore.health import notify

    monkeypatch.setattr(notify, "MAX_RETRY_AFTER_S", 0.05)
    base, hook = server
    warnings: list[str] = []
    with Notifier([base + "/fail/1/long"], retries=1, backoff=0.1,
                  on_warning=warnings.append) as n:
        n.notify(alert())
        assert wait_for(lambda: len(hook.accepted("/fail/1/long")) == 1)
    times = [r["at"] for r in hook.received("/fail/1/long")]
    assert len(times) == 2 and times[1] - times[0] >= 0.1 and warnings == []


@pytest.mark.parametrize("value", ["soon", "-5", "\u00b2", ""])
def test_an_unreadable_retry_after_falls_back_to_the_backoff(server: tuple[str, Hook],
                                                             value: str) -> None:
    from urllib.parse import quote

    base, hook = server
    path = f"/after/429/{quote(value)}/1/x"
    with Notifier([base + path], retries=1, backoff=0.01) as n:
        n.notify(alert())
        assert wait_for(lambda: len(hook.accepted(path)) == 1)
    assert len(hook.received(path)) == 2


def test_a_hanging_endpoint_never_slows_the_caller_nor_other_urls(
        server: tuple[str, Hook]) -> None:
    base, hook = server
    warnings: list[str] = []
    n = Notifier([base + "/hang", base + "/ok/other"], timeout=5, retries=2,
                 on_warning=warnings.append)
    started = time.monotonic()
    for i in range(20):
        n.notify(alert(run=f"run{i}"))
    assert time.monotonic() - started < 0.5  # 20 queued while the endpoint hangs
    # The other URL has all 20 while the first is still hanging on the first message.
    assert wait_for(lambda: len(hook.received("/ok/other")) == 20)
    assert len(hook.received("/hang")) == 1 and not hook.release.is_set()
    t = time.monotonic()
    n.close(timeout=0.3)
    assert time.monotonic() - t < 1.0
    assert any("20 notifications to" in w and "not delivered within 0.3 s" in w for w in warnings)


def test_a_2xx_whose_body_stalls_is_delivered_once(server: tuple[str, Hook],
                                                    tmp_path: Path) -> None:
    """The endpoint answered 200 (it took the POST) and then stalled in its body: that is
    a delivery, recorded in the store, never retried (a retry posts the alert again) nor
    reported as not sent; the next process posts nothing."""
    base, hook = server
    warnings: list[str] = []
    root = tmp_path / "store"
    root.mkdir()
    n = Notifier([base + "/stall"], root=root, timeout=0.3, retries=3, backoff=0.05,
                 on_warning=warnings.append)
    n.notify(alert())
    n.close(5)
    assert len(hook.received("/stall")) == 1 and warnings == []
    again = Notifier([base + "/stall"], root=root, timeout=0.3, retries=3, backoff=0.05,
                     on_warning=warnings.append)
    again.notify(alert())
    again.close(5)
    assert len(hook.received("/stall")) == 1 and warnings == []


def test_a_hanging_endpoint_does_not_slow_an_ingest(
        server: tuple[str, Hook], _demo_template: Path, tmp_path: Path) -> None:
    """A real ingest pass with the health rules firing, alerts handed to a Notifier whose
    endpoint hangs (5 s timeout, 2 retries: blocking would cost 15 s or more), against the
    same pass without notifications."""
    base, hook = server

    def one_pass(name: str, on_alert: Any) -> tuple[float, list[Any]]:
        tree = tmp_path / name / "runs"
        shutil.copytree(_demo_template, tree)
        store = runstore.open(tmp_path / name / "store")
        seen: list[Any] = []

        def handle(a: Any) -> None:
            seen.append(a)
            if on_alert is not None:
                on_alert(a)
        t = time.monotonic()
        watch.watch(store, [tree], interval=None, on_alert=handle)
        return time.monotonic() - t, seen

    plain, alerts = one_pass("plain", None)
    n = Notifier([base + "/hang"], timeout=5, retries=2, backoff=0.5, on_warning=lambda w: None)
    notified, alerts2 = one_pass("notified", n.notify)
    assert alerts and len(alerts2) == len(alerts)  # the KL rule fired: there was a delivery
    assert wait_for(lambda: len(hook.received("/hang")) == 1)
    assert not hook.release.is_set()  # still hanging when the ingest had finished
    assert notified < plain + 2.0, (plain, notified)
    n.close(timeout=0)


def test_close_waits_for_what_is_queued(server: tuple[str, Hook]) -> None:
    base, hook = server
    n = Notifier([base + "/slow"], on_warning=pytest.fail)
    for i in range(5):
        n.notify(alert(run=f"r{i}"))
    n.close(timeout=10)
    assert len(hook.received("/slow")) == 5
    assert n.notify(alert(run="late")) is False  # closed: nothing more is queued


def test_the_queue_is_bounded(server: tuple[str, Hook]) -> None:
    base, hook = server
    warnings: list[str] = []
    n = Notifier([base + "/hang"], max_pending=2, timeout=5, on_warning=warnings.append)
    n.notify(alert(run="first"))
    assert wait_for(lambda: len(hook.received("/hang")) == 1)  # being delivered
    for i in range(4):
        n.notify(alert(run=f"r{i}"))
    dropped = [w for w in warnings if "dropped: more than 2 waiting" in w]
    assert [w.split(":")[0] for w in dropped] == ["notification for r0", "notification for r1"]
    n.close(timeout=0)


def test_an_on_warning_that_raises_is_logged(server: tuple[str, Hook],
                                             caplog: pytest.LogCaptureFixture) -> None:
    base, hook = server

    def broken(text: str) -> None:
        raise RuntimeError("broken handler")

    with caplog.at_level(logging.WARNING, logger="runstore.notify"):
        with Notifier([base + "/status/400", base + "/ok/after"], on_warning=broken) as n:
            n.notify(alert())
            assert wait_for(lambda: any("not sent" in r.getMessage() for r in caplog.records))
            n.notify(alert(run="next"))  # the thread is still alive
    assert len(hook.received("/ok/after")) == 2


# ---------------------------------------------------------------------------------------------
# Secrets


def secret_url(base: str, path: str) -> str:
    parts = urlsplit(base)
    return (f"http://alice:hunter2@{parts.hostname}:{parts.port}{path}/SECRETPATH"
            "?token=SECRETQ#SECRETF")


def test_no_message_shows_a_url_secret(server: tuple[str, Hook],
                                       caplog: pytest.LogCaptureFixture) -> None:
    base, hook = server
    refused = f"http://alice:hunter2@127.0.0.1:{free_port()}/x/SECRETPATH?token=SECRETQ"
    urls = [secret_url(base, "/fail/99"), secret_url(base, "/status/403"),
            secret_url(base, "/hang"), refused, secret_url(base, "/redirect")]
    messages: list[str] = []
    with caplog.at_level(logging.DEBUG, logger="runstore.notify"):
        n = Notifier(urls, timeout=0.3, retries=1, backoff=0.01, on_warning=messages.append,
                     max_pending=1)
        names = [t.name for t in threading.enumerate() if t.name.startswith("runstore-notify")]
        n.notify(alert())
        n.notify(alert(run="second"))
        n.notify(alert(run="third"))  # overflows the hanging URL's queue: a "dropped" warning
        # 4 quick failures, then the hanging URL's: timed out twice (0.3 s each).
        assert wait_for(lambda: len([m for m in messages if "not sent" in m]) >= 5, 10)
        n.close(timeout=0.2)
        # The logger path (no on_warning) too.
        quiet = Notifier([secret_url(base, "/status/500")], retries=0)
        quiet.notify(alert())
        assert wait_for(lambda: any("not sent" in r.getMessage() for r in caplog.records))
        quiet.close(timeout=0)
    everything = messages + [r.getMessage() for r in caplog.records] + names
    assert any("dropped" in m for m in messages) and any("timed out" in m for m in messages)
    assert any("Connection refused" in m or "refused" in m.lower() for m in messages)
    for text in everything:
        for secret in SECRETS:
            assert secret not in text, text
    for bad in ("ftp://alice:hunter2@host/SECRETPATH", "http:///SECRETPATH?token=SECRETQ",
                "hunter2", "http://host:99999/SECRETPATH"):
        with pytest.raises(UsageError) as e:
            Notifier([bad])
        assert not any(s in str(e.value) for s in SECRETS), str(e.value)


@pytest.mark.parametrize("url, shown", [
    ("https://hooks.slack.com/services/T0/B0/XXXX", "https://hooks.slack.com/…"),
    ("https://u:p@chat.example.com:8065/hooks/abc", "https://chat.example.com:8065/…"),
    ("http://[::1]:9000/x?y=1", "http://[::1]:9000/…"),
    ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
    ("http://127.0.0.1:8080?t=1", "http://127.0.0.1:8080/…"),
    ("mailto:someone", "<a URL>"),
])
def test_redact(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_scrub_removes_every_part() -> None:
    url = "https://alice:hunter2@h.example/a/SECRETPATH?token=SECRETQ&b=2#SECRETF"
    text = f"error talking to {url} (path /a/SECRETPATH, token=SECRETQ, user alice)"
    cleaned = notify.scrub(text, url)
    assert not any(s in cleaned for s in SECRETS) and "h.example" not in cleaned.split("…")[0][:0]


def test_url_sources() -> None:
    a, b, c = "https://a.example/1", "https://b.example/2", "https://c.example/3"
    assert notify.urls([a], env=f"{b} {c}", config=[c]) == [c, a]  # --notify beats the env
    assert notify.urls([], env=f" {b}\n{c} ", config=[]) == [b, c]
    assert notify.urls([], env=None, config=[a, a]) == [a]
    assert notify.config_urls({"notify": a}, "f") == [a]
    assert notify.config_urls({}, "f") == []
    with pytest.raises(UsageError, match="f: check.notify is a list of webhook URLs"):
        notify.config_urls({"notify": [1]}, "f")
    with pytest.raises(UsageError, match="not an http"):
        notify.urls(["file:///etc/passwd"])


def test_runstore_check_posts_each_fired_row(server: tuple[str, Hook], awkward_tree: Path,
                                             tmp_path: Path) -> None:
    """`runstore check --notify URL` (its rows are DuckDB's plain rows, not Arrow) posts one
    JSON object per fired (run, rule), with the values the command prints."""
    from click.testing import CliRunner

    from runstore.cli import main

    base, hook = server
    store = runstore.open(tmp_path / "store")
    store.ingest([awkward_tree])
    rules = ["--rule", "optim/entropy < 0.3"]
    printed = CliRunner().invoke(main, ["--store", str(store.path), "check", *rules,
                                        "-F", "json"])
    assert printed.exit_code == 1, printed.output
    rows = json.loads(printed.stdout)
    assert len(rows) >= 2  # the KL rule and the entropy rule fire
    result = CliRunner().invoke(main, ["--store", str(store.path), "check", *rules,
                                       "--notify", base + "/ok/check", "-F", "csv"])
    assert result.exit_code == 1, result.output
    assert wait_for(lambda: len(hook.received("/ok/check")) == len(rows))
    posted = [strict(r["body"]) for r in hook.received("/ok/check")]
    key = ("run", "rule", "step", "last_step", "steps_over", "status")
    assert sorted(tuple(p[k] for k in key) for p in posted) == sorted(
        (r["run_name"], r["rule"], r["first_step"], r["last_step"], r["steps_over"], r["status"])
        for r in rows)


def test_retry_after_docstring_examples() -> None:
    import doctest

    from runstore.health import notify

    result = doctest.testmod(notify, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
