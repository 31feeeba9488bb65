"""A config checked as a change of the running one (`nf --check-config TYPE FILE --running FILE`, the real nf
binary; fast, no root): what the state an NF keeps in the tier cannot take is refused naming the field, as the
running NF's `PUT /config` refuses it, so a rolling update (`POST /v1/nfs/ID/update` with a config, or a PATCH
that takes a roll) cannot bring it in. A binary before `--running` checks the config alone."""

from __future__ import annotations

import pytest

from domain.errors import ValidationError
from nf_local.processes import NF_BINARY
from nf_local.versions import DEFAULT_DIR, NfVersions

pytestmark = pytest.mark.skipif(not NF_BINARY.exists(), reason="nfs not built (setup.sh rust)")
VERSIONS = NfVersions(DEFAULT_DIR, NF_BINARY)
K = "000102030405060708090a0b0c0d0e0f"


def _ipsec(window: int) -> dict:
    sa = {"name": "a", "dir": "in", "spi": 4097, "key": K, "salt": "01020304", "tunnel_src": "203.0.113.1",
          "tunnel_dst": "203.0.113.2", "selectors": [{"src": "10.0.0.1/32", "dst": "10.0.0.2/32"}]}  # fmt: skip
    return {"sas": [sa], "replay_window": window}


REFUSED = [
    ("monitor", {}, {"counters": "increments"}, "config.counters"),
    ("monitor", {"counters": "increments"}, {"counters": "record", "batch_size": 16}, "config.counters"),
    ("ipsec", _ipsec(128), _ipsec(256), "config.replay_window"),
    ("ipsec", _ipsec(128), {**_ipsec(64), "batch_size": 16}, "config.replay_window"),
]


@pytest.mark.parametrize(("nf_type", "running", "new", "field"), REFUSED)
def test_a_change_the_state_cannot_take_is_refused_naming_the_field(nf_type, running, new, field):
    v = VERSIONS
    v.check_config(NF_BINARY, nf_type, new)  # valid on its own
    with pytest.raises(ValidationError) as e:
        v.check_config(NF_BINARY, nf_type, new, running=running)
    assert e.value.field == field, e.value


@pytest.mark.parametrize(
    ("nf_type", "running", "new"),
    [
        ("monitor", {}, {"idle_timeout_ms": 1000, "batch_size": 16}),
        ("monitor", {"counters": "increments"}, {"counters": "increments", "flush_ms": 50}),
        ("ipsec", _ipsec(128), {**_ipsec(128), "batch_size": 16}),
        ("firewall", {"default": "deny"}, {"default": "allow"}),
        ("nat", {"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"], "ports": "20000-20099"},
         {"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.2"], "ports": "20000-20099"}),
    ],
)  # fmt: skip
def test_a_change_the_state_can_take_passes(nf_type, running, new):
    assert VERSIONS.check_config(NF_BINARY, nf_type, new, running=running) is not None or nf_type == "ipsec"


def test_a_running_config_this_version_cannot_read_is_not_judged():
    """A config of another version's schema: the change is not judged, the new config alone is."""
    VERSIONS.check_config(NF_BINARY, "monitor", {"counters": "increments"}, running={"no_such_key": 1})


def test_the_config_itself_is_still_checked_first():
    with pytest.raises(ValidationError) as e:
        VERSIONS.check_config(NF_BINARY, "monitor", {"idle_timeout_ms": "x"}, running={})
    assert e.value.field == "config.idle_timeout_ms"


@pytest.mark.skipif(not (DEFAULT_DIR / "0.1.1" / "nf").is_file(), reason="nf version 0.1.1 not built")
def test_an_nf_before_running_checks_the_config_alone():
    old = DEFAULT_DIR / "0.1.1" / "nf"
    VERSIONS.check_config(old, "monitor", {"counters": "increments"}, running={})
    with pytest.raises(ValidationError) as e:
        VERSIONS.check_config(old, "monitor", {"idle_timeout_ms": "x"}, running={})
    assert e.value.field == "config.idle_timeout_ms"
