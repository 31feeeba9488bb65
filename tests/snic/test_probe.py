"""The sNIC death verdict: a switch that is gone is a death at once, one that is only silent (a loaded machine
misses a short HELLO deadline) is one only once the silence has lasted the confirm window. The probe is checked
against real sockets: a listener that says HELLO, one that closes, one that never answers, a closed port."""

from __future__ import annotations

import socket
import threading

import pytest

from nf_runtime.snic_client import Probe, death_verdict, probe_switch

HELLO = bytes([4, 0, 0, 8, 0, 0, 0, 1])  # OF1.3 HELLO, xid 1


@pytest.mark.parametrize(
    ("probe", "since", "now", "want"),
    [
        (Probe.UP, None, 10.0, (False, None)),
        (Probe.UP, 9.0, 10.0, (False, None)),  # an answer ends the silence
        (Probe.GONE, None, 10.0, (True, None)),  # refused/closed: at once
        (Probe.SILENT, None, 10.0, (False, 10.0)),  # the silence begins
        (Probe.SILENT, 9.8, 10.0, (False, 9.8)),  # not long enough yet
        (Probe.SILENT, 9.7, 10.0, (True, 9.7)),  # lasted the confirm window
    ],
)
def test_death_verdict(probe, since, now, want):
    assert death_verdict(probe, since, now, confirm_s=0.3) == want


@pytest.fixture
def listener():
    """A listening socket on 127.0.0.1 and a thread that treats each connection with `behaviour`."""
    made = []

    def start(behaviour):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        held = []

        def serve():
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                if behaviour == "hello":
                    conn.sendall(HELLO)
                    held.append(conn)
                elif behaviour == "close":
                    conn.close()
                elif behaviour == "other":
                    conn.sendall(b"HTTP/1.1")
                    held.append(conn)
                else:  # "mute": holds the connection, says nothing
                    held.append(conn)

        threading.Thread(target=serve, daemon=True).start()
        made.append((srv, held))
        return f"tcp:127.0.0.1:{srv.getsockname()[1]}"

    yield start
    for srv, held in made:
        srv.close()
        for c in held:
            c.close()


@pytest.mark.parametrize(
    ("behaviour", "want"),
    [("hello", Probe.UP), ("close", Probe.GONE), ("other", Probe.GONE), ("mute", Probe.SILENT)],
)
def test_probe_outcomes(listener, behaviour, want):
    assert probe_switch(listener(behaviour), 0.2)[0] is want


def test_probe_of_a_closed_port_is_gone():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: refused
    got, why = probe_switch(f"tcp:127.0.0.1:{port}", 0.2)
    assert got is Probe.GONE and "ConnectionRefused" in why
