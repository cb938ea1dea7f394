"""Failures as data, not tracebacks: Stop, which ends an evaluation early with a verdict, and one_line, an exception
told in one line."""

from __future__ import annotations


class Stop(Exception):
    """Ends an evaluation early with a verdict (a failure is data, not a traceback)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def one_line(error: BaseException) -> str:
    """'TypeError: first line of the message'."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
