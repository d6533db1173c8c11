"""A fixture for tests that send SIGINT to real `runstore` processes."""

from __future__ import annotations

import signal
from typing import Any

import pytest


@pytest.fixture(scope="module", autouse=True)
def sigint_not_ignored() -> Any:
    """A suite started in the background (`cmd &` in a script) inherits SIGINT ignored, and an
    ignored SIGINT is rightly left ignored by runstore, as by any Unix program. These tests
    need it delivered: a Python handler here makes it the default again in every child."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if previous is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
