"""`ofproto/trace` of a frame on a bridge, through one persistent unixctl connection to its ovs-vswitchd (the
python `ovs` package; no ovs-appctl process per trace: ~2,000 traces/s here). It tells which OpenFlow rules a
frame entering at a port takes, table by table (groups and goto_table included), by their cookies.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

# " 1. ip,metadata=0x1/0xff, priority 59988, cookie 0x38" (indented deeper inside groups/resubmits)
_RULE = re.compile(r"^\s*\d+\. .*\bpriority \d+(?:, cookie (0x[0-9a-f]+))?\s*$")


class Unixctl:
    """One persistent unixctl connection to an ovs-vswitchd."""

    def __init__(self, ctl: Path):
        with warnings.catch_warnings():  # the package's optional eventlet support warns on import
            warnings.simplefilter("ignore")
            import ovs.unixctl.client

        err, self._client = ovs.unixctl.client.UnixctlClient.create(str(ctl))
        if err:
            raise OSError(err, f"unixctl {ctl}")

    def transact(self, command: str, *args: str) -> str:
        """The command's answer. ovs-vswitchd 3.1 hands some answers back in the reply's error member (python
        ovs 4.0): callers judge the text."""
        err, reply_error, result = self._client.transact(command, list(args))
        if err:
            raise OSError(err, f"{command}: no answer")
        return result if result is not None else reply_error or ""

    def purge(self) -> None:
        """Drops every datapath flow (the cache of the OpenFlow tables: `revalidator/purge`)."""
        self.transact("revalidator/purge")

    def close(self) -> None:
        self._client.close()


class Tracer(Unixctl):
    def __init__(self, ctl: Path, bridge: str):
        super().__init__(ctl)
        self.bridge = bridge

    def trace(self, in_port: int, frame: bytes) -> str:
        text = self.transact("ofproto/trace", self.bridge, f"in_port={in_port}", frame.hex())
        if "Datapath actions:" not in text:  # a complete trace ends with them
            raise OSError(0, f"ofproto/trace: {text or 'no answer'}")
        return text

    def cookies(self, in_port: int, frame: bytes) -> list[int]:
        """Cookies of the rules the frame takes, in the order the trace lists them (0 for a rule without)."""
        return [int(m.group(1) or "0", 16) for line in self.trace(in_port, frame).splitlines()
                if (m := _RULE.match(line))]  # fmt: skip
