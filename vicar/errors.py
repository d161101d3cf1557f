"""Errors meant for the user: the CLI prints them as one line, no traceback."""


class VicarError(Exception):
    pass
