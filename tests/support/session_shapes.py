"""Sessions written line by line in the shapes Claude Code, Codex and Gemini CLI really write.

Nothing here is copied from a capture; each shape is taken from one, named where it is built:

- Claude Code 2.x transcripts (JSONL), as in the sessions entireio/cli publishes on its
  ``entire/checkpoints/v1`` branch (MIT): a rejected tool call's result, ``is_error``, "The
  user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was
  a file edit, the new_string was NOT written to the file). To tell you how to proceed, the
  user said:\\nREASON" (checkpoint b0/be9accda39), or "... STOP what you are doing and wait
  for the user to tell you how to proceed." followed by the user line ``[Request interrupted
  by user for tool use]`` (67/ea786b178e); ``[Request interrupted by user]`` (cd/95adddad32);
  a slash command as ``<command-message>NAME</command-message>\\n<command-name>/NAME</command-name>
  \\n<command-args>ARGS</command-args>`` whose skill prompt follows as an ``isMeta`` user line
  (d3/7d736cbc10, 8e/0a64736bc7); ``/exit`` answered by ``<local-command-stdout>`` after the
  ``isMeta`` caveat line (67/ea786b178e); a hook's "Operation stopped by hook: ..." user line
  (8c/fa910f8ef9); ``AskUserQuestion``'s result "User has answered your questions:
  \\"Q\\"=\\"A\\". You can now continue with the user's answers in mind." (d3/7d736cbc10); a shell
  command sent to the background (``run_in_background``) answered "Command running in
  background with ID: ID. Output is being written to: PATH", its end told later by a queued
  line and a user line (``origin.kind`` ``task-notification``) ``<task-notification>`` with
  ``<task-id>``, ``<tool-use-id>``, ``<output-file>``, ``<status>completed</status>`` and
  ``<summary>Background command "CMD" completed (exit code 0)</summary>`` (aunshx/watchtower's
  branch, checkpoint 22/f034d0c835); ``failed with exit code N`` and ``killed`` / ``was
  stopped`` as transcript readers' tests give them.
- Codex rollouts: the ``<turn_aborted>`` user message with ``<turn_id>`` and ``<reason>``
  (openai/codex ``codex-rs`` tests), the older ``event_msg`` ``{"type": "turn_aborted",
  "reason": "interrupted"}`` (session-file notes of Codex 0.6x rollouts), the output "exec
  command rejected by user" of a denied command (``codex-rs`` ``ReviewDecision::Denied``),
  ``update_plan``'s ``plan`` of ``step`` / ``status``, ``shell`` outputs as ``{"output",
  "metadata": {"exit_code"}}``. Codex 0.140's unified exec (rollouts on the
  ``entire/checkpoints/v1`` branches of EntityProcess/agentv and
  blackgirlbytes/planetfall-seed-signalkit): ``exec_command`` with ``{"cmd", "workdir"}``,
  its output a text headed ``Chunk ID`` / ``Wall time`` / ``Process exited with code N`` /
  ``Original token count`` / ``Output:``, or ``Process running with session ID N`` for a
  command still running, which ``write_stdin`` (``{"session_id", "chars"}``, ``"\u0003"`` to
  stop it) polls until it has exited. Codex 0.145's code mode (a rollout on the ``entire/checkpoints/v1``
  branch of Standard-Syntax/basic): a ``custom_tool_call`` named ``exec`` whose ``input`` is a
  JavaScript cell, ``const r = await tools.exec_command({"cmd": ..., "workdir": ...});
  text(r.output);`` or several under ``Promise.all``, its output two ``input_text`` parts,
  ``Script completed\nWall time 0.1 seconds\nOutput:\n`` then the text; ``Script failed`` heads a
  cell that threw (the wording as Codex transcript readers' tests give it); ``apply_patch``
  as a ``custom_tool_call`` whose output reads ``Exit code: 0`` / ``Wall time`` / ``Output:``
  / ``Success. Updated the following files:`` and one ``A`` or ``M`` line a file; a cell still
  running says ``Script running with cell ID N``, and ``wait`` (``{"cell_id", "yield_time_ms",
  "max_tokens"}``) brings its end (transcript tools' tests, e.g. a cell of ``npx jest``).
- Gemini CLI recordings of one JSON document (``session-*.json``: ``sessionId``,
  ``projectHash``, ``startTime``, ``lastUpdated``, ``messages``), records ``user`` /
  ``gemini`` with ``toolCalls`` (``status``, ``result`` of ``functionResponse``), the
  automatic "System: Please continue." user record and an ``info`` record "Request
  cancelled." (entireio/cli checkpoints 51/3fab7adf0b, ab/2b9748b105; Gemini CLI's own
  interruption notice).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from palimpsest.graph_schema.models import Message
from palimpsest.server.agents.claude.transcript import parse_claude_code
from palimpsest.server.cli.main import app
from tests.support.agent_sessions import stored

CWD = "/home/grace/src/ledger"
REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
    "the new_string was NOT written to the file). "
)
STOP = "STOP what you are doing and wait for the user to tell you how to proceed."


class Claude:
    """A Claude Code transcript written line by line, each line as Claude Code 2.x writes it."""

    def __init__(self, folder: Path, session: str, *, day: str = "2025-06-14", branch: str = "main") -> None:
        self.path = folder / f"{session}.jsonl"
        self.session, self.day, self.branch = session, day, branch
        self.parent: str | None = None
        self.count = 0

    def line(self, kind: str, content: Any, **extra: Any) -> None:
        self.count += 1
        uuid = f"{self.session[:8]}-{self.count:04d}"
        message: dict[str, Any] = {"role": kind, "content": content}
        if kind == "assistant":
            message = {"id": f"msg_{uuid}", "type": "message", "model": "claude-opus-4-5", **message}
        record = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": CWD,
            "sessionId": self.session,
            "version": "2.1.9",
            "gitBranch": self.branch,
            "type": kind,
            "message": message,
            "uuid": uuid,
            "timestamp": f"{self.day}T10:{self.count // 60:02d}:{self.count % 60:02d}.000Z",
            **extra,
        }
        self.parent = uuid
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    def ask(self, text: str) -> None:
        self.line("user", text)

    def say(self, text: str) -> None:
        self.line("assistant", [{"type": "text", "text": text}])

    def call(self, name: str, args: dict[str, Any]) -> str:
        """A tool call without its result yet; its id."""
        call = f"toolu_{self.session[:4]}{self.count:04d}"
        self.line("assistant", [{"type": "tool_use", "id": call, "name": name, "input": args}])
        return call

    def result(self, call: str, text: str, *, error: bool = False) -> None:
        block: dict[str, Any] = {"tool_use_id": call, "type": "tool_result", "content": text}
        if error:
            block["is_error"] = True
        self.line("user", [block])

    def tool(self, name: str, args: dict[str, Any], text: str, *, error: bool = False) -> None:
        self.result(self.call(name, args), text, error=error)

    def reject(self, name: str, args: dict[str, Any], reason: str | None = None) -> None:
        """A call the user rejected: with a reason, or stopped (the interruption line follows)."""
        said = f"To tell you how to proceed, the user said:\n{reason}" if reason else STOP
        self.tool(name, args, REJECTED + said, error=True)
        if reason is None:
            self.line("user", [{"type": "text", "text": "[Request interrupted by user for tool use]"}])

    def interrupt(self) -> None:
        self.line("user", [{"type": "text", "text": "[Request interrupted by user]"}])

    def command(self, name: str, args: str = "", prompt: str | None = None) -> None:
        """A slash command, and the prompt its skill expands to (an injected line)."""
        self.ask(
            f"<command-message>{name}</command-message>\n<command-name>/{name}</command-name>\n"
            f"<command-args>{args}</command-args>"
        )
        if prompt is not None:
            self.line("user", [{"type": "text", "text": prompt}], isMeta=True)

    def local(self, name: str, stdout: str | None, args: str = "") -> None:
        """A local command (``/exit``, ``/add-dir DIR``): the caveat line, the command, its output (if any)."""
        caveat = (
            "<local-command-caveat>Caveat: The messages below were generated by the user while running local "
            "commands. DO NOT respond to these messages or otherwise consider them in your response unless the "
            "user explicitly asks you to.</local-command-caveat>"
        )
        self.line("user", caveat, isMeta=True)
        self.ask(
            f"<command-name>/{name}</command-name>\n<command-message>{name}</command-message>\n<command-args>{args}</command-args>"
        )
        if stdout is not None:
            self.ask(f"<local-command-stdout>{stdout}</local-command-stdout>")

    def question(self, question: str, options: list[str], answer: str) -> None:
        args = {"questions": [{"question": question, "options": [{"label": label} for label in options]}]}
        self.tool(
            "AskUserQuestion",
            args,
            f'User has answered your questions: "{question}"="{answer}". '
            "You can now continue with the user's answers in mind.",
        )

    def todos(self, items: list[tuple[str, str]]) -> None:
        todos = [{"content": text, "status": status, "activeForm": text} for text, status in items]
        self.tool("TodoWrite", {"todos": todos}, "Todos have been modified successfully.")

    def bash(self, command: str, output: str, *, error: bool = False, description: str = "") -> None:
        self.tool("Bash", {"command": command, "description": description}, output, error=error)

    def background(self, command: str, task: str) -> str:
        """A shell command sent to the background (``run_in_background``); the call's id."""
        call = self.call("Bash", {"command": command, "run_in_background": True})
        output = f"/tmp/claude-1000/-home-grace-src-ledger/{self.session}/tasks/{task}.output"
        self.result(call, f"Command running in background with ID: {task}. Output is being written to: {output}")
        return call

    def task_ended(self, task: str, call: str, status: str, summary: str) -> None:
        """Claude Code's notice that a background task ended: a queued line, then the user line the agent reads."""
        notice = (
            f"<task-notification>\n<task-id>{task}</task-id>\n<tool-use-id>{call}</tool-use-id>\n"
            f"<output-file>/tmp/claude-1000/-home-grace-src-ledger/{self.session}/tasks/{task}.output</output-file>\n"
            f"<status>{status}</status>\n<summary>{summary}</summary>\n</task-notification>"
        )
        with self.path.open("a", encoding="utf-8") as handle:
            queued = {"type": "queue-operation", "operation": "enqueue", "sessionId": self.session, "content": notice}
            handle.write(json.dumps(queued) + "\n")
        self.line("user", notice, origin={"kind": "task-notification"})

    def store(self, url: str) -> None:
        """Sent as Claude Code's ``Stop`` hook would."""
        stdin = {"session_id": self.session, "transcript_path": str(self.path), "cwd": CWD, "hook_event_name": "Stop"}
        result = CliRunner().invoke(app, ["hook", "claude", "--store", url], input=json.dumps(stdin))
        assert result.exit_code == 0, result.output


def memory(url: str, agent: str = "claude", session: str = "new-session", **env: str) -> str:
    """What a new session of the project is handed at start (``SessionStart``), as the agent reads it."""
    stdin = {"session_id": session, "transcript_path": f"/nowhere/{session}.jsonl", "cwd": CWD}
    stdin |= {"hook_event_name": "SessionStart", "source": "startup"}
    result = CliRunner().invoke(
        app, ["hook", agent, "--store", url], input=json.dumps(stdin), env={"PALIMPSEST_STORE": None, **env}
    )
    assert result.exit_code == 0, result.output
    if not result.stdout.strip():
        return ""
    text: str = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    return text


def cli(url: str, *args: str, **env: str) -> str:
    result = CliRunner().invoke(app, [*args, "--store", url], env={"PALIMPSEST_STORE": None, **env})
    assert result.exit_code == 0, result.output
    return result.stdout


class Codex:
    """A Codex rollout written line by line."""

    def __init__(
        self, session: str = "019e2a41-5c3b-7d20-a1f4-3e9b8c7d6a5f", *, git: dict[str, str] | None = None
    ) -> None:
        """``git``: what Codex records of a folder that is a repository (``commit_hash``, ``branch``, ...)."""
        self.session = session
        self.lines: list[dict[str, Any]] = []
        meta = {"id": session, "timestamp": "2025-11-22T21:45:35.000Z", "cwd": CWD, "originator": "codex_cli_rs"}
        self.add("session_meta", {**meta, "git": git} if git is not None else meta)

    def add(self, kind: str, payload: dict[str, Any]) -> None:
        second = len(self.lines)
        self.lines.append(
            {
                "timestamp": f"2025-11-22T21:{46 + second // 60:02d}:{second % 60:02d}.000Z",
                "type": kind,
                "payload": payload,
            }
        )

    def message(self, role: str, text: str) -> None:
        part = "output_text" if role == "assistant" else "input_text"
        self.add("response_item", {"type": "message", "role": role, "content": [{"type": part, "text": text}]})

    def shell(self, call: str, command: str, output: str, code: int | None) -> None:
        arguments = json.dumps({"command": ["bash", "-lc", command]})
        self.add("response_item", {"type": "function_call", "name": "shell", "arguments": arguments, "call_id": call})
        body = output if code is None else json.dumps({"output": output, "metadata": {"exit_code": code}})
        self.add("response_item", {"type": "function_call_output", "call_id": call, "output": body})

    def exec(self, call: str, command: str, output: str, code: int | None, *, session: int | None = None) -> None:
        """An ``exec_command`` and its output: exited with ``code``, or still running as exec ``session``."""
        arguments = json.dumps({"cmd": command, "workdir": CWD, "yield_time_ms": 10000})
        self.add(
            "response_item", {"type": "function_call", "name": "exec_command", "arguments": arguments, "call_id": call}
        )
        self.add(
            "response_item",
            {"type": "function_call_output", "call_id": call, "output": _exec_output(output, code, session)},
        )

    def poll(self, call: str, session: int, output: str, code: int | None, *, chars: str = "") -> None:
        """A ``write_stdin`` to a running exec session, and what it saw (exited with ``code``, or still running)."""
        arguments = json.dumps({"session_id": session, "chars": chars, "yield_time_ms": 30000})
        self.add(
            "response_item", {"type": "function_call", "name": "write_stdin", "arguments": arguments, "call_id": call}
        )
        still = session if code is None else None
        self.add(
            "response_item",
            {"type": "function_call_output", "call_id": call, "output": _exec_output(output, code, still)},
        )

    def script(
        self, call: str, commands: list[str], output: str, *, failed: bool = False, cell: int | None = None
    ) -> None:
        """A code-mode ``exec`` cell awaiting ``tools.exec_command`` for each command, and what it printed.

        With ``cell`` the cell was still running when the call returned (``wait`` on it brings the rest).
        """
        awaited = [f"tools.exec_command({json.dumps({'cmd': command, 'workdir': CWD})})" for command in commands]
        source = (
            f"const r = await {awaited[0]};\ntext(r.output);\n"
            if len(awaited) == 1
            else "const results = await Promise.all([\n  " + ",\n  ".join(awaited) + "\n]);\n"
        )
        self.add("response_item", {"type": "custom_tool_call", "name": "exec", "call_id": call, "input": source})
        state = f"running with cell ID {cell}" if cell is not None else "failed" if failed else "completed"
        head = f"Script {state}\nWall time 0.1 seconds\nOutput:\n"
        parts = [{"type": "input_text", "text": head}, {"type": "input_text", "text": output}]
        self.add("response_item", {"type": "custom_tool_call_output", "call_id": call, "output": parts})

    def wait(self, call: str, cell: int, output: str, *, failed: bool = False) -> None:
        """Code mode's ``wait`` on a cell still running, and the cell's end."""
        arguments = json.dumps({"cell_id": str(cell), "yield_time_ms": 10000, "max_tokens": 30000})
        self.add("response_item", {"type": "function_call", "name": "wait", "arguments": arguments, "call_id": call})
        head = f"Script {'failed' if failed else 'completed'}\nWall time 8.0 seconds\nOutput:\n"
        parts = [{"type": "input_text", "text": head}, {"type": "input_text", "text": output}]
        self.add("response_item", {"type": "function_call_output", "call_id": call, "output": parts})

    def patch(self, call: str, added: list[str]) -> None:
        """A code-mode ``apply_patch`` adding files, and its success."""
        body = "".join(f"*** Add File: {CWD}/{name}\n+{name}\n" for name in added)
        self.add(
            "response_item",
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "call_id": call,
                "input": f"*** Begin Patch\n{body}*** End Patch\n",
            },
        )
        listed = "".join(f"A {CWD}/{name}\n" for name in added)
        result = f"Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\n{listed}"
        self.add("response_item", {"type": "custom_tool_call_output", "call_id": call, "output": result})

    def plan(self, call: str, steps: list[tuple[str, str]]) -> None:
        plan = [{"step": step, "status": status} for step, status in steps]
        arguments = json.dumps({"plan": plan})
        self.add(
            "response_item", {"type": "function_call", "name": "update_plan", "arguments": arguments, "call_id": call}
        )
        self.add("response_item", {"type": "function_call_output", "call_id": call, "output": "Plan updated"})

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines), encoding="utf-8")
        return path


def _exec_output(output: str, code: int | None, session: int | None) -> str:
    """Codex's unified exec output text: its header lines, then the command's output."""
    state = f"Process exited with code {code}" if session is None else f"Process running with session ID {session}"
    return f"Chunk ID: 5a1f0c\nWall time: 0.4000 seconds\n{state}\nOriginal token count: 12\nOutput:\n{output}"


def gemini_recording(session: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """A Gemini CLI recording of one JSON document (``session-*.json``)."""
    return {
        "sessionId": session,
        "projectHash": "7e8989f71805c3147f6be9b7a71de2a156f8face69f9380beeeb8a777414f21c",
        "startTime": records[0]["timestamp"],
        "lastUpdated": records[-1]["timestamp"],
        "messages": records,
    }


def gemini_call(call: str, name: str, args: dict[str, Any], output: str, status: str, at: str) -> dict[str, Any]:
    """One of a ``gemini`` record's ``toolCalls``, with its result."""
    response = {"functionResponse": {"id": call, "name": name, "response": {"output": output}}}
    return {"id": call, "name": name, "args": args, "result": [response], "status": status, "timestamp": at}


def messages_of(session: Claude) -> list[Message]:
    """The messages a Claude Code session stores, read by the real parser (no store)."""
    transcript = parse_claude_code(session.path, partition="claude")
    return stored([message for batch in transcript.batches for message in batch.messages], partition="claude")
