"""What a run of messages did, read from its structure rather than guessed from its sentences.

Agent transcripts say plainly what happened: an assistant message of metadata kind
``tool_use`` names the tool (``tool_name``) and carries its input as ``Name {json}``; the
``tool`` message with the same ``tool_call_id`` is its result, marked ``is_error`` when
the tool failed (see ``server/agents/claude/transcript.py`` and ``server/agents/codex/transcript.py``).
From that alone this module lists the files written or edited (and how often), the
files read, the shell commands with their exit status, the failed calls with the first
line of their error, the todo list, and the user's own requests (never tool output, nor
context an agent injected). Both summarizers start from these facts: the extractive
one writes them as they are, the LLM one gets them beside the messages.

Messages written without metadata (an API client, a test) count as a tool call when an
assistant message with a ``tool_call_id`` reads ``Name {json object}``.

Same input, same facts: no set iteration, no clock.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from palimpsest.graph_schema.models import Message, Role
from palimpsest.scheduler import shell_commands

#: Tools whose input names a file they write, and what they do to it.
WRITE_TOOLS = {
    "Write": "created",
    "write_file": "created",
    "create_file": "created",
    "Edit": "edited",
    "MultiEdit": "edited",
    "NotebookEdit": "edited",
    "edit_file": "edited",
    "str_replace_editor": "edited",
    "str_replace_based_edit_tool": "edited",
    # Gemini CLI's edit, Cursor's, Windsurf's and Antigravity's write tools.
    "replace": "edited",
    "StrReplace": "edited",
    "code_action": "edited",
    "write_to_file": "created",
    "replace_file_content": "edited",
    "multi_replace_file_content": "edited",
}
#: Tools whose input names a file they only read.
READ_TOOLS = frozenset({"Read", "NotebookRead", "read_file", "view_file", "open_file"})
#: Tools that run a shell command.
SHELL_TOOLS = frozenset(
    {
        "Bash", "bash", "shell", "local_shell", "exec_command", "container.exec", "run_terminal_cmd",
        "run_shell_command", "Shell", "run_command", "execute_command", "shell_command",
    }
)  # fmt: skip
#: Shell programs that only print a file: their operands are files read.
_READ_COMMANDS = frozenset({"cat", "head", "tail", "nl", "less", "sed", "bat"})
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file", "target_file", "TargetFile", "AbsolutePath")
_COMMAND_CHARS = 120
_ERROR_CHARS = 160
_REQUEST_CHARS = 400
_CALL_RE = re.compile(r"\A([A-Za-z_][\w.:-]*) (\{.*\})\s*\Z", re.DOTALL)
#: Codex's code mode: one ``exec`` call runs a JavaScript cell that awaits tool calls, a shell
#: command as ``tools.exec_command({"cmd": ..., "workdir": ...})``, several at once under
#: ``Promise.all``. The object is JSON as the model writes it, or a literal with bare keys.
_SCRIPTED_CALL = re.compile(r"\btools\.exec_command\(\s*(?=\{)")
_SCRIPTED_CMD = re.compile(r'\A\{[^{}]*?["\']?\bcmd["\']?\s*:\s*("(?:[^"\\\n]|\\.)*")')
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.MULTILINE)
_EXIT_CODE = re.compile(r"\A\s*(?:Exit code:?|Process exited with code)\s*(-?\d+)", re.IGNORECASE)
_EXIT_ANYWHERE = re.compile(r"(?:Exit code:?|exited with code|<exit_code>)\s*(-?\d+)", re.IGNORECASE)
#: Gemini CLI's shell result closes on its status, after the output: ``Exit Code: 2`` then ``Process Group PGID: N``
#: (``Exit Code: (none)`` when it ended well); its call is marked a success whatever the code.
_EXIT_TRAILER = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
_TAGS = re.compile(r"</?[a-z_-]+>")
#: What a background task printed, in the envelope Claude Code's ``TaskOutput`` (``BashOutput`` before it) returns.
_TASK_OUTPUT = re.compile(r"<(output|stdout|stderr)>(.*?)</\1>", re.DOTALL)
_INJECTED_BLOCK = re.compile(r"<(system-reminder|command-[a-z]+|local-command-[a-z]+)>.*?</\1>", re.DOTALL)
_NOT_A_REQUEST = re.compile(r"\A\s*(?:\[Request interrupted|Caveat: The messages below|<)", re.IGNORECASE)
_ERROR_LINE = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception)\b|\berror(?:\[\w+\])?:|^FAILED\b|^E\s|fatal:|panic:|not found|denied|"
    r"No such file",
    re.IGNORECASE,
)
#: A compiler's error at a place in the code: ``Foo.swift:76:92: error: ...``, ``main.c:3: error:``, tsc's
#: ``app.ts(12,5): error TS2304: ...``.
_COMPILER_ERROR = re.compile(r"\S\.\w+(?::\d+){1,2}: (?:fatal )?error\b|\S\.\w+\(\d+,\d+\): error\b")
#: Lines around a tool's output, not of it: rules, pytest's ``=== ... ===``, the headers Claude Code and Codex put
#: above it (``Exit code 1``, ``Chunk ID: 7cba13``, ``Wall time: 0.0000 seconds``, ``Original token count: 41``).
_BANNER = re.compile(
    r"^[=\-_*#~\s]*$|^=+ .* =+$|^\s*(?:Exit code|Wall time|Output):?\s*\S*(?: seconds)?\s*$|"
    r"^\s*(?:Chunk ID|Original token count|Process exited with code|Process running with session ID):?\s*\S*\s*$|"
    r"^\s*Script (?:completed|failed|running with cell ID \d+)\s*$",
    re.IGNORECASE,
)
_TEST_STATE = re.compile(r"\b\d+ (?:passed|failed)\b[^\n]*|\b\d+ errors? in \d[^\n]*")
_BACKGROUND = re.compile(r"(?:^|\s)nohup\s|&\s*$|\b(?:uvicorn|runserver|npm run dev|serve|watch)\b")


@dataclass
class FileChange:
    """What the chunk did to one file: how it was changed first, how often in all."""

    action: str
    count: int = 1


@dataclass
class CommandRun:
    """One shell command and how it ended: ``exit N``, ``ok``, ``failed`` or ``no result yet``."""

    command: str
    status: str
    count: int = 1


@dataclass
class Failure:
    """A tool call whose result was an error, and the error's telling first line."""

    what: str
    error: str


@dataclass
class ToolCall:
    """A tool call read back from its message."""

    id: str | None
    name: str
    args: dict[str, Any]
    raw: str


#: Tools that keep the session's plan: the whole list a call (`todo_list`), or one task a call (`TaskList`).
TODO_TOOLS = frozenset({"TodoWrite", "update_plan", "TaskCreate", "TaskUpdate"})


@dataclass
class TaskList:
    """Claude Code's task list as its ``TaskCreate`` and ``TaskUpdate`` calls build it.

    Newer Claude Code keeps its plan with these instead of ``TodoWrite``: each call creates
    one task (``subject``), numbered #1, #2, ... in the order created, or changes one by
    ``taskId`` (``status``: pending, in_progress, completed, deleted). The list a new
    session needs is their sum, so it is kept here call by call.
    """

    tasks: dict[str, list[str]] = field(default_factory=dict)

    def apply(self, name: str, args: dict[str, Any]) -> list[tuple[str, bool]] | None:
        """The whole list after a task call, each item with whether it is done; None for another call."""
        subject, status = args.get("subject"), args.get("status")
        if name == "TaskCreate" and isinstance(subject, str):
            self.tasks[str(len(self.tasks) + 1)] = [subject, "pending"]
        elif name == "TaskUpdate" and str(args.get("taskId")) in self.tasks:
            task = self.tasks[str(args.get("taskId"))]
            task[0] = subject if isinstance(subject, str) else task[0]
            task[1] = status if isinstance(status, str) else task[1]
        else:
            return None
        return [(text, state in ("completed", "done")) for text, state in self.tasks.values() if state != "deleted"]


@dataclass
class SessionFacts:
    """What a run of messages did, as far as its structure says."""

    requests: list[str] = field(default_factory=list)
    modified: dict[str, FileChange] = field(default_factory=dict)
    read: list[str] = field(default_factory=list)
    commands: dict[str, CommandRun] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    todo_open: list[str] = field(default_factory=list)
    todo_done: list[str] = field(default_factory=list)
    tasks: TaskList = field(default_factory=TaskList)
    background: list[str] = field(default_factory=list)
    #: The latest test-run line of a shell result (``3 failed, 40 passed in 2.1s``).
    test_state: str | None = None
    tool_calls: int = 0
    #: Ids of the messages that are tool calls or tool results (the rest is conversation).
    structural_ids: set[str] = field(default_factory=set)


def clip(text: str, max_chars: int) -> str:
    """``text`` on one line, cut to ``max_chars`` characters, an ellipsis marking the cut."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return ""
    return text[: max_chars - 1].rstrip() + "…"


def tool_call(message: Message) -> ToolCall | None:
    """The tool call a message is, or None for conversation."""
    if message.role != Role.assistant:
        return None
    kind = message.metadata.get("kind")
    if kind not in (None, "tool_use") or (kind is None and message.tool_call_id is None):
        return None
    content = message.content
    name = message.metadata.get("tool_name")
    if not isinstance(name, str):
        match = _CALL_RE.match(content)
        if match is None:
            return None
        name = match.group(1)
    rest = content[len(name) :].strip() if content.startswith(name) else content
    if name == "exec" and not rest.startswith("{"):
        commands = scripted_commands(rest)
        if commands:
            return ToolCall(message.tool_call_id, "exec_command", {"cmd": "\n".join(commands)}, rest)
    args: dict[str, Any] = {}
    if rest.startswith("{"):
        try:
            decoded = json.loads(rest)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            args = decoded
        elif kind is None:
            return None
    return ToolCall(message.tool_call_id, name, args, rest)


def scripted_commands(script: str) -> list[str]:
    """The shell commands a Codex code-mode cell runs, in the order it names them.

    Read as one shell call whose lines they are, so a commit or a push made from a cell
    counts as one made by a plain ``exec_command``.
    """
    decoder = json.JSONDecoder()
    commands: list[str] = []
    for found in _SCRIPTED_CALL.finditer(script):
        try:
            value, _ = decoder.raw_decode(script, found.end())
        except ValueError:
            literal = _SCRIPTED_CMD.match(script[found.end() : found.end() + 4000])
            value = {"cmd": json.loads(literal.group(1))} if literal else None
        command = value.get("cmd") if isinstance(value, dict) else None
        if isinstance(command, str) and command.strip():
            commands.append(command)
    return commands


#: Metadata flags of messages that are not the session's own work: context an agent
#: injected (``meta``: Claude Code; ``injected``: Codex), a turn that never reached the
#: model (``synthetic``; Claude Code's ``api_error``), a compaction's summary, a subagent's line.
NOT_WORK_FLAGS = ("meta", "injected", "synthetic", "api_error", "compact_summary", "sidechain")
#: The model Claude Code names for a reply it wrote itself ("Not logged in", a network error).
SYNTHETIC_MODEL = "<synthetic>"


def never_reached_model(message: Message) -> bool:
    """Whether a message is a turn the agent wrote itself because the model was never reached."""
    metadata = message.metadata
    return bool(metadata.get("synthetic") or metadata.get("api_error")) or metadata.get("model") == SYNTHETIC_MODEL


def is_not_work(message: Message) -> bool:
    """Whether a message is kept but is no part of the session's work (see `NOT_WORK_FLAGS`)."""
    return any(message.metadata.get(flag) for flag in NOT_WORK_FLAGS) or never_reached_model(message)


def is_request(message: Message) -> bool:
    """Whether a message is the user's own words: not a tool result, nor context an agent injected."""
    if message.role != Role.user or message.metadata.get("kind") not in (None, "text"):
        return False
    return not is_not_work(message) and not _NOT_A_REQUEST.match(message.content)


def request_text(message: Message) -> str:
    """A request without the blocks an agent wraps around it (system reminders, slash-command echoes)."""
    return clip(_INJECTED_BLOCK.sub(" ", message.content), _REQUEST_CHARS)


def extract_facts(messages: Sequence[Message]) -> SessionFacts:
    """The structural facts of ``messages`` (oldest first)."""
    facts = SessionFacts()
    calls: dict[str, tuple[ToolCall, str | None]] = {}
    for message in messages:
        call = tool_call(message)
        if call is not None:
            facts.tool_calls += 1
            facts.structural_ids.add(message.id)
            command = _record_call(facts, call)
            if call.id is not None:
                calls[call.id] = (call, command)
        elif message.role == Role.tool or message.metadata.get("kind") == "tool_result":
            facts.structural_ids.add(message.id)
            found = calls.get(message.tool_call_id or "")
            if found is not None:
                _record_result(facts, found[0], found[1], message)
        elif is_request(message):
            text = request_text(message)
            if text:
                facts.requests.append(text)
    return facts


def _record_call(facts: SessionFacts, call: ToolCall) -> str | None:
    """Note what a call does; returns the shell command it runs, if any."""
    name, args = call.name, call.args
    if name in WRITE_TOOLS:
        path = path_arg(args)
        if path:
            action = "created" if args.get("command") == "create" else WRITE_TOOLS[name]
            _modified(facts, path, action)
        return None
    if name in READ_TOOLS:
        path = path_arg(args)
        if path:
            _read(facts, path)
        return None
    if name == "apply_patch":
        _patched(facts, call.raw if not args else str(args.get("input", "")))
        return None
    todos = todo_list(name, args)
    todos = facts.tasks.apply(name, args) if todos is None else todos
    if todos is not None:
        facts.todo_open = [clip(text, _COMMAND_CHARS) for text, done in todos if not done]
        facts.todo_done = [clip(text, _COMMAND_CHARS) for text, done in todos if done]
        return None
    if name in SHELL_TOOLS:
        command = shell_command(args)
        if command is None:
            return None
        if "*** Begin Patch" in command:
            _patched(facts, command)
            return None
        words = _words(command)
        if words and words[0] in _READ_COMMANDS:
            for word in words[1:]:
                if not word.startswith("-") and ("." in word or "/" in word) and not re.match(r"^\d", word):
                    _read(facts, word)
        shown = clip(command.splitlines()[0] + (" …" if "\n" in command.strip() else ""), _COMMAND_CHARS)
        known = facts.commands.pop(shown, None)
        facts.commands[shown] = CommandRun(shown, "no result yet", (known.count + 1) if known else 1)
        if args.get("run_in_background") is True or _BACKGROUND.search(command):
            facts.background.append(f"`{shown}`")
        return shown
    return None


def todo_list(name: str, args: dict[str, Any]) -> list[tuple[str, bool]] | None:
    """The whole todo list a call writes, each item with whether it is done; None for another call.

    Claude Code's ``TodoWrite`` (``todos``: ``content``, ``status``) and Codex's
    ``update_plan`` (``plan``: ``step``, ``status``) both send the whole list each time,
    so the last call is the list's last state.
    """
    keys = {"TodoWrite": ("todos", "content"), "update_plan": ("plan", "step")}.get(name)
    if keys is None or not isinstance(args.get(keys[0]), list):
        return None
    return [
        (item[keys[1]], item.get("status") in ("completed", "done"))
        for item in args[keys[0]]
        if isinstance(item, dict) and isinstance(item.get(keys[1]), str)
    ]


def _record_result(facts: SessionFacts, call: ToolCall, command: str | None, message: Message) -> None:
    """Note how a call ended: a command's exit status, a failure's first line, the latest test count."""
    exit_code, body, failed = outcome(message, command)
    if command is not None:
        run = facts.commands[command]
        if exit_code is not None:
            run.status = f"exit {exit_code}"
        elif f"`{command}`" in facts.background and not failed:
            run.status = "running in the background"
        else:
            run.status = "failed" if failed else "ok"
        tail = body[-2000:]
        states = _TEST_STATE.findall(tail)
        if states:
            facts.test_state = clip(states[-1].strip(" =*"), _COMMAND_CHARS)
    if failed:
        target = f"`{command}`" if command is not None else _describe_target(call)
        status = f" ({facts.commands[command].status})" if command is not None else ""
        facts.failures.append(Failure(f"{call.name} {target}{status}".strip(), first_error_line(body)))


def first_error_line(text: str) -> str:
    """The line of an error output that says what went wrong: the first compiler error at a place in the code, else
    the first naming an error, else the first.

    A build's driver often reports its own failure first (``error: emit-module command
    failed with exit code 1``); the error that made it fail names the file and line.
    """
    lines = [line.strip() for line in _TAGS.sub("", text[:20000]).splitlines()]
    lines = [line for line in lines if line and not _BANNER.match(line)]
    if not lines:
        return "no output"
    located = (line for line in lines if _COMPILER_ERROR.search(line))
    chosen = next(located, None) or next((line for line in lines if _ERROR_LINE.search(line)), lines[0])
    return clip(chosen, _ERROR_CHARS)


#: A test runner's count line: pytest's ``3 failed, 202 passed in 1.2s``, bun's `` 1244 pass`` and `` 0 fail``,
#: jest's ``Tests: 1 failed, 9 passed``, cargo's ``test result: ok. 12 passed; 0 failed``.
_PASSED = re.compile(r"(?<![\w.])(\d+) (?:passed|pass|passing)\b")
_FAILED = re.compile(r"(?<![\w.])(\d+) (?:failed|fail|failing|failures)\b")
#: How an output starts when the command behind a filter failed: ``error: unrecognized subcommand 'bun'``.
_FAILED_START = re.compile(
    r"^(?:error|fatal|Error|FATAL|ERROR)(?:\[\w+\])?:|^(?:\S+: )?command not found\b|: command not found$"
)
#: A line a wrapper prints for a command that failed while it exits 0 itself (``rtk``: ``FAILED: git commit``).
_FAILED_MARK = re.compile(r"^FAILED: \S")
#: Tally lines are short; a longer line naming counts is a log line, not the summary.
_TALLY_CHARS = 160


def test_tally(output: str) -> str | None:
    """What a test run's summary counts, in our words (``1244 passed, 0 failed``); None when it shows none.

    Read from the last lines of the output, where every runner prints its summary.
    """
    passed = failed = None
    for line in output[-6000:].splitlines()[-40:]:
        if len(line) > _TALLY_CHARS:
            continue
        for found in _PASSED.finditer(line):
            passed = found.group(1)
        for found in _FAILED.finditer(line):
            failed = found.group(1)
    if passed is None and failed is None:
        return None
    return ", ".join(part for part in (passed and f"{passed} passed", failed and f"{failed} failed") if part)


def hidden_failure(command: str, output: str) -> str | None:
    """The error of a command that failed without its exit status saying so, else None.

    A command piped into a filter (``bun run test 2>&1 | tail -20``) exits with the filter's
    status, and a wrapper such as ``rtk`` can print ``FAILED: git commit`` and exit 0: the
    output is then all that tells. Behind a filter, an output that starts with an error
    (``error: unrecognized subcommand 'bun'``) or a test summary counting failures is a failure;
    a wrapper's ``FAILED:`` line among the first lines is one whatever the command.
    """
    lines = [line.strip() for line in _TAGS.sub("", output[:20000]).splitlines()]
    lines = [line for line in lines if line and not _BANNER.match(line)]
    marked = next((line for line in lines[:6] if _FAILED_MARK.match(line)), None)
    if marked is not None:
        return clip(marked, _ERROR_CHARS)
    if not lines or not shell_commands.exit_hidden(command):
        return None
    if _FAILED_START.search(lines[0]):
        return first_error_line(output)
    tally = test_tally(output)
    failed = _FAILED.search(tally or "")
    if failed is not None and int(failed.group(1)) > 0:
        error = first_error_line(output)
        return clip(f"{tally}: {error}" if _ERROR_LINE.search(error) else str(tally), _ERROR_CHARS)
    return None


def exit_status(content: str) -> tuple[int | None, str]:
    """The exit code a shell result states (Codex's JSON, an ``Exit code N`` header, a task's ``<exit_code>``) and its
    output text."""
    stripped = content.lstrip()
    if stripped.startswith("{"):
        try:
            decoded = json.loads(stripped)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            meta = decoded.get("metadata")
            output = decoded.get("output")
            text = output if isinstance(output, str) else content
            if isinstance(meta, dict) and isinstance(meta.get("exit_code"), int):
                return meta["exit_code"], text
            return None, text
    match = _EXIT_CODE.match(content) or _EXIT_ANYWHERE.search(content[:300]) or _EXIT_TRAILER.search(content[-400:])
    code = int(match.group(1)) if match else None
    if stripped.startswith(("<retrieval_status>", "<status>")):  # Claude Code's poll of a background task
        return code, "\n".join(part.strip("\n") for _, part in _TASK_OUTPUT.findall(content))
    return code, content


def outcome(result: Message, command: str | None) -> tuple[int | None, str, bool]:
    """A call's exit code, its output text, and whether it failed: an error mark or a non-zero exit, unless the
    command ended by the limit or signal its own line set (`shell_commands.stopped_as_meant`)."""
    code, body = exit_status(result.content)
    failed = result.metadata.get("is_error") is True or (code is not None and code != 0)
    if failed and command is not None and shell_commands.stopped_as_meant(command, code):
        failed = False
    return code, body, failed


def path_arg(args: dict[str, Any]) -> str | None:
    """The file a call's input names, if any."""
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _describe_target(call: ToolCall) -> str:
    path = path_arg(call.args)
    if path:
        return path
    for key in ("pattern", "url", "query", "description"):
        value = call.args.get(key)
        if isinstance(value, str) and value:
            return clip(value, _COMMAND_CHARS // 2)
    return ""


def _modified(facts: SessionFacts, path: str, action: str) -> None:
    known = facts.modified.get(path)
    if known is None:
        facts.modified[path] = FileChange(action)
    else:
        known.count += 1
        if action == "deleted":
            known.action = "deleted"


def _read(facts: SessionFacts, path: str) -> None:
    if path not in facts.read:
        facts.read.append(path)


def _patched(facts: SessionFacts, patch: str) -> None:
    actions = {"Add": "created", "Update": "edited", "Delete": "deleted"}
    for verb, path in _PATCH_FILE.findall(patch):
        _modified(facts, path.strip(), actions[verb])


def shell_command(args: dict[str, Any]) -> str | None:
    """The command line a shell call runs (``bash -lc`` unwrapped)."""
    value: Any = args.get("command", args.get("cmd", args.get("CommandLine")))
    if value is None and isinstance(args.get("action"), dict):
        value = args["action"].get("command")
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        if len(value) >= 3 and value[0] in ("bash", "sh", "zsh", "/bin/bash", "/bin/sh") and value[1] in ("-c", "-lc"):
            return value[2]
        return shlex.join(value)
    return value if isinstance(value, str) and value.strip() else None


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command.splitlines()[0])
    except ValueError:
        return command.split()


def render_facts(facts: SessionFacts) -> str:
    """The facts as plain lines, for the LLM prompt: what is certain before any reading."""
    lines: list[str] = []
    if facts.requests:
        lines.append("User requests: " + " | ".join(clip(r, 200) for r in facts.requests))
    if facts.modified:
        lines.append("Files modified: " + ", ".join(describe_change(p, c) for p, c in facts.modified.items()))
    if facts.read:
        lines.append("Files read: " + ", ".join(facts.read))
    if facts.commands:
        lines.append("Commands: " + "; ".join(describe_command(run) for run in facts.commands.values()))
    if facts.failures:
        lines.append("Failed tool calls: " + "; ".join(f"{f.what}: {f.error}" for f in facts.failures))
    if facts.test_state:
        lines.append(f"Latest test run: {facts.test_state}")
    if facts.todo_open:
        lines.append("Open todos: " + "; ".join(facts.todo_open))
    return "\n".join(lines)


def describe_change(path: str, change: FileChange) -> str:
    """``path (edited ×3)``: one file of the ``Files modified`` section."""
    times = f" ×{change.count}" if change.count > 1 else ""
    return f"{path} ({change.action}{times})"


def describe_command(run: CommandRun) -> str:
    """```cmd` → exit 1``: one line of the ``Commands`` section."""
    times = f" (×{run.count})" if run.count > 1 else ""
    return f"`{run.command}` → {run.status}{times}"
