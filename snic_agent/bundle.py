"""`uno snic bundle --out DIR`: what to copy onto a DPU (a BlueField's Arm Linux) to run the sNIC agent there.

The bundle holds the agent's Python packages (it needs flask, ovs and ovsdbapp on the DPU, nothing of the host
side), a launcher, a systemd unit, a config to fill in, a fresh token (the host needs a copy), the `nf` binary
when one was built for the DPU's architecture, and the instructions."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from domain.errors import CliError
from snic_agent.config import parse_value

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("snic_agent", "nf_local", "host_datapath", "snic_datapath", "restkit", "domain")
REQUIREMENTS = ("flask>=3.0", "ovs>=3.1", "ovsdbapp>=2.4")
RUST_TARGETS = {"aarch64": "aarch64-unknown-linux-gnu", "x86_64": "x86_64-unknown-linux-gnu"}

UNIT = """[Unit]
Description=UNO sNIC agent: NF instances on this DPU, for the host's UNO agent
After=network-online.target openvswitch-switch.service
Wants=network-online.target

[Service]
# The agent's bridge ports live in the DPU's root network namespace: give it a name the agent can use.
ExecStartPre=-/sbin/ip netns attach uno-dpu 1
ExecStart=/opt/uno-snic/uno-snic-agent --config /etc/uno/snic-agent.json
# Only the agent is stopped or restarted: its NFs keep forwarding, and the restarted agent adopts them.
KillMode=process
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target
"""

LAUNCHER = """#!/bin/sh
# The sNIC agent from this bundle's packages (python3 with flask, ovs, ovsdbapp: see requirements.txt).
here="$(cd "$(dirname "$0")" && pwd)"
PYTHONPATH="$here/python" exec python3 -m snic_agent "$@"
"""


def _nf_binary(arch: str) -> tuple[Path | None, str]:
    """The `nf` binary for `arch`: built with cargo when the Rust target and a linker for it are here."""
    target = RUST_TARGETS.get(arch)
    if target is None:
        return None, f"no Rust target known for {arch!r} ({', '.join(RUST_TARGETS)})"
    native = subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.strip()
    if arch == native:
        built = REPO_ROOT / "nfs" / "target" / "release" / "nf"
        return (built, "the host's build (same architecture)") if built.exists() else (None, "not built")
    linker = shutil.which(f"{arch}-linux-gnu-gcc")
    if shutil.which("rustup") is None or shutil.which("cargo") is None or linker is None:
        return None, f"no cross toolchain here (rustup target {target} and {arch}-linux-gnu-gcc)"
    installed = subprocess.run(["rustup", "target", "list", "--installed"], capture_output=True, text=True)
    if target not in installed.stdout:
        return None, f"no cross toolchain here (rustup target {target} and {arch}-linux-gnu-gcc)"
    if not _has_cross_libc(linker):
        # The cross gcc without its C library links nothing (Debian: libc6-dev-<arch>-cross, only recommended)
        return None, f"no C library for the {arch}-linux-gnu-gcc linker here (Debian: libc6-dev-arm64-cross)"
    env_key = f"CARGO_TARGET_{target.upper().replace('-', '_')}_LINKER"
    print(f"uno snic bundle: building nf for {target} with cargo (minutes the first time)", file=sys.stderr,
          flush=True)  # fmt: skip
    proc = subprocess.run(
        ["cargo", "build", "-q", "--release", "--target", target, "-p", "nf"],
        cwd=REPO_ROOT / "nfs", capture_output=True, text=True, env={**os.environ, env_key: linker},
    )  # fmt: skip
    if proc.returncode != 0:
        return None, f"cross build failed: {proc.stderr.strip()[-300:]}"
    return REPO_ROOT / "nfs" / "target" / target / "release" / "nf", f"cross-built for {target}"


def _has_cross_libc(linker: str) -> bool:
    """Whether the cross linker finds its C library's start file (gcc prints the bare name when not)."""
    found = subprocess.run(
        [linker, "-print-file-name=Scrt1.o"], capture_output=True, text=True
    ).stdout.strip()
    return os.path.isabs(found)


def write_bundle(out: str | Path, snic: str, listen: str, bridge: str, arch: str) -> Path:
    """Write the bundle to `out` (a new or empty directory), whole or not at all."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CliError(f"--out: {out} exists and is not an empty directory")
    _check_options(snic, listen, bridge)
    work = Path(tempfile.mkdtemp(prefix=".uno-bundle-", dir=out.parent if out.parent.exists() else None))
    try:
        _write(work, snic, listen, bridge, arch)
        if out.exists():
            out.rmdir()
        shutil.move(str(work), str(out))
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out


def _check_options(snic: str, listen: str, bridge: str) -> None:
    """The options end up in the agent's config: checked as the agent will check them."""
    for opt, value, check in (("--snic", snic, "snic"), ("--listen", listen, "listen")):
        try:
            parse_value(check, value)
        except CliError as exc:
            raise CliError(f"{opt}: {str(exc).removeprefix(f'config: {check}: ')}") from None
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", bridge):
        raise CliError(f"--bridge: expected an OVS bridge name, got {bridge!r}")


def _write(out: Path, snic: str, listen: str, bridge: str, arch: str) -> None:
    (out / "python").mkdir(parents=True, exist_ok=True)
    for pkg in PACKAGES:
        shutil.copytree(REPO_ROOT / pkg, out / "python" / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (out / "requirements.txt").write_text("\n".join(REQUIREMENTS) + "\n")
    launcher = out / "uno-snic-agent"
    launcher.write_text(LAUNCHER)
    launcher.chmod(0o755)
    (out / "uno-snic-agent.service").write_text(UNIT)
    fd = os.open(
        out / "snic-agent.token", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600
    )  # never readable by others
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(24) + "\n")
    nf, how = _nf_binary(arch)
    if nf is not None:
        shutil.copy2(nf, out / "nf")
    config = {
        "snic": snic, "listen": listen, "token_file": "/etc/uno/snic-agent.token", "dir": "/var/lib/uno-snic",
        "prefix": "uno", "bridge": bridge, "ovsdb": "unix:/var/run/openvswitch/db.sock",
        "switch_netns": "uno-dpu", "nf_binary": "/opt/uno-snic/nf", "cgroup": "uno-snic-nfs",
        "warm_slots": 1,
    }  # fmt: skip
    (out / "snic-agent.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "README.md").write_text(_readme(snic, listen, bridge, arch, nf is not None, how))


def _readme(snic: str, listen: str, bridge: str, arch: str, has_nf: bool, how: str) -> str:
    addr = listen.rpartition(":")[0]
    nf_line = (
        f"`nf` is included ({how})."
        if has_nf
        else f"`nf` is NOT included ({how}). Build it for {arch} on a machine with the target: `rustup target "
        f"add {RUST_TARGETS.get(arch, '<target>')}`, a `{arch}-linux-gnu-gcc` linker, then `cargo build "
        f"--release --target {RUST_TARGETS.get(arch, '<target>')} -p nf` in `nfs/` (or build natively on the "
        "DPU: `cargo build --release -p nf`), and copy it to /opt/uno-snic/nf."
    )
    return f"""# UNO sNIC agent for a DPU ({snic})

The sNIC agent runs on the DPU and starts the NFs the host's UNO agent places there, each on its own veth
plugged into the DPU's OVS bridge `{bridge}`, in the DPU's network namespace (they reach the host's state tier
over the management network) and in the CPU cgroup `uno-snic-nfs`. The host reaches it
only at `http://{listen}` with the bearer token in `snic-agent.token`.

{nf_line}

## Install (on the DPU, as root)

1. `apt-get install python3 python3-pip openvswitch-switch` (the DPU's OVS is usually there already), then
   `pip3 install -r requirements.txt`.
2. `mkdir -p /opt/uno-snic /etc/uno && cp -r python uno-snic-agent nf /opt/uno-snic/` (without `nf` if it is
   not in this bundle: see above).
3. `cp snic-agent.json /etc/uno/ && install -m 600 snic-agent.token /etc/uno/`; edit
   `/etc/uno/snic-agent.json`: `listen` is the DPU's management address ({addr}: never 0.0.0.0), `bridge` the
   OVS bridge whose ports face the host (the host representor, e.g. `pf0hpf`) and the wire (`p0`, `p1`);
   set `pcie_port` / `wire_ports` when they are named otherwise.
4. `cp uno-snic-agent.service /etc/systemd/system/ && systemctl daemon-reload && systemctl enable --now
   uno-snic-agent`. Check: `curl -s -H "Authorization: Bearer $(cat /etc/uno/snic-agent.token)"
   http://{listen}/v1/health`.

The unit stops only the agent (`KillMode=process`): NFs keep forwarding across its restarts and a new agent
adopts them. On the DPU's reboot they are gone; the host fails them over and re-places later.

## Register the DPU on the host

In the host's UNO config (docs/config.md):

```yaml
snics:
  - id: {snic}
    backend: bluefield
    ovsdb: tcp:{addr}:6640          # the DPU's OVSDB and the bridge's OpenFlow listener, for OneSwitch
    openflow: tcp:{addr}:6653
    bridge: {bridge}
    agent: http://{listen}
    agent_token_file: /etc/uno/{snic}-agent.token   # a copy of snic-agent.token, mode 600
    host_address: <the host's address the DPU reaches>  # Redis listens there; the DPU's NFs use it
```
"""
