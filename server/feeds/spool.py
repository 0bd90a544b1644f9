"""The hook spool: a turn durably queued in a file, for a drainer to store, without pydantic or a store.

Why: a hook runs after every turn of every agent, and storing a turn in-process means
importing the models, asyncio and the store first: about 18 times a bare interpreter's
start, most of it before a byte of the transcript is read. Queueing needs only ``json``,
``os`` and ``fcntl``. So ``palimpsest hook AGENT`` checks its stdin cheaply (UTF-8, a JSON
object: the same one-line errors the full path gives), appends it here, and starts a
drainer (`palimpsest.server.cli.hook_drain`) unless one runs already. Every turn is then
stored before the hook exits, or durably queued.

One spool per store (the store URI's digest names it), under
``$XDG_DATA_HOME/palimpsest/hook-spool/``:

- ``KEY.jsonl``: one JSON line per payload (`entry`): the agent, its flags, the working
  directory, the environment values the hook reads (`KEPT_ENV`) and stdin as given.
  Appended under ``KEY.lock`` with ``O_APPEND`` and ``fsync``, so concurrent hooks never
  interleave a line and a line written is on disk before the hook exits 0.
- ``KEY.drain``: held (``flock``) by whoever drains, for as long as it drains. A hook that
  can take it knows no drainer runs and starts one. The drainer lets it go only while it
  holds ``KEY.lock`` and has found the queue empty, so a payload appended after that finds
  the lock free and starts the next drainer: none is left behind.
- ``KEY.log``: errors the drainer found (no agent listens by then); ``palimpsest status``
  shows the last one.

A payload leaves the queue only after its messages are stored (`remove_first` rewrites
the file without its first line, atomically); a drainer killed in between stores it again
on the next drain, which duplicates nothing since message ids are fixed by transcript
position.

``PALIMPSEST_HOOK_QUEUE=off`` stores in the hook's own process, as before the spool.
"""

from __future__ import annotations

import json
import os
import sys
import time

if sys.platform != "win32":
    import fcntl

# CPython's own SHA-256 gives hashlib's digest without loading OpenSSL, a tenth of a queued turn's instructions.
try:
    from _sha256 import sha256  # type: ignore[import-not-found]  # Python 3.11
except ImportError:
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # Python 3.12 and later
    except ImportError:
        from hashlib import sha256

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.server.feeds.json_text import JSON_ERRORS, json_error

#: ``typing.TYPE_CHECKING`` without importing ``typing``: this module imports only what
#: queueing needs (no ``typing``, ``pathlib``, ``dataclasses`` or ``contextlib``, each a
#: sizeable part of a queued hook's start); type checkers read any name ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

#: ``off`` stores each turn in the hook's own process instead of queueing it.
QUEUE_SETTING = "PALIMPSEST_HOOK_QUEUE"
#: The values pydantic reads as false, so the hook and ``Settings.hook_queue`` agree.
FALSE_WORDS = frozenset({"off", "false", "0", "no", "n", "f"})
#: The most bytes a hook takes on stdin: `palimpsest.server.feeds.hooks.READ_BYTES` (a test keeps them equal).
STDIN_BYTES = 64 * 1024 * 1024
#: The environment variables a payload's run reads (where agents keep files, the partition,
#: the budget, redaction, the follow-up), kept with the payload: the drainer may have been
#: started by another hook. Named one by one so that no secret (``NEO4J_PASSWORD``, a
#: ``PALIMPSEST_TOKEN``) is written to the spool: the drainer uses its own password.
KEPT_ENV = frozenset(
    {
        "HOME",
        "XDG_DATA_HOME",
        "CODEX_HOME",
        "PALIMPSEST_PARTITION",
        "PALIMPSEST_STARTUP_BUDGET",
        "PALIMPSEST_REDACT",
        "PALIMPSEST_HOOK_FOLLOW_UP",
        "NEO4J_USER",
        "NEO4J_DATABASE",
    }
)
#: The module a drainer runs as.
DRAINER_MODULE = "palimpsest.server.cli.hook_drain"
#: Per agent, the payload field naming the event and the events that print memory back:
#: those run in-process, after draining the spool, so a new session's memory sees every turn.
PRINTING_EVENTS: dict[str, tuple[str, frozenset[str]]] = {
    "claude": ("hook_event_name", frozenset({"SessionStart"})),
    "codex": ("hook_event_name", frozenset({"SessionStart"})),
    "gemini": ("hook_event_name", frozenset({"SessionStart"})),
    "cursor": ("hook_event_name", frozenset({"sessionStart"})),
}


def default_store_uri() -> str:
    """``sqlite:///$XDG_DATA_HOME/palimpsest/memory.db``, XDG's default when unset."""
    return f"sqlite:///{os.path.join(data_dir(), 'memory.db')}"


def data_dir() -> str:
    """``$XDG_DATA_HOME/palimpsest`` (XDG's default ``~/.local/share`` when unset)."""
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data_home, "palimpsest")


def queue_enabled() -> bool:
    """Whether hooks queue their turns (the default) rather than store them in-process.

    Not on Windows, which has no ``flock``: a hook there stores in its own process.
    """
    return sys.platform != "win32" and os.environ.get(QUEUE_SETTING, "on").strip().lower() not in FALSE_WORDS


def store_uri(flag: str | None) -> str:
    """The store a hook writes to, as `palimpsest.server.store_settings.StoreSettings` reads it."""
    if flag is not None:
        return flag
    for name, value in os.environ.items():
        if name.lower() == "palimpsest_store":
            return value
    return default_store_uri()


def read_payload(text: str) -> dict[str, Any]:
    """The hook's stdin as a JSON object.

    Raises:
        InvalidInput: if it is not JSON (nested too deep for Python included), or not an object.
    """
    try:
        value = json.loads(text)
    except JSON_ERRORS as exc:
        raise InvalidInput(f"hook input on stdin is not JSON ({json_error(exc)})") from None
    if not isinstance(value, dict):
        raise InvalidInput("hook input on stdin must be a JSON object")
    return value


def prints_memory(agent: str, payload: dict[str, Any]) -> bool:
    """Whether this payload's event hands memory back on stdout (then it is not queued)."""
    field, events = PRINTING_EVENTS.get(agent, ("", frozenset()))
    return payload.get(field) in events


def kept(name: str) -> bool:
    """Whether the environment variable ``name`` is kept with a queued payload."""
    return name in KEPT_ENV


def kept_environment() -> dict[str, str]:
    """The environment values a payload's run reads (`KEPT_ENV`)."""
    return {name: value for name, value in os.environ.items() if kept(name)}


def entry(agent: str, partition: str | None, store: str | None, payload: str) -> dict[str, Any]:
    """One queued hook call: what the drainer needs to run it as the hook would have."""
    return {
        "agent": agent,
        "partition": partition,
        "store": store,
        "cwd": os.getcwd(),
        "env": kept_environment(),
        "queued_at": time.time(),
        "payload": payload,
    }


class Spool:
    """The files of one store's spool: paths as text (``pathlib`` is not imported here)."""

    __slots__ = ("folder", "key")

    def __init__(self, folder: str, key: str) -> None:
        self.folder, self.key = folder, key

    @property
    def queue(self) -> str:
        return os.path.join(self.folder, f"{self.key}.jsonl")

    @property
    def lock(self) -> str:
        return os.path.join(self.folder, f"{self.key}.lock")

    @property
    def drain(self) -> str:
        return os.path.join(self.folder, f"{self.key}.drain")

    @property
    def log(self) -> str:
        return os.path.join(self.folder, f"{self.key}.log")


def spool_for(uri: str) -> Spool:
    """The spool of the store at ``uri``."""
    return Spool(os.path.join(data_dir(), "hook-spool"), sha256(uri.encode("utf-8")).hexdigest()[:16])


def _open_lock(path: str) -> int:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


class appending:  # noqa: N801 - used as a function: ``with appending(spool):``
    """Hold the spool's append lock: no line is added or removed meanwhile."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self.handle = -1

    def __enter__(self) -> None:
        self.handle = _open_lock(self.spool.lock)
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.handle)
            raise

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        os.close(self.handle)


def enqueue(spool: Spool, value: dict[str, Any]) -> None:
    """Append ``value`` as one line, on disk (``fsync``) before returning."""
    line = (json.dumps(value) + "\n").encode("ascii")
    with appending(spool):
        handle = os.open(spool.queue, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(handle, line)
            os.fsync(handle)
        finally:
            os.close(handle)


def first_line(spool: Spool) -> bytes | None:
    """The oldest queued line (its newline included), or None when the queue is empty; call holding `appending`."""
    try:
        with open(spool.queue, "rb") as handle:
            line = handle.readline()
    except FileNotFoundError:
        return None
    return line if line.endswith(b"\n") else None


def remove_first(spool: Spool, line: bytes) -> None:
    """Drop ``line``, the queue's first, atomically: a crash leaves the queue with it or without it."""
    with appending(spool):
        with open(spool.queue, "rb") as queued:
            data = queued.read()
        if not data.startswith(line):
            return
        partial = spool.queue + ".tmp"
        handle = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(handle, data[len(line) :])
            os.fsync(handle)
        finally:
            os.close(handle)
        os.replace(partial, spool.queue)
        folder = os.open(spool.folder, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


class DrainLock:
    """The spool's drain lock: whoever holds it is the one drainer."""

    def __init__(self, spool: Spool) -> None:
        self.handle = _open_lock(spool.drain)

    def take(self, *, wait: bool) -> bool:
        """Take it (waiting for a running drainer when ``wait``); whether it was taken."""
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        """Let it go (closing the file does); a second call does nothing."""
        if self.handle >= 0:
            os.close(self.handle)
            self.handle = -1


def drainer_running(spool: Spool) -> bool:
    """Whether a drainer holds the spool's drain lock now."""
    lock = DrainLock(spool)
    try:
        return not lock.take(wait=False)
    finally:
        lock.release()


def start_drainer(uri: str) -> bool:
    """Start a drainer for the store at ``uri``, detached (its own session, no terminal); whether it started.

    ``posix_spawn`` rather than ``subprocess``, whose import alone is a fifth of this
    path's. One that cannot start (no process left) is no error of the hook: the payload
    is on disk, and the next hook, ``palimpsest maintain`` or the server drains it.
    """
    null = os.open(os.devnull, os.O_RDWR)
    try:
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-m", DRAINER_MODULE, uri],
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, null, stream) for stream in (0, 1, 2)],
            setsid=True,
        )
    except OSError:
        return False
    finally:
        os.close(null)
    return True


def log_error(spool: Spool, message: str) -> None:
    """Note an error the drainer found, one line with its time, where ``palimpsest status`` reads it."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    os.makedirs(spool.folder, mode=0o700, exist_ok=True)
    with open(spool.log, "a", encoding="utf-8") as handle:
        handle.write(f"{stamp} {' '.join(message.split())}\n")


def last_error(spool: Spool) -> str | None:
    """The drainer's last logged error line, if any."""
    try:
        with open(spool.log, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return None
    return lines[-1] if lines else None


def pending(spool: Spool) -> int:
    """How many payloads wait in the queue."""
    try:
        with open(spool.queue, "rb") as handle:
            return handle.read().count(b"\n")
    except FileNotFoundError:
        return 0
