"""The nf binaries an sNIC agent can start, besides its own (`nf_binary`): shipped by the host over the agent's
API for a live update (`PUT /v1/nf-versions/NAME?sha256=HEX`), kept in the agent's own directory
(`DIR/nf-versions/NAME/nf`), chosen per instance by the start request's `version`.

The sNIC is a separate machine: a binary reaches it only as the body of that call, checked against the
digest the host sent and run once (`nf --version`) before it is kept. A name is bound to one digest for good:
the same name with other bytes is a conflict, never an overwrite of a binary an instance may be running.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

from domain.errors import Conflict, NotFound, ValidationError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,79}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def _reported_version(binary: Path) -> str:
    """What `binary --version` says; ValidationError when it does not run as an nf binary here."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValidationError("body", f"does not run on this sNIC as an nf binary: {exc}") from None
    if out.returncode != 0 or not out.stdout.strip():
        why = (out.stderr or out.stdout).strip()[:200] or f"exit status {out.returncode}"
        raise ValidationError("body", f"does not run on this sNIC as an nf binary: {why}")
    return out.stdout.strip().splitlines()[0]


class NfVersionStore:
    """`directory`: where shipped binaries live (created on the first one)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._lock = threading.Lock()  # one put/delete at a time: they share the temporary directory

    def _dir(self, name: str) -> Path:
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise ValidationError(
                "version", "must be 1-80 characters [A-Za-z0-9._+-], starting with a letter or digit"
            )
        return self.directory / name

    def binary(self, name: str) -> Path:
        """The binary of version `name`; ValidationError (field `version`) when this sNIC does not hold it."""
        path = self._dir(name) / "nf"
        if not path.is_file():
            raise ValidationError("version", f"this sNIC holds no nf version {name!r} (ship it first)")
        return path

    def describe(self, name: str) -> dict:
        """{"version": name, "reports": its `--version`, "sha256", "size"}; NotFound when absent."""
        d = self._dir(name)
        try:
            meta = {k: (d / k).read_text().strip() for k in ("sha256", "reports")}
            size = (d / "nf").stat().st_size
        except FileNotFoundError:
            raise NotFound(f"no nf version {name!r} on this sNIC") from None
        return {"version": name, "reports": meta["reports"], "sha256": meta["sha256"], "size": size}

    def list(self) -> list[dict]:
        if not self.directory.is_dir():
            return []
        out = []
        for d in sorted(self.directory.iterdir()):
            with contextlib.suppress(NotFound, ValidationError):
                out.append(self.describe(d.name))
        return out

    def put(self, name: str, data: bytes, sha256: str) -> tuple[dict, bool]:
        """Keep `data` as version `name` once its digest is `sha256` and it runs (`--version`).

        Returns (its description, created). The same name with the same digest again: nothing changes
        (created False). ValidationError: bad name/digest, a digest mismatch, a body that is not an nf binary
        for this machine. Conflict: the name holds other bytes.
        """
        d = self._dir(name)
        with self._lock:
            return self._put(d, name, data, sha256)

    def _put(self, d: Path, name: str, data: bytes, sha256: str) -> tuple[dict, bool]:
        if not isinstance(sha256, str) or not SHA256_RE.fullmatch(sha256):
            raise ValidationError("sha256", "required: the body's SHA-256, 64 lowercase hex digits")
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ValidationError("sha256", "the body's SHA-256 is not this (a truncated or altered upload)")
        with contextlib.suppress(NotFound):
            have = self.describe(name)
            if have["sha256"] != sha256:
                raise Conflict(
                    f"nf version {name!r} is already another binary (sha256 {have['sha256']})", "version"
                )
            return have, False
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            binary = tmp / "nf"
            with binary.open("wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            binary.chmod(0o755)
            (tmp / "reports").write_text(_reported_version(binary) + "\n")
            (tmp / "sha256").write_text(sha256 + "\n")
            os.replace(tmp, d)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return self.describe(name), True

    def delete(self, name: str, in_use: list[str]) -> None:
        """Remove version `name`; Conflict while instances (`in_use`) run it, NotFound when absent."""
        with self._lock:
            self.describe(name)
            if in_use:
                raise Conflict(f"nf version {name!r} is run by {', '.join(sorted(in_use))}", "version")
            shutil.rmtree(self._dir(name))
