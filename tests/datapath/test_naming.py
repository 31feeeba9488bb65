"""Names derived from the instance name: unique per host, within Linux limits, found again by `uno down`."""

from emulated_host import naming as nm


def test_owned_namespaces_are_exactly_the_prefixed_ones():
    existing = ["t1-host", "t1-snic0", "t1-vm3", "t1-o00", "t1-nf7", "t1x-host", "t1", "xt1-host", "t12-vm0"]
    assert nm.owned_namespaces("t1", existing) == ["t1-host", "t1-snic0", "t1-vm3", "t1-o00", "t1-nf7"]


def test_longest_names_fit_interface_limit():
    n = "abcdef"  # 6 characters, the longest valid name
    assert nm.valid_name(n) and not nm.valid_name("abcdefg") and not nm.valid_name("1ab")
    names = [
        *nm.if_vm(n, 31),
        *nm.if_pcie(n, 7),
        *nm.if_eth(n, 7, 7),
        nm.bridge_host(n),
        nm.bridge_snic(n, 7),
    ]
    assert all(len(x) <= 15 for x in names), names
