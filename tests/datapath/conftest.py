"""Fixtures for tests on a real emulated host: nothing left behind even when a test fails."""

from __future__ import annotations

import pytest

from emulated_host.host import EmulatedHost
from testkit.hosts import EMPTY, machine_snapshot, make_host


@pytest.fixture
def host_factory():
    """Build emulated hosts; every one is torn down (and checked) at the end, pass or fail."""
    made: list[EmulatedHost] = []

    def factory(**overrides) -> EmulatedHost:
        h = make_host(**overrides)
        made.append(h)
        return h

    yield factory
    for h in made:
        h.down()
        assert machine_snapshot(h.name) == EMPTY
