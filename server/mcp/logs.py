"""Where the server's log lines go and how they look: stderr, as text for a person or JSON for a collector.

On stdio, stdout carries protocol bytes only, so every line goes to stderr whatever the
format. ``json`` writes one object a line (``time``, ``level``, ``logger``, ``message``,
and ``exception`` when there is one), and routes the lines FastMCP and uvicorn would
print their own way through the same formatter, so a log collector reads one format.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class LogFormat(StrEnum):
    """How log lines look on stderr."""

    text = "text"
    json = "json"


#: The libraries whose loggers keep their own handlers unless told otherwise.
LIBRARY_LOGGERS = ("fastmcp", "uvicorn", "uvicorn.error", "uvicorn.access", "mcp")


class JsonLines(logging.Formatter):
    """One JSON object per record, so structured logs need no parsing of free text."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def log_to_stderr(log_format: LogFormat = LogFormat.text, level: int = logging.INFO) -> None:
    """Send log lines of ``level`` and above to stderr in ``log_format`` (once: an existing root handler is kept).

    A stdio server logs warnings and errors only: its client shows every stderr line as
    an error of the server (Claude Code logs each as ``[ERROR] ... Server stderr``), so a
    start where nothing is wrong must print nothing.
    """
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    if log_format is LogFormat.json:
        handler.setFormatter(JsonLines())
        for name in LIBRARY_LOGGERS:
            library = logging.getLogger(name)
            for own in list(library.handlers):
                library.removeHandler(own)
            library.propagate = True
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
