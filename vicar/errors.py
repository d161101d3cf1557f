"""Errors meant for the user: the CLI prints them as one line, no traceback."""


class VicarError(Exception):
    exit_code = 1


class DataDirBusy(VicarError):
    """Another process already serves this data directory on this task queue."""

    exit_code = 3
