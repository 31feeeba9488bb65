"""Domain errors: what went wrong, in the parts' own terms. The edges decide how to show one: the agent's REST
API maps each class to an HTTP status (nf_agent/api.py), the CLI prints a line and exits 2."""

from __future__ import annotations


class CliError(Exception):
    """An error meant for the operator: printed as one line, exit status 2, never a traceback."""


class ValidationError(ValueError):
    """A request field is invalid; `field` names it."""

    def __init__(self, fld: str, message: str):
        super().__init__(f"{fld}: {message}")
        self.field = fld
        self.message = message


class Conflict(Exception):
    """The request conflicts with the current state (an id in use, a budget it would break, ...)."""

    def __init__(self, message: str, fld: str | None = None):
        super().__init__(message)
        self.field = fld
        self.message = message


class NotSupported(Exception):
    """A documented limitation, failing closed: the request is valid, but this host cannot do it (yet)."""

    def __init__(self, message: str, fld: str | None = None):
        super().__init__(message)
        self.field = fld


class NotFound(Exception):
    """No such VM, NF, standby, ..."""


class OperationFailed(Exception):
    """A failure on our side (an NF did not start, the state could not be saved); the state is unchanged."""


class DependencyFailed(OperationFailed):
    """A part we depend on refused or did not answer (OneSwitch refused a port change, an NF instance did not
    come up); the state is unchanged."""


class TableRefused(Exception):
    """OneSwitch refused to move a virtual table (e.g. the sNIC cannot hold its rules); `reason` is its word.
    The table stays where it ran."""

    def __init__(self, table: str, reason: str):
        super().__init__(f"table {table}: {reason}")
        self.table, self.reason = table, reason


class TablesUnsupported(Exception):
    """This OneSwitch cannot place tables (no /v1/tables endpoint)."""


class PortMapError(Exception):
    """OneSwitch refused a port-map change or could not be reached."""


class ScaleUnsupported(PortMapError):
    """This OneSwitch cannot spread one virtual port over several physical ports (no instances endpoint)."""


class PrepareUnsupported(PortMapError):
    """This OneSwitch cannot install a remap's target ahead (no prepare endpoint): remap directly."""


# -- the NF runtime's contract: what starting, exporting or releasing an instance can fail with ----------
class StartError(Exception):
    """An NF instance could not be started (the message says why, with the end of its log)."""


class ConfigRejected(StartError):
    """The NF refused its configuration (exit 2 with `nf: config: FIELD: ...`): the caller's input, not a
    failure of the host."""


class StateError(Exception):
    """A state export/import or a release of a buffering NF failed (the message names the instance and the
    answer)."""


class RestartNeeded(Exception):
    """A running NF instance cannot take a config in place (a runtime option changes, or the NF cannot): it
    takes a restart with the config (a rolling update)."""
