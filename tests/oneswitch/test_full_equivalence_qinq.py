"""The full check (testkit/oneswitch/fullcheck.py) with OneSwitch's `wire_vlans: 2`, where frames may come in QinQ:
the frames sent include ones arriving with 2 VLAN headers (derived where a rule needs one, and among the random
packets). Every accepted rule must then be exercised or proved unreachable: none is left to the `wire_vlans: 1`
known limit (test_full_equivalence.py), and no frame differs from the reference OVS.

UNO_FULL_SEEDS / UNO_FULL_RULES as in test_full_equivalence.py (the first seed is used here).
"""

from __future__ import annotations

import re

import pytest

from testkit.oneswitch import fullcheck

from .conftest import ONESWITCH, physical_errors
from .test_full_equivalence import N_RULES, SEEDS, _rules, host_and_reference

pytestmark = ONESWITCH


@pytest.fixture(scope="module")
def pair():
    with host_and_reference(oneswitch={"wire_vlans": 2}) as p:
        yield p


def test_every_accepted_rule_equivalent_with_qinq_from_the_wire(pair):
    host, client, check = pair
    seed = SEEDS[0]
    errors = physical_errors(client)
    res = fullcheck.check(_rules(seed, N_RULES), log=host.oneswitch().logfile, qinq=True, **check)
    s = res.summary()
    print(f"\nseed {seed}, wire_vlans 2: {s}")
    assert not res.differences, f"seed {seed}: {s}\n" + "\n".join(d.text() for d in res.differences[:10])
    assert not res.counter_mismatches, f"seed {seed}: {res.counter_mismatches[:10]}"
    assert physical_errors(client) == errors, f"seed {seed}: a physical switch refused a translation"
    assert s["exercised"] + s["unreachable"] == s["accepted"], s  # no rule left unexercised
    assert not res.unreached, f"seed {seed}: {res.unreached}"
    lost = res.flaky + res.stale
    assert lost <= max(3, res.frames // 100), f"seed {seed}: {lost} of {res.frames} frames lost once: {s}"
    for r in res.refused:  # every refusal is an OpenFlow error with OneSwitch's reason
        assert re.fullmatch(r"\d+/\d+", r["error"]) and r["reason"] != "?", r
