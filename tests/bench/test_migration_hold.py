"""The hold measure of bench/migration/hold.py (pure: the receiver's longest gap around a move)."""

from __future__ import annotations

from bench.migration.hold import longest_gap_ms


def test_longest_gap_is_taken_inside_the_window_only():
    ts = [0.0, 0.010, 0.020, 0.300, 0.310, 2.0]  # a 280 ms gap inside, a 1.69 s one after the window
    assert longest_gap_ms(ts, 0.0, 1.0) == 280.0
    assert longest_gap_ms(ts, 0.305, 1.0) is None  # one segment in the window: no gap to tell
    assert longest_gap_ms([], 0.0, 1.0) is None
