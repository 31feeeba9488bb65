"""Versions of the `nf` binary an NF can run (live update): a directory of versioned binaries,
`DIR/VERSION/nf`, besides the runtime's default binary; each binary says what it is (`nf --version`), which
state record layouts it writes and reads (`nf --state-schema`) and whether it takes a config, also as a change
of the running one (`nf --check-config TYPE FILE [--running FILE]`). The agent asks the binary, so no NF's config schema is re-implemented here.

To add a version: build `nf` (e.g. `UNO_NF_VERSION=X cargo build --release -p nf`) and copy
`nfs/target/release/nf` to `DIR/X/nf` (`scripts/nf-version.sh X` does both).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from domain.errors import ValidationError

# Where versions live by default: nfs/versions/VERSION/nf next to the checkout's build.
DEFAULT_DIR = Path(__file__).resolve().parents[1] / "nfs" / "versions"
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
ASK_TIMEOUT_S = 10.0
# A config error of `nf` (`nf: config: SUBJECT: MESSAGE` or `SUBJECT must ...`): its subject is a path (`a`,
# `a.b`, `a[0].b`) or the whole config (`firewall config`); an unknown key is named in the message.
FIELD_RE = re.compile(
    r"^(?:[a-z0-9]+ config|(?P<path>[A-Za-z_]\w*(?:\[\d+\]|\.[A-Za-z_]\w*)*))"
    r"(?::| (?:must|is|needs|has|cannot|may|should) )"
)
UNKNOWN_RE = re.compile(r'unknown field "([^"]+)"')
# An `nf` before `--running`: its usage line names only TYPE FILE.
CHECK_USAGE_RE = re.compile(r"^nf: usage: nf --check-config TYPE FILE$", re.MULTILINE)


@dataclass(frozen=True)
class NfSchema:
    """What one `nf` binary is: its version, its local-state snapshot layout, and per NF type the record layout
    it writes and the layouts it reads."""

    version: str
    snapshot: int
    types: dict[str, tuple[int, tuple[int, ...]]]

    @classmethod
    def from_json(cls, data: dict) -> NfSchema:
        types = {t: (int(e["writes"]), tuple(int(r) for r in e["reads"])) for t, e in data["types"].items()}
        return cls(str(data["version"]), int(data["snapshot"]), types)

    def to_json(self) -> dict:
        return {
            "version": self.version,
            "snapshot": self.snapshot,
            "types": {t: {"writes": w, "reads": list(r)} for t, (w, r) in self.types.items()},
        }


class NfVersions:
    """The default binary and the versions in `directory` (which may not exist: then only the default)."""

    def __init__(self, directory: Path, default: Path):
        self.directory = directory
        self.default = default
        self._schemas: dict[str, NfSchema] = {}  # by binary path (a version's binary does not change)

    def schema(self, binary: str | Path) -> NfSchema:
        """`binary --state-schema`; OSError/ValueError when it cannot say (an `nf` before live updates)."""
        key = str(binary)
        if key not in self._schemas:
            out = subprocess.run(
                [key, "--state-schema"], capture_output=True, text=True, timeout=ASK_TIMEOUT_S
            )
            if out.returncode != 0:
                raise ValueError(f"{key} --state-schema: exit {out.returncode}: {out.stderr.strip()[-200:]}")
            try:
                self._schemas[key] = NfSchema.from_json(json.loads(out.stdout))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{key} --state-schema: unreadable answer ({exc})") from None
        return self._schemas[key]

    def listing(self) -> list[dict]:
        """Every version: {"version", "binary", "default", "schema"} (the default binary first); a binary that
        cannot say what it is is listed with an `error`."""
        rows = [(self.default, True)]
        if self.directory.is_dir():
            rows += [(d / "nf", False) for d in sorted(self.directory.iterdir()) if (d / "nf").is_file()]
        out = []
        for path, default in rows:
            row: dict = {"binary": str(path), "default": default}
            try:
                s = self.schema(path)
                row |= {"version": s.version, "schema": s.to_json()}
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                row |= {"version": None if default else path.parent.name, "error": str(exc)}
            out.append(row)
        return out

    def resolve(self, version: str | None, binary: str | None) -> tuple[Path, NfSchema]:
        """The binary of `version` (a directory entry, or the default binary's own version) or `binary` (an
        absolute path), with its schema. ValidationError names the field."""
        if binary is not None:
            path, fld = Path(binary), "binary"
            if not path.is_absolute() or not path.is_file():
                raise ValidationError(fld, f"{binary!r} is not an executable file given by its absolute path")
        else:
            fld = "version"
            if version is None or not VERSION_RE.match(version):
                raise ValidationError(fld, "must be 1-64 characters [A-Za-z0-9._+-]")
            path = self.directory / version / "nf"
            if not path.is_file():
                try:
                    default_version = self.schema(self.default).version
                except (OSError, ValueError, subprocess.SubprocessError):
                    default_version = None
                if version != default_version:
                    known = [r["version"] for r in self.listing() if r.get("version")]
                    raise ValidationError(fld, f"no version {version!r} (known: {', '.join(known)})")
                path = self.default
        try:
            return path, self.schema(path)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            raise ValidationError(fld, f"{path} cannot tell its state schema: {exc}") from None

    def check_config(
        self, binary: str | Path, nf_type: str, config: dict, running: dict | None = None
    ) -> float | None:
        """`binary --check-config TYPE FILE [--running FILE]`: ValidationError naming the config field it
        refused; with `running` (the config the NF runs now) also a change the state the NF keeps in the tier
        cannot take (e.g. the monitor's `counters` mode), as a change in place refuses it. An `nf` too old to
        judge a change checks the config alone. Accepted: the longest a state record of this config stays in
        the tier unwritten, in seconds (`record_lifetime_ms`), None when the binary does not say (an older
        `nf`, or records without an end)."""
        with tempfile.TemporaryDirectory(prefix="uno-check-") as d:
            new, cur = Path(d) / "config.json", Path(d) / "running.json"
            new.write_text(json.dumps(config))
            cmd = [str(binary), "--check-config", nf_type, str(new)]
            if running is not None:
                cur.write_text(json.dumps(running))
                out = _ask(binary, [*cmd, "--running", str(cur)])
                if out.returncode != 2 or not CHECK_USAGE_RE.search(out.stderr):
                    return _checked(out)
            return _checked(_ask(binary, cmd))


def _ask(binary: str | Path, cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=ASK_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ValidationError("config", f"{binary} cannot check it: {exc}") from None


def _checked(out: subprocess.CompletedProcess) -> float | None:
    if out.returncode == 0:
        return record_lifetime_s(out.stdout)
    raise config_error(out.stderr)


def record_lifetime_s(stdout: str) -> float | None:
    """`record_lifetime_ms` of an `nf --check-config` answer, in seconds (None: absent, null or unreadable)."""
    try:
        ms = json.loads(stdout).get("record_lifetime_ms")
    except (ValueError, AttributeError):
        return None
    return ms / 1000.0 if isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0 else None


def config_error(stderr: str) -> ValidationError:
    """The ValidationError of an `nf` config refusal (`nf: config: PATH MESSAGE`): field `config.PATH`."""
    line = next((ln for ln in reversed(stderr.strip().splitlines()) if ln.strip()), "refused (no message)")
    msg = line.split("nf: config: ", 1)[-1].split("nf: ", 1)[-1]
    parts = ["config"]
    m = FIELD_RE.match(msg)
    if m and m.group("path"):
        parts.append(m.group("path"))
    unknown = UNKNOWN_RE.search(msg) if m else None
    if unknown:
        parts.append(unknown.group(1))
    return ValidationError(".".join(parts), msg)
