"""Query-time logic shared by the MCP tools and the CLI: grep (text, regex, semantic, hybrid), recall, context assembly.

The adapters call these as ``retrieval.grep.grep_memories`` and so on: the tools share
the domain functions' names, and module-qualified calls keep both readable. The
submodules load on first use (PEP 562), so a command that needs one of them, a hook
handing back memory say, does not pay for the others (grep pulls in the embedders).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from palimpsest.server.retrieval import context, grep, hybrid, recall

__all__ = ["context", "grep", "hybrid", "recall"]


def __getattr__(name: str) -> ModuleType:
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
