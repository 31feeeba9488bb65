"""Pure pieces of the state tier: CLUSTER NODES parsing, the NFs' URL, tenant rules and passwords, the NF's
tier options (password in a 0600 file, never on the command line), REST fields."""

from __future__ import annotations

import os

import pytest

from domain.errors import ValidationError
from nf_agent.validation import parse_nf, parse_vm
from nf_local.tier_access import TierAccess
from state_tier.access import Credentials, Topology
from state_tier.acl import tenant_password, tenant_rules
from state_tier.keys import nf_key, tenant_pattern
from state_tier.topology import parse_cluster_nodes

NODES = """\
07c3 10.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected
67ed 10.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922
292f 10.0.0.1:30003@40003 master - 0 1426238318243 3 connected 10923-16383
6ec2 10.0.0.1:30005@40005 slave 67ed 0 1426238316232 5 connected
824f 10.0.0.1:30006@40006 slave,fail 292f 0 1426238317741 6 disconnected
e7d1 10.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460
"""


def test_cluster_nodes_roles_failures_and_slots():
    nodes = parse_cluster_nodes(NODES)
    assert [(n.address, n.role) for n in nodes][:2] == [
        ("10.0.0.1:30001", "master"),
        ("10.0.0.1:30002", "master"),
    ]
    by = {n.address: n for n in nodes}
    assert by["10.0.0.1:30006"].failed and by["10.0.0.1:30006"].role == "replica"
    assert by["10.0.0.1:30004"].master == "e7d1"
    assert sum(n.slots for n in nodes) == 16384
    topo = Topology("cluster", tuple(nodes))
    assert topo.url() == "redis-cluster://10.0.0.1:30001,10.0.0.1:30002,10.0.0.1:30003"


def test_tenant_rules_and_passwords():
    rules = tenant_rules("acme", "pw")
    assert "~tn:acme:*" in rules and ">pw" in rules and "-@admin" in rules and "-@dangerous" in rules
    assert rules[0] == "reset" and tenant_pattern("acme") == "tn:acme:*"
    admin = Credentials(None, "admin-secret")
    assert tenant_password(admin, "acme") == tenant_password(Credentials("x", "admin-secret"), "acme")
    assert tenant_password(admin, "acme") != tenant_password(admin, "other")
    assert tenant_password(admin, "acme") != tenant_password(Credentials(None, "another"), "acme")
    assert nf_key("default", "lb", "backends") == "tn:default:nf:lb:{backends}"


def test_nf_options_password_in_a_private_file(tmp_path):
    pw = tmp_path / "i.pass"
    args = TierAccess("redis-cluster://a:1,b:2", "acme", "tn-acme", "secret", "1:50").args(pw)
    assert args == ["--store", "redis-cluster://a:1,b:2", "--tenant", "acme", "--store-user", "tn-acme",
                    "--store-password-file", str(pw), "--store-wait", "1:50"]  # fmt: skip
    assert "secret" not in " ".join(args)
    assert pw.read_text() == "secret" and oct(os.stat(pw).st_mode & 0o777) == "0o600"
    assert TierAccess("unix:///x").args(pw) == ["--store", "unix:///x"]


def test_rest_tenant_and_durability():
    req = parse_nf({"type": "firewall", "tenant": "acme", "durability": {"wait": 1}}, ["host"])
    assert (req.tenant, req.store_wait) == ("acme", "1")
    assert parse_nf({"type": "firewall", "durability": {"wait": "2:100"}}, ["host"]).store_wait == "2:100"
    assert parse_nf({"type": "firewall"}, ["host"]).tenant == "default"
    assert parse_vm({"id": "web", "tenant": "acme"}).tenant == "acme"
    for body, fld in [
        ({"type": "firewall", "tenant": "Acme"}, "tenant"),
        ({"type": "firewall", "tenant": "tn:x"}, "tenant"),
        ({"type": "firewall", "durability": {"wait": 0}}, "durability.wait"),
        ({"type": "firewall", "durability": {"wait": "1:99999"}}, "durability.wait"),
        ({"type": "firewall", "durability": {"wait": True}}, "durability.wait"),
        ({"type": "firewall", "durability": {"ack": 1}}, "durability.ack"),
    ]:
        with pytest.raises(ValidationError) as err:
            parse_nf(body, ["host"])
        assert err.value.field == fld, body
    with pytest.raises(ValidationError) as err:
        parse_vm({"id": "web", "tenant": ""})
    assert err.value.field == "tenant"
