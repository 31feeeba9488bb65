"""Errors shared across the CLI and the packages."""


class CliError(Exception):
    """An error meant for the operator: printed as one line, exit status 2, never a traceback."""
