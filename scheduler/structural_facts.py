"""Facts read from what a session did (its tool calls and their results), not from its sentences.

A transcript states plainly which files were written, which commands ran and how they
ended, what was committed and which packages were added: no guess is needed, so these
are the most dependable facts a session leaves. Each is written as a short sentence of
our own (never the call's JSON) and cites the call and, when there is one, its result.

A call's facts are read with its result: a write the user rejected or that failed
changed nothing. A shell command is read by its kind (`shell_commands`): one that only
reads (``ls``, ``cat``, ``git status``, ``grep``) yields no fact at all, whatever its
outcome; a check (build, test, lint, run) yields its outcome; a state change yields what
it did, and its error when it failed.

Subjects, so that a later fact supersedes an earlier one about the same thing
(`scheduler/facts.py`'s rule: same subject and kind, or a newer ``change``):

- ``file:PATH``, kind ``change``: "Created PATH" / "Edited PATH" / "Deleted PATH", from a
  write tool or from the shell ("Appended to PATH", "Moved A to B");
- ``command:CHECK``, kind ``command``: "`CMD` passed (exit 0)" (with a test summary's
  counts: ": 1244 passed, 0 failed") or "`CMD` failed (exit 1): first error line", one
  subject per check whatever its arguments (``go test``, ``mise run lint``:
  `shell_commands.family`), so only its last outcome is current; a pass after a failure
  says so, with the failure's error and the files edited in between (what fixed it); a
  command still running (Codex's "Process running with session ID N", Claude Code's
  background task) "`CMD` started, still running when last seen" until the poll that sees
  it exit, or Claude Code's notice that the task ended, gives its outcome (none when it was
  stopped: a server); a failure its exit status hid (``| tail``, a wrapper) is read from its output;
  ``command:CMD`` for a state change that failed, or another command;
- ``branch:NAME``, ``git:...``, ``gh:...``, kind ``change``: "Renamed branch A to B",
  "Staged all changes (git add)", "Pushed origin main", "Opened PR \"TITLE\"";
- ``commit:MESSAGE``, kind ``commit``: "Committed \"MESSAGE\"" (and the short hash git
  printed, and the first line of its body), only for a commit that succeeded;
- ``rejected:CALL``, kind ``decision``: "The user rejected Write LICENSE, saying: \"Entire
  Inc.\"": what the user refused, and what they said instead;
- a call not permitted (Claude Code run where no one answers its permission prompt): a
  shell command under its own subject, kind ``command`` ("`npm test` not run: not permitted
  (the user had not granted it)"), so its next run's outcome supersedes it; a write under
  ``file:PATH``, kind ``limitation`` ("Edit spec.ts not done: not permitted ..."), which
  the file's next change supersedes;
- ``error:TOOL:INPUT``, kind ``lesson``: a call that failed and then worked with one or two
  short inputs changed: "Task failed (Agent type 'x' not found); it worked with
  subagent_type=plugin:x";
- ``dependency:NAME``, kind ``dependency``: "Added dependency NAME (uv add)";
- ``config:KEY``, kind ``configuration``: "Set KEY to VALUE" (``git config``, ``export``,
  ``npm config set``, ``poetry config``);
- ``hook:stop:SCRIPT``, kind ``configuration``: "A Stop hook (stop.sh) kept the agent from
  stopping: Cannot exit with unstaged changes.", from Claude Code's "Stop hook feedback:"
  line: the project's own rule, which the next session meets again.

A call without a result yet yields nothing; `structural_facts` says where the unsettled
calls begin, so extraction stops there and reads them again with their results.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from palimpsest.graph_schema.models import Message, Role
from palimpsest.scheduler.agent_marks import (
    EXITED,
    NO_RESULT_TOOLS,
    RUNNING,
    WATCH_TOOLS,
    describe_call,
    is_rejection,
    not_granted,
    polled_id,
    rejection_reason,
    stops,
    task_notices,
)
from palimpsest.scheduler.session_facts import (
    WRITE_TOOLS,
    ToolCall,
    clip,
    first_error_line,
    hidden_failure,
    outcome,
    path_arg,
    shell_command,
    test_tally,
    tool_call,
)
from palimpsest.scheduler.shell_commands import (
    category,
    commit_body,
    commit_made,
    effects,
    family,
    stopped_as_meant,
    watched_only,
)
from palimpsest.scheduler.shell_commands import shown as shown_command

#: Longest command shown in a fact (and used as its subject).
COMMAND_CHARS = 120
#: Files named as the fix of a failure, at most.
FIX_FILES = 4
#: Longest commit body line kept in a commit's fact.
BODY_CHARS = 160
#: Inputs that say what to look for or write, not how to call the tool: another one is no fix worth keeping.
FREE_INPUTS = frozenset(
    {"url", "query", "pattern", "path", "file_path", "glob", "prompt", "description", "content", "command", "offset"}
)
#: Longest input value named as what fixed a failed call.
FIX_VALUE_CHARS = 80
#: Marks a failed command's fact, so a later pass can tell it follows a failure.
FAILED = " failed ("
#: The key under which an edit tool's failure on a file waits for the command that writes the file instead.
_WRITE_FAILED = "write-failed:"

_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.MULTILINE)
#: A redirection left in a simple command's words (``pip install x 2>&1``): no package.
_REDIRECTION = re.compile(r"^\d*[<>]|^&>")
#: Where a server it started listens, as it printed (``Local: http://127.0.0.1:5174/``).
_SERVED = re.compile(r"https?://(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\])(?::\d+)?[/\w.-]*")
#: Package managers' "add a dependency" commands: program, subcommand(s).
_ADDERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pip", ("install",)),
    ("pip3", ("install",)),
    ("uv", ("add",)),
    ("poetry", ("add",)),
    ("pdm", ("add",)),
    ("npm", ("install", "i", "add")),
    ("pnpm", ("add", "install", "i")),
    ("yarn", ("add",)),
    ("bun", ("add",)),
    ("cargo", ("add",)),
    ("go", ("get",)),
    ("gem", ("install",)),
)
_SEPARATORS = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


@dataclass(frozen=True)
class StructuralFact:
    """One fact: its sentence, kind and subject, and the messages it is read from."""

    text: str
    kind: str
    subject: str
    sources: tuple[str, ...]


@dataclass
class _Failure:
    error: str
    edited_since: list[str] = field(default_factory=list)
    #: The command that failed, as shown; empty when the failure came from before these messages.
    shown: str = ""


@dataclass
class StructuralReading:
    """What `structural_facts` read: the facts, and where the calls still without a result begin."""

    facts: list[StructuralFact]
    #: Index of the first message from which a call still awaits its result (len: none).
    settled: int


def structural_facts(
    messages: Sequence[Message], prior_failures: dict[str, str] | None = None, *, wait: bool = True
) -> StructuralReading:
    """The facts a run of messages' tool calls state, oldest first.

    A call's facts are read with its result: a write the user rejected, or that failed,
    changed nothing. A call without a ``tool_call_id`` (messages written by an API client)
    has no result to wait for, and its write is taken as done.

    Args:
        messages: The messages, oldest first (a thread's batch).
        prior_failures: ``command:CMD`` subjects whose current fact is a failure, and its
            error, from before these messages: a pass of that command then reads
            "passed after failing".
        wait: Leave out the facts from the first call still without a result on (its
            result may come in a later read); ``False`` reads on past it.

    A call the user's next prompt follows gets no result any more (the turn ended), and a
    call of `NO_RESULT_TOOLS` never had one: neither holds the reading back.
    """
    facts: list[StructuralFact] = []
    failures: dict[str, _Failure] = {key: _Failure(error) for key, error in (prior_failures or {}).items()}
    tools: dict[str, list[tuple[ToolCall, str]]] = {}
    pending: dict[str, tuple[int, Message, ToolCall]] = {}
    running: dict[str, tuple[Message, ToolCall]] = {}  # commands still running, by the id their polls name
    waiting: dict[str, list[StructuralFact]] = {}  # their "started" facts, kept for those no poll settles
    prompted = -1  # the last of the user's own prompts: calls before it wait for nothing
    for index, message in enumerate(messages):
        if message.role is Role.user and message.metadata.get("kind") in (None, "text") and not message.tool_call_id:
            for notice in task_notices(message.content[:4000]):  # a background task ended: its outcome, as a poll's
                ended = running.pop(notice.task_id, None)
                if ended is not None and not notice.stopped():
                    facts += _result_facts(ended[1], ended[0], notice.as_result(message), failures, tools)
            blocked = _stop_hook(message)
            if blocked is not None:
                facts.append(blocked)
                continue
            if not message.content.lstrip().startswith("<task-notification>"):
                prompted = index
        call = tool_call(message)
        if call is not None:
            if call.id is not None and call.name not in NO_RESULT_TOOLS:
                pending[call.id] = (index, message, call)
            elif call.name in WRITE_TOOLS or call.name == "apply_patch":
                facts += _write_facts(call, (message.id,), failures)
            continue
        if message.role is Role.tool or message.metadata.get("kind") == "tool_result":
            found = pending.pop(message.tool_call_id or "", None)
            if found is None:
                continue
            waited_on = polled_id(found[2].args)
            polled = running.get(waited_on) if found[2].name in WATCH_TOOLS else None
            if polled is not None:  # a poll of a command still running: its exit is that command's outcome
                if EXITED.search(message.content[:400]) is not None or stops(found[2]):
                    del running[waited_on]
                    if not stops(found[2]):  # not the agent stopping it (a server)
                        facts += _result_facts(polled[1], polled[0], message, failures, tools)
                continue
            started = RUNNING.search(message.content[:400])
            if started is not None and EXITED.search(message.content[:400]) is None:
                running[started.group(1)] = (found[1], found[2])
                waiting[started.group(1)] = _result_facts(found[2], found[1], message, failures, tools)
                continue  # "started" only if no poll below settles it
            facts += _result_facts(found[2], found[1], message, failures, tools)
    facts += [fact for session, started_facts in waiting.items() if session in running for fact in started_facts]
    settled = min((index for index, *_ in pending.values() if index > prompted), default=len(messages))
    if not wait:
        return StructuralReading(facts, len(messages))
    return StructuralReading([fact for fact in facts if _before(fact, messages, settled)], settled)


#: Claude Code's message when a Stop hook blocks the agent from stopping: ``Stop hook feedback:\n[COMMAND]: OUTPUT``.
_STOP_HOOK = re.compile(r"^\s*Stop hook feedback:\s*\n?\s*\[([^\]\n]+)\]:\s*(.*)", re.DOTALL)
#: Longest reason kept from a Stop hook's output.
_HOOK_CHARS = 160


def _stop_hook(message: Message) -> StructuralFact | None:
    """The rule a Stop hook holds the agent to, from its feedback: its first line that is no heading.

    A hook that blocks stopping (commit first, run the checks) is the project's rule, met
    again in every session; its last feedback is the current fact.
    """
    found = _STOP_HOOK.match(message.content[:4000])
    if found is None:
        return None
    script = found.group(1).strip().rsplit("/", 1)[-1]
    lines = [line.strip() for line in found.group(2).splitlines()]
    reason = next((line for line in lines if line and not line.startswith("#")), "")
    said = f": {clip(reason, _HOOK_CHARS)}" if reason else ""
    return StructuralFact(
        f"A Stop hook ({script}) kept the agent from stopping{said}",
        "configuration",
        f"hook:stop:{script}",
        (message.id,),
    )


def _write_facts(call: ToolCall, sources: tuple[str, ...], failures: dict[str, _Failure]) -> list[StructuralFact]:
    """A done write's facts, one per file; each failing command since then notes the file as edited."""
    facts = []
    for path, action in _written(call.name, call.args, call.raw):
        facts.append(StructuralFact(f"{action.capitalize()} {path}", "change", f"file:{path}", sources))
        for failure in failures.values():
            if path not in failure.edited_since:
                failure.edited_since.append(path)
    return facts


def _result_facts(
    call: ToolCall,
    message: Message,
    result: Message,
    failures: dict[str, _Failure],
    tools: dict[str, list[tuple[ToolCall, str]]],
) -> list[StructuralFact]:
    """The facts of a call read with its result: a rejection, a write, a command's outcome and effects, a fix."""
    sources = (message.id, result.id)
    if is_rejection(result):
        reason = rejection_reason(result)
        said = f', saying: "{clip(reason, 160)}"' if reason else ""
        label = clip(describe_call(call), COMMAND_CHARS)
        return [StructuralFact(f"The user rejected {label}{said}", "decision", f"rejected:{label}", sources)]
    if not_granted(result):
        return _not_granted(call, sources)
    if call.name in WRITE_TOOLS or call.name == "apply_patch":
        written = [path for path, _ in _written(call.name, call.args, call.raw)]
        if result.metadata.get("is_error") is True:
            for path in written:
                tools.setdefault(f"{_WRITE_FAILED}{path}", []).append((call, first_error_line(result.content)))
            return []
        for path in written:
            tools.pop(f"{_WRITE_FAILED}{path}", None)
        return _write_facts(call, sources, failures)
    command = shell_command(call.args) if call.args else None
    if command is not None:
        facts = _command_facts(command, message, result, failures)
        return facts + _written_instead(command, facts, tools, sources)
    if result.metadata.get("is_error") is True:
        tools.setdefault(call.name, []).append((call, first_error_line(result.content)))
        return []
    return _tool_fix(call, tools.get(call.name, []), sources)


def _command_subject(command: str, kind: str, shown: str) -> str:
    """A command fact's subject: a check's family (``go test``, whatever its arguments), else the command named."""
    return f"command:{family(command) if kind == 'check' else shown}"


def _not_granted(call: ToolCall, sources: tuple[str, ...]) -> list[StructuralFact]:
    """A call the agent had no permission for: nothing ran. Told under its run's subject, which a later run settles."""
    command = shell_command(call.args) if call.args else None
    if command is not None:
        kind = category(command)
        if kind == "read":
            return []
        shown = _named(command)
        subject = _command_subject(command, kind, shown)
        return [
            StructuralFact(
                f"`{shown}` not run: not permitted (the user had not granted it)", "command", subject, sources
            )
        ]
    path = path_arg(call.args)
    label = clip(describe_call(call), COMMAND_CHARS)
    subject = f"file:{path}" if path else f"not_granted:{label}"
    return [
        StructuralFact(f"{label} not done: not permitted (the user had not granted it)", "limitation", subject, sources)
    ]


def _tool_fix(call: ToolCall, failed: list[tuple[ToolCall, str]], sources: tuple[str, ...]) -> list[StructuralFact]:
    """A call that worked after a failed call of the same tool: the error, and the input that fixed it.

    The failed call is the one whose input differs from this call's in one or two short
    values only (``subagent_type``, ``skill``, ``parentId``), and it is then answered; a
    long value (an edit's text), or another search or path (`FREE_INPUTS`), says nothing
    a person would keep.
    """
    for index, (before, error) in enumerate(failed):
        differ = [
            key for key in sorted(set(call.args) | set(before.args)) if call.args.get(key) != before.args.get(key)
        ]
        changed = [(key, call.args.get(key)) for key in differ]
        if not 1 <= len(changed) <= 2 or any(
            not isinstance(value, str | int) or len(str(value)) > FIX_VALUE_CHARS for _, value in changed
        ):
            continue
        del failed[index]
        name = call.name.rsplit("__", 1)[-1]
        fixed = ", ".join(f"{key}={value}" for key, value in changed)
        text = f"{name} failed ({clip(error, 120)}); it worked with {fixed}"
        return [StructuralFact(text, "lesson", f"error:{name}:{changed[0][0]}", sources)]
    return []


def _written_instead(
    command: str, facts: list[StructuralFact], tools: dict[str, list[tuple[ToolCall, str]]], sources: tuple[str, ...]
) -> list[StructuralFact]:
    """A file an edit tool failed to change and a command then wrote: what failed, and how it was done instead.

    An ``Edit`` that cannot match a file's tabs fails again and again until the agent
    rewrites the file from a script; the next session editing that file wants to know.
    """
    found = []
    for fact in facts:
        path = fact.subject.removeprefix("file:") if fact.kind == "change" else None
        failed = tools.pop(f"{_WRITE_FAILED}{path}", None) if path else None
        if failed:
            call, error = failed[-1]
            text = f"{call.name} of {path} failed ({clip(error, 120)}); it was written by `{_named(command)}` instead"
            found.append(StructuralFact(text, "lesson", f"error:{call.name}:{path}", sources))
    return found


def _named(command: str) -> str:
    """A command as its facts name it: its main step, marked ``…`` when more lines follow."""
    lines = command.replace("\\\n", " ").strip().splitlines()
    return clip(shown_command(command, COMMAND_CHARS) + (" …" if len(lines) > 1 else ""), COMMAND_CHARS)


def _before(fact: StructuralFact, messages: Sequence[Message], settled: int) -> bool:
    """Whether every source of ``fact`` lies before the unsettled calls (the rest is read again later)."""
    later = {message.id for message in messages[settled:]}
    return not any(source in later for source in fact.sources)


def _written(name: str, args: dict[str, Any], raw: str) -> list[tuple[str, str]]:
    """The files a write call changes, with what it did to each."""
    if name == "apply_patch":
        patch = raw if not args else str(args.get("input", ""))
        actions = {"Add": "created", "Update": "edited", "Delete": "deleted"}
        return [(path.strip(), actions[verb]) for verb, path in _PATCH_FILE.findall(patch)]
    path = path_arg(args)
    if not path:
        return []
    return [(path, "created" if args.get("command") == "create" else WRITE_TOOLS[name])]


def _command_facts(command: str, call: Message, result: Message, failures: dict[str, _Failure]) -> list[StructuralFact]:
    """The facts of one finished shell command (`shell_commands` says what kind it is).

    A command that only read yields nothing, whatever its outcome. A check (build, test,
    lint, run) yields its outcome, once per command: the latest supersedes. A state change
    yields what it did (files deleted, branches renamed, a commit, a dependency, a
    setting) and, when it failed, its error; any other command its outcome.
    """
    if "*** Begin Patch" in command:
        return [
            StructuralFact(f"{action.capitalize()} {path}", "change", f"file:{path}", (call.id, result.id))
            for path, action in _written("apply_patch", {}, command)
        ]
    kind = category(command)
    if kind == "read":
        return []
    code, body, failed = outcome(result, command)
    hidden = None if failed else hidden_failure(command, body)
    shown = _named(command)
    subject = _command_subject(command, kind, shown)
    sources = (call.id, result.id)
    if RUNNING.search(result.content[:400]) is not None and EXITED.search(result.content[:400]) is None:
        served = _SERVED.search(body)
        at = f" at {served.group(0)}" if served is not None else ""
        return [StructuralFact(f"`{shown}` started{at}, still running when last seen", "command", subject, sources)]
    status = f"exit {code}" if code is not None else ("error" if failed or hidden else "ok")
    if not failed and stopped_as_meant(command, code):
        served = _SERVED.search(body)
        at = f", serving {served.group(0)}" if served is not None else ""
        text = f"`{shown}` ran until the limit or kill it was given stopped it ({status}{at})"
        return [] if watched_only(command) else [StructuralFact(text, "command", subject, sources)]
    facts: list[StructuralFact] = []
    if failed or hidden:
        error = hidden or first_error_line(body)
        failures[subject] = _Failure(error, shown=shown)
        facts.append(StructuralFact(f"`{shown}`{FAILED}{status}): {error}", "command", subject, sources))
        return facts
    failure = failures.pop(subject, None)
    text = f"`{shown}` passed ({status})"
    tally = test_tally(body) if kind == "check" else None
    text += f": {tally}" if tally else ""
    if failure is not None:  # the check failed run another way (`rtk bun run test`, `npx tsc`): name that way
        other = failure.shown and failure.shown.split()[0] != shown.split()[0]
        before = f" after `{failure.shown}` failed with" if other else ""
        text += f"{before or ' after failing with'}: {failure.error}"
        if failure.edited_since:
            text += "; fixed by editing " + ", ".join(failure.edited_since[:FIX_FILES])
    if kind != "state" or failure is not None:
        facts.append(StructuralFact(text, "command", subject, sources))
    facts += [
        StructuralFact(
            effect.text, "configuration" if effect.subject.startswith("config:") else "change", effect.subject, sources
        )
        for effect in effects(command)
    ]
    for words in _pipeline(command):
        facts += _effects(words, body, sources, commit_body(command, BODY_CHARS), command)
    return facts


def _pipeline(command: str) -> list[list[str]]:
    """Each simple command of a command line (``a && b; c``), split into words."""
    parts: list[list[str]] = []
    for piece in _SEPARATORS.split(command.splitlines()[0] if command.strip() else ""):
        try:
            words = shlex.split(piece)
        except ValueError:
            words = piece.split()
        while words and "=" in words[0] and not words[0].startswith("-") and words[0] != "export":
            words = words[1:]  # VAR=value before a program
        if words:
            parts.append(words)
    return parts


def _effects(
    words: list[str], output: str, sources: tuple[str, ...], body: str | None, whole: str
) -> list[StructuralFact]:
    """A commit (and its body's first line), added dependencies or a setting that one successful command made.

    ``whole`` is the command line ``words`` is part of: a quiet commit's hash is in the ``git log`` after it.
    """
    program, rest = words[0].rsplit("/", 1)[-1], words[1:]
    if program == "git" and rest[:1] == ["commit"]:
        message = _option(rest, ("-m", "--message"))
        found = commit_made(whole, output)
        if message and message.strip(" \"'").startswith("$(") and found is not None:
            message = found[1]  # a message from a heredoc: git printed its first line
        if message:
            first = clip(message.splitlines()[0], COMMAND_CHARS)
            at = f" as {found[0]}" if found else ""
            why = f": {body}" if body else ""
            return [StructuralFact(f'Committed "{first}"{at}{why}', "commit", f"commit:{first}", sources)]
        return []
    if program == "export":
        pairs = [word.split("=", 1) for word in rest if "=" in word and not word.startswith("-")]
        return [_setting(key, value, sources) for key, value in pairs]
    if rest[:2] == ["config", "set"] and len(rest) >= 4:
        return [_setting(rest[2], rest[3], sources)]
    if program in ("python", "python3") and rest[:2] == ["-m", "pip"]:
        program, rest = "pip", rest[2:]
    for adder, verbs in _ADDERS:
        if program == adder and rest[:1] and rest[0] in verbs:
            names = [word for word in rest[1:] if not word.startswith(("-", ".")) and not _REDIRECTION.match(word)]
            if program in ("pip", "pip3") and "-r" in rest:
                names = []
            return [
                StructuralFact(
                    f"Added dependency {name} ({program} {rest[0]})",
                    "dependency",
                    f"dependency:{_package(name)}",
                    sources,
                )
                for name in names
            ]
    return []


def _setting(key: str, value: str, sources: tuple[str, ...]) -> StructuralFact:
    return StructuralFact(f"Set {key} to {clip(value, COMMAND_CHARS)}", "configuration", f"config:{key}", sources)


def _package(name: str) -> str:
    """A requirement's package name, without its version (``fastapi>=0.110`` → ``fastapi``)."""
    return re.split(r"[<>=!~\[;@ ]", name, maxsplit=1)[0].lower() or name.lower()


def _option(words: list[str], names: tuple[str, ...]) -> str | None:
    """The value of an option (``-m MSG``, ``--message=MSG``, ``-am MSG``)."""
    for index, word in enumerate(words):
        if word in names or (word.startswith("-") and not word.startswith("--") and word.endswith("m")):
            return words[index + 1] if index + 1 < len(words) else None
        for name in names:
            if word.startswith(name + "="):
                return word[len(name) + 1 :]
    return None
