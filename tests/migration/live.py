"""The marks of the live migration tests: root, the OneSwitch jar and the nf/traffic binaries built."""

from __future__ import annotations

import pytest

from migration.testbed import TRAFFIC
from nf_agent.agent.runtime import NF_BINARY
from nf_agent.emulated_host.oneswitch import jar_missing_reason
from tests.datapath.conftest import needs_root

LIVE_MARKS = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(bool(jar_missing_reason()), reason=jar_missing_reason() or ""),
    pytest.mark.skipif(
        not NF_BINARY.exists() or not TRAFFIC.exists(), reason="nfs not built (setup.sh rust)"
    ),
]
