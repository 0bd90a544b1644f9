"""JSON errors in one phrase, importable without pydantic: a queued hook checks its stdin with them."""

from __future__ import annotations

import json
import sys

#: What `json.loads` raises on bad input: `json.JSONDecodeError` and a bare `ValueError` (an
#: integer of more digits than Python converts), and `RecursionError` (arrays nested thousands deep).
JSON_ERRORS = (ValueError, RecursionError)


def json_error(exc: ValueError | RecursionError) -> str:
    """Why text is not JSON that Python reads, in a phrase: ``Expecting value at column 3``."""
    if isinstance(exc, json.JSONDecodeError):
        where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno}"
        return f"{exc.msg} at {where}"
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return f"an integer of over {sys.get_int_max_str_digits()} digits"
