"""Polling in tests: `sysutil.wait_for` failing the test (AssertionError) on timeout."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from host_datapath.sysutil import wait_for

T = TypeVar("T")


def wait(
    pred: Callable[[], T], timeout: float = 10.0, what: str = "the condition", interval: float = 0.05
) -> T:
    """Poll `pred` until it returns a true value and return that; AssertionError naming `what` on timeout."""
    return wait_for(pred, timeout, what, interval=interval, error=AssertionError)
