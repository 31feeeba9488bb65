"""Schemathesis helpers shared by the agent's contract tests (the fakes' and the live agent's)."""

from __future__ import annotations


def auth_headers(case, token: str) -> dict[str, str] | None:
    """The bearer token to send with a generated case, or None for a case generated with invalid headers
    (e.g. without the Authorization the spec requires): those go as generated, since adding the token made the
    request valid again and the negative-data check took the agent's 200 for accepting an invalid request
    (CI: GET /v1/events, whose query mutation, a one-element array for `since`, was also lost in serialization)."""
    from schemathesis.core.parameters import ParameterLocation

    negative = case.meta is not None and case.meta.is_negative_at(ParameterLocation.HEADER)
    return None if negative else {"Authorization": f"Bearer {token}"}
