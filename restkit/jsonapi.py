"""JSON responses, JSON errors and bearer tokens for a Flask REST edge.

Errors are `{"error": "...", "field"?: "..."}`. `install_errors` maps the domain's errors every edge shares
(400 invalid field, 404 unknown, 409 conflict) and turns any other HTTP error (405 with its Allow header,
413 ...) and any crash into the same JSON shape; each edge adds its own mappings on top.
"""

from __future__ import annotations

import hmac
import json
import logging

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from domain.errors import Conflict, NotFound, ValidationError


def json_response(obj, status: int = 200, headers: dict | None = None) -> Response:
    return Response(json.dumps(obj) + "\n", status=status, mimetype="application/json", headers=headers)


def error_response(
    status: int, message: str, fld: str | None = None, headers: dict | None = None
) -> Response:
    body = {"error": message, **({"field": fld} if fld is not None else {})}
    return json_response(body, status, headers)


# Deeper bodies are refused before any handler walks them: every body of the APIs is a few levels deep, and
# a handler's recursive walk (validation, dataclass copies) must never meet Python's recursion limit.
MAX_DEPTH = 32


def nesting_depth(obj, limit: int) -> int:
    """Depth of nested arrays/objects in `obj` (a scalar is 0), counted without recursion; stops counting once
    it exceeds `limit` (returns limit + 1)."""
    deepest, stack = 0, [(obj, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            if depth > limit:
                return limit + 1
            deepest = max(deepest, depth)
            stack.extend((child, depth) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def read_body(optional: bool = False):
    """The request's JSON body. Only a body with no bytes at all is absent ({} when `optional`); whitespace is
    a body, and not JSON: ValidationError("body") as for anything that does not parse or nests deeper than
    MAX_DEPTH."""
    raw = request.get_data(cache=False)
    if not raw:
        if optional:
            return {}
        raise ValidationError("body", "a JSON object is required")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValidationError("body", f"not valid JSON: {exc}") from None
    if nesting_depth(body, MAX_DEPTH) > MAX_DEPTH:
        raise ValidationError("body", f"nested deeper than {MAX_DEPTH} levels of arrays/objects")
    return body


def query_args(known: set[str] | frozenset[str]) -> dict[str, str]:
    """The request's query parameters as name -> value. An unknown name or a name given twice is a
    ValidationError naming it: a mistyped or repeated parameter must never silently mean something else
    (e.g. "everything", or whichever copy the framework happens to keep)."""
    for name in request.args:
        if name not in known:
            raise ValidationError(
                name, f"unknown query parameter (known: {', '.join(sorted(known)) or 'none'})"
            )
        if len(request.args.getlist(name)) > 1:
            raise ValidationError(name, "given more than once")
    return {name: request.args[name] for name in request.args}


def query_arg(name: str, default: str) -> str:
    """One query parameter's value (`default` when absent); given twice, a ValidationError naming it."""
    values = request.args.getlist(name)
    if len(values) > 1:
        raise ValidationError(name, "given more than once")
    return values[0] if values else default


def bearer_refused(token: str) -> Response | None:
    """A 401 unless the request carries `Authorization: Bearer TOKEN` (compared in constant time)."""
    got = request.headers.get("Authorization", "")
    if got.startswith("Bearer ") and hmac.compare_digest(got[7:].encode(), token.encode()):
        return None
    return error_response(
        401, "missing or wrong bearer token", "Authorization", {"WWW-Authenticate": "Bearer"}
    )


def install_errors(app: Flask, log: logging.Logger) -> None:
    """The error mappings every edge shares (see the module's doc)."""

    @app.errorhandler(ValidationError)
    def _bad(exc: ValidationError):
        return error_response(400, exc.message, exc.field)

    @app.errorhandler(Conflict)
    def _conflict(exc: Conflict):
        return error_response(409, exc.message, exc.field)

    @app.errorhandler(NotFound)
    def _missing(exc: NotFound):
        return error_response(404, str(exc))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):
        headers = {"Allow": ", ".join(exc.valid_methods)} if getattr(exc, "valid_methods", None) else None
        return error_response(exc.code or 500, exc.description or exc.name, headers=headers)

    @app.errorhandler(Exception)
    def _crash(exc: Exception):
        log.exception("unhandled error", extra={"fields": {"path": request.path}})
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")
