"""OVS-DPDK settings and port kinds (pure), and the hugepage bookkeeping against a fake sysfs."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.errors import ValidationError
from host_datapath import dpdk_ports, hugepages
from host_datapath.dpdk_options import DpdkOptions, default_pmd_mask, parse_cpu_mask, parse_pci_address
from host_datapath.hugepages import HugepageReservation
from host_datapath.ovs_dpdk import check_installed
from host_datapath.sysutil import DatapathError

CPUS = {0, 1}  # the machine the tests assume (CPU sets are passed in: the result does not depend on the host)


def field_of(exc: pytest.ExceptionInfo) -> str:
    return exc.value.field


def test_defaults_fill_in():
    o = DpdkOptions.parse(None, cpus=CPUS)
    assert o == DpdkOptions(512, "0x2", "512", ())
    assert o.pmd_cpus == [1] and o.hugepages == 256
    assert default_pmd_mask({0, 1, 2, 3}) == "0x8"


def test_other_config_and_eal_args():
    o = DpdkOptions.parse({"hugepages_mb": 256, "pmd_cpu_mask": "2", "socket_mem": 128}, cpus=CPUS)
    cfg = o.other_config("/run/x/hugepages", "uno-h")
    assert cfg == {
        "dpdk-init": "true",
        "dpdk-hugepage-dir": "/run/x/hugepages",
        "dpdk-socket-mem": "128",
        "dpdk-socket-limit": "128",
        "pmd-cpu-mask": "0x2",
        "dpdk-extra": "--file-prefix=uno-h --no-pci",
    }
    with_pci = DpdkOptions.parse({"pci": ["03:00.0", "0000:81:00.1"]}, cpus=CPUS)
    assert with_pci.pci == ("0000:03:00.0", "0000:81:00.1")
    assert with_pci.eal_extra("p") == ["--file-prefix=p", "-a", "0000:03:00.0", "-a", "0000:81:00.1"]


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"hugepages_mb": 3}, "host.switch.dpdk.hugepages_mb", "even number"),
        ({"hugepages_mb": 0}, "host.switch.dpdk.hugepages_mb", "even number"),
        ({"hugepages_mb": "512"}, "host.switch.dpdk.hugepages_mb", "integer"),
        ({"hugepages_mb": True}, "host.switch.dpdk.hugepages_mb", "integer"),
        ({"pmd_cpu_mask": "0x0"}, "host.switch.dpdk.pmd_cpu_mask", "no CPU"),
        ({"pmd_cpu_mask": "0x4"}, "host.switch.dpdk.pmd_cpu_mask", "CPU 2 is not"),
        ({"pmd_cpu_mask": "0x3"}, "host.switch.dpdk.pmd_cpu_mask", "every CPU"),
        ({"pmd_cpu_mask": "cores 1"}, "host.switch.dpdk.pmd_cpu_mask", "hex CPU mask"),
        ({"pmd_cpu_mask": 2}, "host.switch.dpdk.pmd_cpu_mask", "hex CPU mask"),
        ({"socket_mem": "1024"}, "host.switch.dpdk.socket_mem", "more than hugepages_mb"),
        ({"socket_mem": "256,512"}, "host.switch.dpdk.socket_mem", "more than hugepages_mb"),
        ({"socket_mem": "0,0"}, "host.switch.dpdk.socket_mem", "no memory"),
        ({"socket_mem": "lots"}, "host.switch.dpdk.socket_mem", "MB per NUMA node"),
        ({"pci": "0000:03:00.0"}, "host.switch.dpdk.pci", "list"),
        ({"pci": ["03:00"]}, "host.switch.dpdk.pci[0]", "not a PCI address"),
        ({"pci": ["0000:03:00.0", "03:00.0"]}, "host.switch.dpdk.pci", "twice"),
        ({"hugepages": 512}, "host.switch.dpdk.hugepages", "unknown key"),
    ],
)
def test_each_field_is_checked_and_named(data, field, words):
    with pytest.raises(ValidationError) as exc:
        DpdkOptions.parse(data, cpus=CPUS)
    assert field_of(exc) == field
    assert words in str(exc.value)


def test_not_a_mapping_and_custom_where():
    with pytest.raises(ValidationError) as exc:
        DpdkOptions.parse(["x"], cpus=CPUS)
    assert field_of(exc) == "host.switch.dpdk"
    with pytest.raises(ValidationError) as exc:
        DpdkOptions.parse({"hugepages_mb": 1}, where="dpdk", cpus=CPUS)
    assert field_of(exc) == "dpdk.hugepages_mb"


def test_cpu_mask_on_a_bigger_machine():
    assert parse_cpu_mask("0xc", cpus=set(range(8))) == {2, 3}
    assert DpdkOptions.parse({"pmd_cpu_mask": "0xC"}, cpus=set(range(8))).pmd_cpu_mask == "0xc"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("0000:03:00.0", "0000:03:00.0"), ("03:00.1", "0000:03:00.1"), ("ABCD:Ef:1f.7", "abcd:ef:1f.7")],
)
def test_pci_address_canonical(text, canonical):
    assert parse_pci_address(text) == canonical


@pytest.mark.parametrize("text", ["", "03:00", "0000:03:20.0", "0000:03:00.8", "000:03:00.0", "x", None, 3])
def test_pci_address_refused(text):
    with pytest.raises(ValidationError):
        parse_pci_address(text)


def test_port_kinds():
    afp = dpdk_ports.af_packet("uno-v0p")
    assert afp.type == "dpdk" and afp.mtu is None
    assert afp.options == {"dpdk-devargs": "net_af_packet_uno-v0p,iface=uno-v0p,qpairs=1,qdisc_bypass=1"}
    assert "qdisc_bypass=0" in dpdk_ports.af_packet("p", "eth9", qdisc_bypass=False).options["dpdk-devargs"]
    assert dpdk_ports.tap("tp0", pmd_threads=2).options == {
        "dpdk-devargs": "net_tap_tp0,iface=tp0",
        "n_rxq": "3",
    }
    vh = dpdk_ports.vhost_user_client("/run/vm/vm0.sock")
    assert (vh.type, vh.options) == ("dpdkvhostuserclient", {"vhost-server-path": "/run/vm/vm0.sock"})
    assert dpdk_ports.pci("81:00.0").options == {"dpdk-devargs": "0000:81:00.0"}
    for bad in ("", "a" * 16, "a,b"):
        with pytest.raises(ValidationError):
            dpdk_ports.af_packet(bad)
    for bad in ("relative.sock", "/" + "x" * 107, "/a,b"):
        with pytest.raises(ValidationError):
            dpdk_ports.vhost_user_client(bad)


def test_vm_port_config():
    assert dpdk_ports.parse_vm_port(None) == dpdk_ports.VmPort()
    assert dpdk_ports.parse_vm_port({"type": "veth"}).iface() is None
    vm = dpdk_ports.parse_vm_port({"type": "vhostuser", "socket": "/run/vm0.sock"}, "vms[0].port")
    assert vm.iface() == dpdk_ports.vhost_user_client("/run/vm0.sock")
    cases = [
        ({"type": "sriov"}, "vms[0].port.type"),
        ({"type": "vhostuser"}, "vms[0].port.socket"),
        ({"type": "vhostuser", "socket": "vm.sock"}, "vms[0].port.socket"),
        ({"type": "veth", "socket": "/x"}, "vms[0].port.socket"),
        ("vhostuser", "vms[0].port"),
    ]
    for data, fld in cases:
        with pytest.raises(ValidationError) as exc:
            dpdk_ports.parse_vm_port(data, "vms[0].port")
        assert field_of(exc) == fld, data


def test_missing_packages_are_named(tmp_path):
    with pytest.raises(DatapathError, match="openvswitch-switch-dpdk"):
        check_installed(str(tmp_path / "nope"))
    pmds = tmp_path / "lib" / "dpdk" / "pmds-23.0"
    pmds.mkdir(parents=True)
    (pmds / "librte_mempool_ring.so.23").touch()
    binary = tmp_path / "vswitchd"
    binary.touch()
    with pytest.raises(DatapathError) as exc:
        check_installed(str(binary), str(tmp_path / "lib" / "dpdk" / "pmds-*"))
    assert "librte-net-af-packet23" in str(exc.value) and "librte-mempool-ring23" not in str(exc.value)


# -- hugepages against a fake sysfs: the counting, without the kernel ---------------------------------------
class FakeSysfs:
    """nr_hugepages/free_hugepages files; a write of nr_hugepages is granted up to `limit` pages in all."""

    def __init__(self, root: Path, nr: int, free: int, limit: int = 10_000):
        self.root, self.limit, self.used = root, limit, nr - free
        root.mkdir(parents=True, exist_ok=True)
        self._set(nr)

    def _set(self, nr: int) -> None:
        (self.root / "nr_hugepages").write_text(f"{nr}\n")
        (self.root / "free_hugepages").write_text(f"{nr - self.used}\n")

    def nr(self) -> int:
        return int((self.root / "nr_hugepages").read_text())


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Writes to nr_hugepages go through FakeSysfs's limit; mounting is recorded, not done."""
    mounts: list[str] = []
    sysfs: dict[str, FakeSysfs] = {}
    real_write = hugepages.write_count

    def write_count(path: Path, pages: int) -> int:
        fs = sysfs["fs"]
        real_write(path, min(pages, fs.limit))
        fs._set(fs.nr())
        return fs.nr()

    def run(cmd, **_kw):
        mounts.append(" ".join(cmd))
        return ""

    monkeypatch.setattr(hugepages, "write_count", write_count)
    monkeypatch.setattr(hugepages, "run", run)
    monkeypatch.setattr(
        hugepages, "is_mount", lambda p: any(str(p) in m and m.startswith("mount") for m in mounts)
    )

    def make(nr: int, free: int, limit: int = 10_000) -> tuple[FakeSysfs, HugepageReservation]:
        sysfs["fs"] = FakeSysfs(tmp_path / "sys", nr, free, limit)
        return sysfs["fs"], HugepageReservation(
            tmp_path / "run" / "hp.json", tmp_path / "run" / "hp", tmp_path / "sys"
        )

    make.mounts = mounts  # type: ignore[attr-defined]
    return make


def test_reserve_adds_only_the_shortfall_and_gives_it_back(fake):
    fs, res = fake(nr=10, free=4)  # 6 pages used by someone else, 4 free
    res.acquire(128)
    assert fs.nr() == 10 + 124
    assert res.state()["added"] == 124 and res.state()["mounted"]
    assert fake.mounts == [f"mount -t hugetlbfs -o pagesize=2M,mode=0700 nodev {res.mount_dir}"]
    res.acquire(128)  # idempotent
    assert fs.nr() == 134 and len(fake.mounts) == 1
    res.release()
    assert fs.nr() == 10 and res.state() is None
    res.release()  # idempotent
    assert fs.nr() == 10


def test_enough_free_pages_adds_none(fake):
    fs, res = fake(nr=1024, free=1024)  # reserved at boot by the operator
    res.acquire(256)
    assert res.state()["added"] == 0
    res.release()
    assert fs.nr() == 1024


def test_kernel_short_of_pages_is_one_clear_error_and_nothing_kept(fake):
    fs, res = fake(nr=0, free=0, limit=50)
    with pytest.raises(DatapathError) as exc:
        res.acquire(128)
    msg = str(exc.value)
    assert "gave only 50 of the 128" in msg and "hugepages_mb" in msg and "hugepages=N" in msg
    assert fs.nr() == 0 and res.state() is None and fake.mounts == []


def test_release_after_a_crash_uses_the_state_file(fake):
    fs, res = fake(nr=0, free=0)
    res.acquire(64)
    again = HugepageReservation(res.state_file, Path("/elsewhere"), res.sysfs)  # a later process
    again.release()
    assert fs.nr() == 0 and not res.state_file.exists()


def test_recorded_options_round_trip_without_revalidation():
    o = DpdkOptions.parse({"hugepages_mb": 256, "pmd_cpu_mask": "0x2", "pci": ["03:00.1"]}, cpus=CPUS)
    assert DpdkOptions.from_dict(o.as_dict()) == o
    # a switch recorded with CPU 7 is still stopped with its options on a machine without it
    assert DpdkOptions.from_dict({**o.as_dict(), "pmd_cpu_mask": "0x80"}).pmd_cpus == [7]


def test_the_host_switch_config_records_its_dpdk_options():
    from emulated_host.switch_config import HostSwitchConfig, parse_host_switch

    sw = parse_host_switch({"switch": {"dpdk": {"hugepages_mb": 128}}}, cpus=CPUS)
    assert sw.dpdk == DpdkOptions(128, "0x2", "128", ())
    assert HostSwitchConfig.from_dict(sw.as_dict()) == sw
    assert HostSwitchConfig.from_dict({"mode": "managed"}).dpdk is None  # recorded before the key existed


@pytest.mark.parametrize(
    ("pages", "free", "avail_mb", "ok"),
    [
        (128, 128, 0, True),
        (128, 0, 512, True),
        (128, 0, 510, False),
        (128, 64, 256, True),
        (128, 64, 255, False),
    ],
)
def test_memory_shortfall_is_named_by_key(pages, free, avail_mb, ok):
    problem = hugepages.shortfall_problem(pages, free, avail_mb)
    assert (problem is None) == ok
    if not ok:
        assert problem.startswith("config: host.switch.dpdk.hugepages_mb: ")
