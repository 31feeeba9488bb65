"""OneSwitch that cannot start (jar missing, or it exits at once) fails `up` with a one-line reason, and the
half-built host is rolled back without leftovers. Runs without the jar (real host, real processes)."""

from __future__ import annotations

import pytest

from emulated_host import oneswitch
from host_datapath.sysutil import DatapathError
from testkit.hosts import EMPTY, machine_snapshot, needs_root, unique_name

from .conftest import bring_up

pytestmark = [pytest.mark.root, needs_root]


def test_missing_jar_fails_up_and_leaves_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(oneswitch, "JAR", tmp_path / "nope.jar")
    with pytest.raises(DatapathError) as exc:
        bring_up(vms=1, name=(name := unique_name()))
    assert "not built" in str(exc.value) and "scripts/setup.sh java" in str(exc.value)
    assert machine_snapshot(name) == EMPTY


def test_oneswitch_exiting_at_start_fails_up_with_its_log(monkeypatch, tmp_path):
    bad = tmp_path / "bad.jar"
    bad.write_bytes(b"not a jar")  # java exits at once: "Invalid or corrupt jarfile"
    monkeypatch.setattr(oneswitch, "JAR", bad)
    with pytest.raises(DatapathError) as exc:
        bring_up(vms=1, name=(name := unique_name()))
    assert "OneSwitch exited" in str(exc.value) and "jarfile" in str(exc.value), str(exc.value)
    assert machine_snapshot(name) == EMPTY
