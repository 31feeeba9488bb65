"""Schemathesis against the REAL agent (`uno agent serve` on an emulated host with OneSwitch, Redis and real NF
processes), not only the fakes of test_schemathesis.py: every generated request, malformed bodies included,
is answered as the spec says and never with a 5xx. Examples are few per operation (each valid create starts
a real NF); what a run creates is deleted with the host."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis import checks  # noqa: E402

from testkit.agent_host import AGENT_E2E, agent_host  # noqa: E402

pytestmark = AGENT_E2E


@pytest.fixture(scope="module")
def live_schema(tmp_path_factory):
    with agent_host(tmp_path_factory.mktemp("st-live")) as (_host, _status, _agent, url):
        yield schemathesis.openapi.from_url(f"{url}/v1/openapi.json")


schema = schemathesis.pytest.from_fixture("live_schema")


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_real_agent_conforms_to_its_spec(case):
    # As in test_schemathesis.py: schema-valid bodies may still be refused (400) by checks the schema cannot
    # express (a chain vertex that does not exist, an sNIC this host lacks), so that one check is off.
    case.call_and_validate(excluded_checks=[checks.positive_data_acceptance])
