"""Installing and uninstalling an agent's wiring: plan every change, back up, then write.

The promise is that ``uninstall`` leaves every file byte for byte as it was before
``install``. Re-serialising a file cannot keep that promise (JSON loses its spacing), so
``install`` keeps what it needs to restore exactly, in the Palimpsest data directory
(``$XDG_DATA_HOME/palimpsest/install``):

- ``backups/<sha256>``: each file's bytes before Palimpsest first changed it;
- ``manifest.json``: per agent, scope and project, each file changed, whether it
  existed, the SHA-256 of its bytes before and after, and the directories created.

``uninstall`` restores the backup (or removes a file ``install`` created, and the
directories it made) when the file still holds exactly what ``install`` wrote. When
someone edited it since, restoring would lose their edit, so Palimpsest's entries alone
are taken out and the rest stays as the user left it.

Every command plans first: all files are read and parsed, and an invalid one stops the
command before anything is written. Backups and the manifest are written before the
files; a file write that fails puts back the files already written.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.server.agents import documents
from palimpsest.server.agents.spec import Agent, ConfigFile, Entries, Places, Scope

if sys.platform != "win32":
    import fcntl


class Action(StrEnum):
    """What a command does to one file."""

    create = "create"
    update = "update"
    unchanged = "unchanged"
    restore = "restore"
    remove = "remove"
    unwire = "unwire"
    gone = "gone"


@dataclass(frozen=True)
class Change:
    """One file's bytes before and after a command (``None``: no file)."""

    path: Path
    before: bytes | None
    after: bytes | None
    action: Action

    @property
    def changes(self) -> bool:
        """Whether the command writes or removes the file."""
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff from ``before`` to ``after`` (``/dev/null`` for a missing side)."""
        old = (self.before or b"").decode("utf-8").splitlines(keepends=True)
        new = (self.after or b"").decode("utf-8").splitlines(keepends=True)
        lines = difflib.unified_diff(
            old,
            new,
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path) if self.after is not None else "/dev/null",
        )
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


class FileRecord(BaseModel):
    """What ``install`` did to one file, kept so ``uninstall`` can undo it exactly."""

    path: str
    existed: bool = Field(description="Whether the file was there before install.")
    before_sha256: str | None = Field(description="SHA-256 of its bytes before the first install: the backup's name.")
    after_sha256: str = Field(description="SHA-256 of the bytes install last wrote.")
    exact: bool = Field(True, description="False once install rewrote a file someone had edited since.")
    created_dirs: list[str] = Field(default_factory=list, description="Directories install created, deepest first.")


class InstallRecord(BaseModel):
    """One ``install AGENT --scope SCOPE`` (and its project): the files it changed."""

    agent: str
    scope: Scope
    project: str | None
    installed_at: datetime
    files: list[FileRecord]


class Manifest(BaseModel):
    """Every install not yet uninstalled."""

    version: Literal[1] = 1
    installs: list[InstallRecord] = Field(default_factory=list)


def state_dir(places: Places) -> Path:
    """``$XDG_DATA_HOME/palimpsest/install`` (XDG's default ``~/.local/share`` when unset)."""
    data_home = places.environ.get("XDG_DATA_HOME") or str(places.home / ".local" / "share")
    return Path(data_home) / "palimpsest" / "install"


def sha256(data: bytes) -> str:
    """The hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _text(data: bytes | None, path: Path) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text; fix it first, nothing was changed") from None


def _record_key(scope: Scope, places: Places) -> str | None:
    return str(places.project) if scope is Scope.project else None


class Wiring:
    """Install and uninstall over one data directory's manifest and backups."""

    def __init__(self, places: Places) -> None:
        self.places = places
        self.root = state_dir(places)
        self.manifest_path = self.root / "manifest.json"
        self.backups = self.root / "backups"

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One install or uninstall at a time: each reads, then rewrites, the one manifest.

        An advisory lock on ``$XDG_DATA_HOME/palimpsest/install.lock`` (none on Windows),
        held from planning to the last write, so two commands never plan on the same bytes.
        When nothing is left installed, the lock file goes too, and the ``palimpsest`` data
        folder if that leaves it empty: an uninstall leaves nothing behind. A command that
        waited on a lock file removed meanwhile takes the lock again on the path's new file,
        so two commands never hold different files at once.
        """
        lock = self.root.parent / "install.lock"
        created = _missing_dirs(lock.parent)
        while True:
            lock.parent.mkdir(parents=True, exist_ok=True)  # again after a holder removed it
            with open(lock, "a") as handle:
                if sys.platform != "win32":
                    fcntl.flock(handle, fcntl.LOCK_EX)
                    if not lock.exists() or os.stat(lock).st_ino != os.fstat(handle.fileno()).st_ino:
                        continue  # removed by the command that held it: lock the path's new file
                try:
                    yield
                finally:
                    if not self.manifest_path.exists():
                        lock.unlink(missing_ok=True)
                        for folder in [lock.parent, *created[1:]]:
                            _remove_if_empty(folder)
                return

    # -- the manifest -----------------------------------------------------------------------

    def manifest(self) -> Manifest:
        """The manifest, empty when no install has been recorded."""
        data = _read(self.manifest_path)
        if data is None:
            return Manifest()
        try:
            return Manifest.model_validate_json(data)
        except ValueError:
            raise InvalidInput(f"{self.manifest_path} is damaged; nothing was changed") from None

    def record(self, agent: str, scope: Scope) -> InstallRecord | None:
        """The install of ``agent`` at ``scope`` (in this project, for project scope), if any."""
        project = _record_key(scope, self.places)
        return next(
            (
                item
                for item in self.manifest().installs
                if item.agent == agent and item.scope is scope and item.project == project
            ),
            None,
        )

    # -- planning ---------------------------------------------------------------------------

    def plan_install(self, agent: Agent, scope: Scope, entries: Entries) -> list[Change]:
        """Each file ``install`` would write, with its bytes before and after; writes nothing.

        Raises:
            InvalidInput: a file is not valid JSON/TOML, or holds a non-object where an object goes.
        """
        changes = []
        for config in agent.files(scope, self.places, entries):
            before = _read(config.path)
            text = _text(before, config.path)
            doc = documents.parse(text, config.fmt, config.path)
            wired = documents.copy_of(doc, config.fmt)
            config.wire(wired)
            if before is not None and documents.same(doc, wired, config.fmt):
                changes.append(Change(config.path, before, before, Action.unchanged))
                continue
            after = documents.render(wired, config.fmt, text).encode("utf-8")
            changes.append(Change(config.path, before, after, Action.create if before is None else Action.update))
        return changes

    def plan_uninstall(self, agent: Agent, scope: Scope, entries: Entries) -> list[Change]:
        """Each file ``uninstall`` would restore, remove or unwire; writes nothing.

        Raises:
            InvalidInput: an edited file is no longer valid JSON/TOML.
        """
        record = self.record(agent.name, scope)
        if record is None:
            return []
        configs = {config.path: config for config in agent.files(scope, self.places, entries)}
        return [self._undo(item, configs.get(Path(item.path))) for item in record.files]

    def _undo(self, item: FileRecord, config: ConfigFile | None) -> Change:
        path = Path(item.path)
        current = _read(path)
        if current is None:
            return Change(path, None, None, Action.gone)
        original = self._backup(item) if item.existed else None
        if item.exact and sha256(current) == item.after_sha256:
            return Change(path, current, original, Action.restore if item.existed else Action.remove)
        if config is None:  # the agent no longer writes this file: leave what is there
            return Change(path, current, current, Action.unchanged)
        text = _text(current, path)
        doc = documents.parse(text, config.fmt, path)
        unwired = documents.copy_of(doc, config.fmt)
        before_install = documents.parse(_text(original, path), config.fmt, path) if original is not None else None
        config.unwire(unwired, before_install)
        if documents.same(doc, unwired, config.fmt):
            return Change(path, current, current, Action.unchanged)
        if not item.existed and documents.is_empty(unwired, config.fmt):
            return Change(path, current, None, Action.remove)
        return Change(path, current, documents.render(unwired, config.fmt, text).encode("utf-8"), Action.unwire)

    def _backup(self, item: FileRecord) -> bytes:
        data = _read(self.backups / str(item.before_sha256))
        if data is None:
            raise InvalidInput(f"the backup of {item.path} is missing from {self.backups}; nothing was changed")
        return data

    # -- applying ---------------------------------------------------------------------------

    def install(self, agent: Agent, scope: Scope, changes: list[Change]) -> None:
        """Back up, record, then write ``changes`` (from ``plan_install``)."""
        written = [change for change in changes if change.changes]
        if not written:
            return
        manifest = self.manifest()
        project = _record_key(scope, self.places)
        record = next(
            (i for i in manifest.installs if i.agent == agent.name and i.scope is scope and i.project == project),
            None,
        )
        if record is None:
            record = InstallRecord(
                agent=agent.name, scope=scope, project=project, installed_at=datetime.now(UTC), files=[]
            )
            manifest.installs.append(record)
        by_path = {item.path: item for item in record.files}
        for change in written:
            assert change.after is not None
            item = by_path.get(str(change.path))
            if item is None:
                if change.before is not None:
                    self._keep_backup(change.before)
                item = FileRecord(
                    path=str(change.path),
                    existed=change.before is not None,
                    before_sha256=sha256(change.before) if change.before is not None else None,
                    after_sha256=sha256(change.after),
                    created_dirs=[str(path) for path in _missing_dirs(change.path.parent)],
                )
                record.files.append(item)
            else:
                current = sha256(change.before) if change.before is not None else None
                if current != item.after_sha256:
                    item.exact = False
                item.after_sha256 = sha256(change.after)
        previous = _read(self.manifest_path)
        _write_atomic(self.manifest_path, manifest.model_dump_json(indent=2).encode("utf-8"))
        try:
            _apply(written)
        except OSError:
            _set(self.manifest_path, previous)
            raise

    def uninstall(self, agent: Agent, scope: Scope, changes: list[Change]) -> None:
        """Write ``changes`` (from ``plan_uninstall``), drop the record and backups no longer needed."""
        record = self.record(agent.name, scope)
        if record is None:
            return
        _apply([change for change in changes if change.changes])
        for item in record.files:
            if not Path(item.path).exists():
                for folder in item.created_dirs:
                    _remove_if_empty(Path(folder))
        manifest = self.manifest()
        manifest.installs = [
            other
            for other in manifest.installs
            if not (other.agent == record.agent and other.scope is record.scope and other.project == record.project)
        ]
        _write_atomic(self.manifest_path, manifest.model_dump_json(indent=2).encode("utf-8"))
        kept = {item.before_sha256 for other in manifest.installs for item in other.files}
        for item in record.files:
            if item.before_sha256 is not None and item.before_sha256 not in kept:
                (self.backups / item.before_sha256).unlink(missing_ok=True)
        if not manifest.installs:
            self.manifest_path.unlink()
            _remove_if_empty(self.backups)
            _remove_if_empty(self.root)

    def _keep_backup(self, data: bytes) -> None:
        target = self.backups / sha256(data)
        if not target.exists():
            self.backups.mkdir(parents=True, exist_ok=True, mode=0o700)
            _write_atomic(target, data, mode=0o600)


def _missing_dirs(folder: Path) -> list[Path]:
    """The directories above a file that do not exist yet, deepest first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_if_empty(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, keeping the old mode.

    A symlinked config (dotfiles kept in a repository) is written through: its target
    changes and the link stays a link.
    """
    if path.is_symlink():
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _set(path: Path, data: bytes | None) -> None:
    if data is None:
        path.unlink(missing_ok=True)
    else:
        _write_atomic(path, data)


def _apply(changes: list[Change]) -> None:
    """Write every change; if one fails, put the files already written back as they were."""
    done: list[Change] = []
    try:
        for change in changes:
            _set(change.path, change.after)
            done.append(change)
    except OSError:
        for change in reversed(done):
            _set(change.path, change.before)
        raise
