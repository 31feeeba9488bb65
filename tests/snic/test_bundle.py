"""`uno snic bundle --out DIR` (pure, subprocesses): what is copied onto a DPU to run the sNIC agent there.

The bundle holds the agent's packages and nothing of the host's side, a launcher, a systemd unit, a config
that parse_config accepts (once its token_file points at the bundle's token), a fresh token (mode 600) and a
README; the agent starts from it alone (`python3 -m snic_agent --help` with PYTHONPATH=python/). A
non-empty DIR is refused with exit 2 and one line."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from nf_local.processes import NF_BINARY
from snic_agent.config import TOKEN_RE, parse_config

REPO = Path(__file__).resolve().parents[2]
AGENT_PACKAGES = {"snic_agent", "nf_local", "host_datapath", "snic_datapath", "restkit", "domain"}
HOST_SIDE = {"nf_agent", "nf_runtime", "emulated_host", "migration", "placement", "uno_cli", "demo",
             "testkit", "tests", "bench"}  # fmt: skip
FILES = {"python", "requirements.txt", "uno-snic-agent", "uno-snic-agent.service", "snic-agent.json",
         "snic-agent.token", "README.md"}  # fmt: skip


def cross_toolchain() -> bool:
    """The aarch64 cross linker and Rust target are here (scripts/setup.sh cross): the bundle builds `nf`."""
    if shutil.which("aarch64-linux-gnu-gcc") is None or shutil.which("rustup") is None:
        return False
    out = subprocess.run(["rustup", "target", "list", "--installed"], capture_output=True, text=True).stdout
    if "aarch64-unknown-linux-gnu" not in out.split():
        return False
    # ... and the cross C library (gcc-aarch64-linux-gnu only recommends it): without it nothing links
    libc = subprocess.run(
        ["aarch64-linux-gnu-gcc", "-print-file-name=Scrt1.o"], capture_output=True, text=True
    )
    return Path(libc.stdout.strip()).is_absolute()


def uno(
    *args: str, env: dict | None = None, cwd: Path = REPO, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "uno_cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)  # fmt: skip


def bare_python_env(bundle: Path) -> dict:
    """Python with the bundle's packages and the third-party ones (what `pip3 install -r requirements.txt`
    gives a DPU) but without this checkout: `-S` skips site-packages' .pth files (the checkout's editable
    install); the third-party directory is put on PYTHONPATH as a plain directory."""
    purelib = sysconfig.get_paths()["purelib"]
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": f"{bundle / 'python'}:{purelib}",
            "LANG": "C.UTF-8"}  # fmt: skip


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "out"
    # a cross build of nf for aarch64 (when the toolchain is here) takes minutes
    args = ["--snic", "snic3", "--listen", "192.0.2.9:7701", "--bridge", "br9"]
    p = uno("snic", "bundle", "--out", str(out), *args, timeout=1800)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(out)
    return out


def test_bundle_has_every_part(bundle):
    cross = cross_toolchain()
    assert {p.name for p in bundle.iterdir()} == FILES | ({"nf"} if cross else set())
    assert {p.name for p in (bundle / "python").iterdir()} == AGENT_PACKAGES
    launcher = bundle / "uno-snic-agent"
    assert launcher.stat().st_mode & stat.S_IXUSR
    assert "python3 -m snic_agent" in launcher.read_text()
    reqs = (bundle / "requirements.txt").read_text().split()
    assert {r.split(">")[0].split("=")[0] for r in reqs} == {"flask", "ovs", "ovsdbapp"}
    assert not list(bundle.rglob("__pycache__"))
    readme = (bundle / "README.md").read_text()
    if cross:  # cross-built for the DPU's Arm cores: an aarch64 ELF executable
        head = (bundle / "nf").read_bytes()[:20]
        assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 183  # EM_AARCH64
        assert (bundle / "nf").stat().st_mode & stat.S_IXUSR and "`nf` is included" in readme
    else:  # no cross toolchain: the README says so and how to build it
        assert not (bundle / "nf").exists()
        assert "`nf` is NOT included" in readme and "aarch64-unknown-linux-gnu" in readme
    assert "http://192.0.2.9:7701" in readme and "snic3" in readme and "br9" in readme


def test_unit_runs_the_launcher_and_stops_only_the_agent(bundle):
    unit = (bundle / "uno-snic-agent.service").read_text()
    lines = {ln.split("=", 1)[0]: ln.split("=", 1)[1] for ln in unit.splitlines() if "=" in ln}
    assert lines["ExecStart"].startswith("/opt/uno-snic/uno-snic-agent --config /etc/uno/snic-agent.json")
    assert lines["KillMode"] == "process"  # the NFs keep forwarding across the agent's restarts
    assert lines["Restart"] == "always"
    assert "[Install]" in unit and lines["WantedBy"] == "multi-user.target"


def test_token_is_fresh_and_private(bundle, tmp_path):
    tok = bundle / "snic-agent.token"
    assert stat.S_IMODE(tok.stat().st_mode) == 0o600
    token = tok.read_text().strip()
    assert TOKEN_RE.match(token) and len(token) >= 24
    other = tmp_path / "b2"
    assert uno("snic", "bundle", "--out", str(other)).returncode == 0
    assert (other / "snic-agent.token").read_text().strip() != token


def test_config_is_valid_once_its_token_file_is_the_bundles(bundle):
    data = json.loads((bundle / "snic-agent.json").read_text())
    assert data["token_file"] == "/etc/uno/snic-agent.token"  # where the README installs it
    cfg = parse_config({**data, "token_file": str(bundle / "snic-agent.token")})
    assert cfg.snic == "snic3" and cfg.listen == ("192.0.2.9", 7701) and cfg.bridge == "br9"
    assert cfg.token == (bundle / "snic-agent.token").read_text().strip()
    assert str(cfg.nf_binary) == "/opt/uno-snic/nf"


def test_no_host_side_package_and_no_import_of_one(bundle):
    top = {p.name for p in (bundle / "python").iterdir()}
    assert not top & HOST_SIDE
    bad = []
    for f in (bundle / "python").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            bad += [f"{f.relative_to(bundle)}: {n}" for n in names if n.split(".")[0] in HOST_SIDE]
    assert bad == []


CHECK_IMPORTS = """
import importlib, pathlib, sys
root = pathlib.Path(sys.argv[1])
mods = sorted(".".join(p.relative_to(root).with_suffix("").parts) for p in root.rglob("*.py"))
for m in mods:
    importlib.import_module(m.removesuffix(".__init__"))
ours = {"snic_agent", "nf_local", "host_datapath", "snic_datapath", "domain", "nf_agent", "nf_runtime",
        "emulated_host", "migration", "placement", "uno_cli", "demo", "testkit"}
outside = [f"{n}: {getattr(m, '__file__', None)}" for n, m in sys.modules.items()
           if n.split(".")[0] in ours and not str(getattr(m, "__file__", None) or
           list(getattr(m, "__path__", [""]))[0]).startswith(str(root))]
print(len(mods), "modules")
assert not outside, outside
"""


def test_every_module_of_the_bundle_imports_from_the_bundle_alone(bundle, tmp_path):
    p = subprocess.run([sys.executable, "-S", "-c", CHECK_IMPORTS, str(bundle / "python")], capture_output=True,
                       text=True, timeout=60, env=bare_python_env(bundle), cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]


def test_python3_m_snic_agent_help_with_the_bundle_on_pythonpath(bundle, tmp_path):
    p = subprocess.run([sys.executable, "-S", "-m", "snic_agent", "--help"], capture_output=True, text=True,
                       timeout=60, env=bare_python_env(bundle), cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "--config" in p.stdout and "uno-snic-agent" in p.stdout
    # ... and through the launcher (python3 of PATH: this venv's, with the bundle's packages first)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)
    p = subprocess.run([str(bundle / "uno-snic-agent"), "--help"], capture_output=True, text=True, timeout=60,
                       env=env, cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0 and "--config" in p.stdout, p.stderr


def test_the_bundled_agent_refuses_a_bad_config_in_one_line(bundle, tmp_path):
    conf = tmp_path / "c.json"
    conf.write_text(json.dumps({"snic": "snic0"}))
    p = subprocess.run([sys.executable, "-S", "-m", "snic_agent", "--config", str(conf)], capture_output=True,
                       text=True, timeout=60, env=bare_python_env(bundle), cwd=tmp_path)  # fmt: skip
    assert p.returncode == 2
    assert (
        p.stderr.strip() == "uno-snic-agent: error: config: listen: missing (ADDR:PORT on the management "
        "network (never 0.0.0.0))"
    )


def test_non_empty_out_is_refused_in_one_line(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    p = uno("snic", "bundle", "--out", str(out))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        f"uno snic: error: --out: {out} exists and is not an empty directory"
    ]
    assert p.stdout == ""
    assert [x.name for x in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "mine"


def test_empty_existing_out_is_used(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert uno("snic", "bundle", "--out", str(out), timeout=1800).returncode == 0
    assert {p.name for p in out.iterdir()} == FILES | ({"nf"} if cross_toolchain() else set())


@pytest.mark.skipif(
    os.uname().machine != "x86_64" or not NF_BINARY.exists(), reason="needs the x86_64 nf build"
)
def test_native_arch_bundles_the_built_nf(tmp_path):
    out = tmp_path / "native"
    p = uno("snic", "bundle", "--out", str(out), "--arch", "x86_64")
    assert p.returncode == 0, p.stderr
    nf = out / "nf"
    assert nf.stat().st_size == NF_BINARY.stat().st_size and nf.stat().st_mode & stat.S_IXUSR
    assert "`nf` is included" in (out / "README.md").read_text()


def test_unknown_arch_is_explained_in_the_readme(tmp_path):
    out = tmp_path / "mips"
    p = uno("snic", "bundle", "--out", str(out), "--arch", "mips")
    assert p.returncode == 0, p.stderr
    assert not (out / "nf").exists()
    assert "no Rust target known for 'mips'" in (out / "README.md").read_text()


# -- product bugs ---------------------------------------------------------------------------------------------------
def _one_line_or_complete(p: subprocess.CompletedProcess, out: Path) -> None:
    assert "Traceback" not in p.stderr, p.stderr[-1500:]
    if p.returncode == 0:
        assert {x.name for x in out.iterdir()} == FILES
    else:
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert not out.exists() or out.is_file() or not any(out.iterdir()), "a half-written bundle is left"


def test_bundle_without_rustup_on_path(tmp_path):
    """The bundle without `nf`, the README saying why (as for a missing cross
    linker), or one line and exit 2."""
    out = tmp_path / "b"
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(tmp_path)}
    p = uno("snic", "bundle", "--out", str(out), env=env)
    _one_line_or_complete(p, out)


def test_out_that_is_a_file_is_refused_in_one_line(tmp_path):
    """Exit 2, one line naming --out."""
    out = tmp_path / "a-file"
    out.write_text("x")
    p = uno("snic", "bundle", "--out", str(out))
    _one_line_or_complete(p, out)
    assert p.returncode == 2 and "--out" in p.stderr
    assert out.read_text() == "x"


@pytest.mark.parametrize(
    ("flag", "value"), [("--listen", "0.0.0.0:7700"), ("--listen", "dpu:7700"), ("--snic", "eth0")]
)
def test_bundle_refuses_values_its_own_agent_would_refuse(tmp_path, flag, value):
    """Exit 2, one line naming the
    option, nothing written."""
    out = tmp_path / "b"
    p = uno("snic", "bundle", "--out", str(out), flag, value)
    assert p.returncode == 2, f"accepted {flag} {value}: {p.stdout}"
    assert flag in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())
