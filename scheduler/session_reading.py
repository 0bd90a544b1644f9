"""A session read as a conversation: each thing the user asked, what was done for it, how it truly ended.

The stored messages are agent-neutral (roles user, assistant, tool; metadata ``kind``
``text`` / ``tool_use`` / ``tool_result`` / ``thinking``, ``tool_name``, ``is_error`` and
the flags of `session_facts.NOT_WORK_FLAGS`); the few moments each agent marks its own way
(an interruption, a rejected call, the user's words in a tool result, local-command noise)
are read by `agent_marks`. A rejected call did nothing: a file it would have written is
not changed, and the reason the user gave with it is a request of its own.

The distinct requests (`Ask`) are the user's own messages, with these rules:

- not a request: context an agent injected or a turn that never reached the model
  (`session_facts.is_not_work`), local-command noise (``<local-command-stdout>``, the
  local-command caveat, a slash command with neither arguments nor an expanded prompt, such
  as ``/exit`` or ``/mcp``), a hook's own message ("Operation stopped by hook: ..."), an
  interruption marker, and acknowledgements ("ok", "thanks", "continue", "Please continue.");
- a slash command or skill is its name with its arguments (``/workflows:plan read the
  file ...``), or, without arguments, its name and the first sentence of the prompt it
  expands to ("/pr: Generate a PR title and description ...");
- a bare choice ("1", "3, but enabled by default") names the option it chose, read from
  the reply it answers; a bare yes to an offer ("Would you like me to also update the test
  harness?" - "yes") names what was offered;
- a command the user ran in the agent's shell mode (Claude Code's ``!cmd``) that the agent
  acted on before any new prompt is a request: "ran `cmd`, which failed: ERROR";
- the same text sent again (after an interruption, a hook warning) is one request;
- a long request keeps its first words and, when it quotes an error further down, that error.

What was done for a request is read from the calls that followed it, up to the next
request: files written (by write tools or by the shell: `shell_commands.effects`), commits,
branches, checks and their last result, subagent tasks. The end state of the session is that
of its last request: **interrupted** or **tool_rejected** when that is the last thing that
happened; **failed** when an error the agent showed instead of going on is (an API error:
`agent_marks.agent_error`; the request stays open); **stopped_mid_work** when a usage limit
or quota hit cut the agent off (`agent_marks.USAGE_LIMIT`: no failure of the work), when a
call still had no result, or tools ran after the last reply ("cut off or interrupted": with
no interruption mark, the transcript just ends there; an interrupted or cut-off session
also says what its last reply announced it was about to do, and names the pending call
that could change something, not a ``git status`` beside it), or when the last reply came
while a job it sent to the background (no server: `shell_commands.serves`) still ran: a
job's end is read from its poll (Codex's ``write_stdin``, Claude Code's ``TaskOutput``) or
Claude Code's ``<task-notification>``, and a job the agent stopped has no outcome;
otherwise **failed** when a check or state-changing command of it last failed (a check
the turn committed, tagged or pushed past does not count: it stays open),
**completed** when it changed something, **answered** when it only replied. A last call
that asks the user (``AskUserQuestion``) and has no answer is no cut-off: the ending names
the question, which stays open. A command whose exit status the agent never saw (piped
into ``tail``, or run by a wrapper that prints ``FAILED:``) is judged by its output
(`session_facts.hidden_failure`). The conclusion
is the last reply's (`reply_text.conclusion`: whole sentences, never a preface), with the
replies before it in that request when the last one says little.

Same input, same reading: no clock, no set iteration.
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from palimpsest.graph_schema.models import Message, Role
from palimpsest.scheduler import agent_marks as marks
from palimpsest.scheduler import reply_text, shell_commands
from palimpsest.scheduler.git_progress import (
    GIT_STATE,
    GIT_WORDS,
    NOT_PUSHED,
    PUSH_WORDS,
    GitProgress,
    said_left_out,
)
from palimpsest.scheduler.session_facts import (
    READ_TOOLS,
    SHELL_TOOLS,
    TODO_TOOLS,
    WRITE_TOOLS,
    TaskList,
    ToolCall,
    clip,
    first_error_line,
    hidden_failure,
    is_not_work,
    outcome,
    path_arg,
    shell_command,
    todo_list,
    tool_call,
)

EndKind = Literal["completed", "answered", "failed", "interrupted", "tool_rejected", "stopped_mid_work"]

#: Longest conclusion of a session's last reply, in characters.
CONCLUSION_CHARS = 420
#: Longest conclusion of a session given little room.
BRIEF_CHARS = 170
#: Longest "it was about to" of a session cut off or interrupted (its last reply's announced work).
INTENT_CHARS = 200
#: A last reply shorter than this borrows the conclusions of the replies before it.
SHORT_CONCLUSION = 90
#: Longest "what was done" of one request.
OUTCOME_CHARS = 110
#: Shortest slash-command arguments that, repeated by the next prompt, make the two one request.
REPEATED_ARGS = 20
#: How alike (difflib's ratio) those arguments and the prompt's start must be: a typo fixed is the same request.
REPEAT_RATIO = 0.9
#: A reply that turns an offer down ("no, just explain it", "不用了").
_DECLINED = re.compile(r"^(?:no\b|nope\b|nah\b|not now\b|don'?t\b|不用|不要|算了|先不)", re.IGNORECASE)
#: Longest offer shown as open, with what it points at: the open line is cut at 200 with its label.
OFFER_CHARS = 170
#: How an offer the user never answered is told as an open item.
OFFERED = "offered, no answer yet: "
#: Longest plan left undone told as open, its steps named; and longest step.
PLAN_CHARS = 420
PLAN_STEP_CHARS = 90
#: Longest finding of a review told as open.
FINDING_CHARS = 150
#: Longest request taken back by the user ("undo the last change") shown as open: more than a request's usual clip.
UNDONE_CHARS = 160
#: What a session that stops without an interruption mark is: the transcript ends, whether the user stopped the
#: agent, closed it, or the capture was taken then.
CUT_OFF = "cut off or interrupted"
#: "Let me know if ..." hands over to the user: no work announced.
_LET_KNOW = re.compile(r"\blet me know\b|\bI'll (?:be here|wait)\b", re.IGNORECASE)
#: Longest error notice kept for the ending (an API error's JSON says its code and message in its first lines).
ERROR_CHARS = 160
#: Requests (counted from the last) whose replies' user actions count as still open.
ACTION_TURNS = 3


@dataclass
class _Turn:
    """What happened between one request and the next."""

    changed: dict[str, str] = field(default_factory=dict)
    effects: list[str] = field(default_factory=list)
    checks: dict[str, str] = field(default_factory=dict)
    tasks: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    replies: list[Message] = field(default_factory=list)
    #: The errors the agent showed after its last step (an API error, a quota hit), when nothing followed them.
    errors: list[str] = field(default_factory=list)
    last: str = ""  # reply, call, result, interrupt, reject, error
    #: Whether the user's last rejection also stopped the agent (Claude Code's "[Request interrupted by user for
    #: tool use]" after it): no reason given, nothing done after.
    halted: bool = False
    #: Whether the errors came right after a reply, before any call it announced.
    after_reply: bool = False


@dataclass
class Ask:
    """One distinct request of the user, and what was done for it."""

    text: str
    message_id: str
    position: int
    #: How it came: ``prompt``, ``command``, ``redirect`` (with a rejection), ``answer``, ``choice``, ``approval``,
    #: ``shell`` (a command the user ran, that the agent acted on).
    via: str = "prompt"
    outcome: str = ""
    #: What the request asked to be handed back, where its one-line text leaves it out (`agent_marks.asked_output`).
    asked_for: str | None = None
    turn: _Turn = field(default_factory=lambda: _Turn(), repr=False, compare=False)


@dataclass
class Ending:
    """How a session ended: its kind, its last substantive conclusion, and where it is."""

    kind: EndKind
    conclusion: str
    message_id: str | None = None
    #: The same, in fewer words (for a session given little room).
    brief: str = ""


@dataclass
class _Call:
    call: ToolCall
    message: Message
    turn: int
    command: str | None = None
    category: str | None = None
    #: ok, failed, rejected, interrupted; "no result" when a reply came first; None while pending.
    result: str | None = None
    #: The key a tracker gave an issue this call created (``ENT-110``, ``#123``), read from its result.
    issue: str | None = None
    #: The pull request URL its result names (``gh pr create`` prints it).
    pull: str | None = None
    #: The command still running that this call polls (Codex's ``write_stdin`` to a session).
    polls: _Call | None = None


@dataclass(frozen=True)
class _Failure:
    """A command whose last run failed: its error, its kind, the checks it runs, and how many calls came before it."""

    error: str
    category: str
    kinds: frozenset[str]
    at: int


@dataclass
class SessionReading:
    """A session read as a conversation (see the module docstring)."""

    asks: list[Ask] = field(default_factory=list)
    ending: Ending | None = None
    open_items: list[str] = field(default_factory=list)
    did: list[str] = field(default_factory=list)
    #: Files changed for real, in first-change order, with what was last done to each.
    changed: dict[str, str] = field(default_factory=dict)
    #: Requests the user had taken back right after ("undo the last change"), oldest first: left not done.
    undone: list[str] = field(default_factory=list)
    #: Steps this session finished (todos it marked done, commands whose last run passed).
    finished: list[str] = field(default_factory=list)
    #: Whether it committed, and pushed, anything: an earlier session's uncommitted or unpushed work is settled then.
    committed: bool = False
    pushed: bool = False
    replies: int = 0
    tool_calls: int = 0


def _key(text: str) -> str:
    return " ".join(re.sub(r"[^\w/.:-]+", " ", text.lower()).split())


class _Reader:
    """One pass over a session's messages, oldest first."""

    def __init__(self) -> None:
        self.reading = SessionReading()
        self.turns: list[_Turn] = [_Turn()]
        self.calls: dict[str, _Call] = {}
        self.order: list[_Call] = []
        self.todos: list[tuple[str, bool]] = []
        self.tasks = TaskList()
        self.todo_at = -1
        self.last_reply: Message | None = None
        self.pending_command: Ask | None = None
        #: The local-command caveat came last: the slash command after it is local, no request.
        self.local_next = False
        #: The last prompt in full, on one line: a request taken back right after is shown in more of its words.
        self.last_prompt = ""
        self.seen: dict[str, Ask] = {}
        self.failing: dict[str, _Failure] = {}
        #: The last file a write tool wrote whole, with its first heading: what an offer with no object is about.
        self.last_written: str | None = None
        #: Codex commands still running after their call returned, by the session id a ``write_stdin`` polls.
        self.running: dict[str, _Call] = {}
        #: The checks each check command ran, its package script's command included (``bun run lint``: ``biome check``).
        self.kinds: dict[str, frozenset[str]] = {}
        #: Files changed and not committed, commits not pushed, as the session's steps go by.
        self.git = GitProgress()
        #: The session's working folder, as its messages give it: files under it are named by their path in it.
        self.folder: str | None = None
        #: Pull requests a result showed merged (``gh pr view 90 --json state``: ``"state": "MERGED"``), by number.
        self.merged: set[str] = set()
        #: The plan a request handed over to carry out ("Implement the following plan: ..."), and how many calls came
        #: before it.
        self.handed_plan: tuple[str, int] | None = None
        #: A command the user ran in the agent's shell mode, with what it printed: a request if the agent acts on it.
        self.user_shell: tuple[str, Message, int] | None = None
        #: Calls the agent had no permission for and never made since (``Edit spec.ts``, ``Bash npm test``), in order.
        self.not_granted: dict[str, None] = {}

    @property
    def turn(self) -> _Turn:
        return self.turns[-1]

    def ask_of(self, turn: _Turn) -> Ask | None:
        """The request that opened ``turn``, if one did."""
        return next((ask for ask in self.reading.asks if ask.turn is turn), None)

    def ask(self, text: str, message: Message, position: int, via: str) -> Ask | None:
        """A request of the user, from here on the turn that work counts for; None for an empty text."""
        text = text.strip()
        if not text:
            return None
        self.turns.append(_Turn())
        known = self.seen.get(_key(text))
        if known is not None:  # the same request again: one request, where it was first made, its latest turn
            known.turn = self.turn
            return known
        new = Ask(text, message.id, position, via, turn=self.turn)
        self.seen[_key(text)] = new
        self.reading.asks.append(new)
        return new

    def user(self, message: Message, position: int, following: Message | None) -> None:
        content = message.content.strip()
        local, self.local_next = self.local_next, bool(marks.LOCAL_CAVEAT.match(content))
        for notice in marks.task_notices(content[:4000]):
            self._task_ended(notice, message, position)
        if self._user_shell(content, message, position):
            return
        self.user_shell = None  # a prompt came after it: the command was context for the prompt
        if marks.NOISE.match(content):
            return
        command = marks.COMMAND.search(content)
        if command is not None:
            if local:
                return
            name = command.group(1).strip()
            name = name if name.startswith("/") else "/" + name
            args = marks.COMMAND_ARGS.search(content)
            given = " ".join(args.group(1).split()) if args else ""
            expanded = (
                following is not None
                and following.role is Role.user
                and following.metadata.get("meta")
                and not marks.NOISE.match(following.content)
            )
            if given or expanded:
                made = self.ask(f"{name} {marks.ask_text(given)}".strip(), message, position, "command")
                self.pending_command = made if not given else None
            return
        text = marks.WRAPPED.sub(" ", content).strip()
        if not text or text.startswith("<"):
            return
        if _PLAN_HANDOFF.match(text):
            self.handed_plan = (content, len(self.order))
        offered = self._offer()
        if marks.ACK.match(text):
            if offered and marks.AFFIRMATIVE.match(text):
                self.ask(clip(f"{text.rstrip('.! ')}: {offered}", marks.ASK_CHARS), message, position, "approval")
            return
        choice = marks.CHOICE.match(text)
        if choice is not None and self.last_reply is not None:
            chosen = reply_text.options(self.last_reply.content)
            picked = [chosen[int(n)] for n in choice.groups()[:2] if n and int(n) in chosen]
            if picked:
                rest = f" ({choice.group(3)})" if choice.group(3) else ""
                self.ask(f"chose {' + '.join(clip(p, 70) for p in picked)}{rest}", message, position, "choice")
                return
        self._drop_repeated_command(text)
        previous = self.reading.asks[-1] if self.reading.asks else None
        if marks.UNDO.match(text) and previous is not None and not marks.UNDO.match(previous.text):
            said = self.last_prompt if previous.via == "prompt" else previous.text
            self.reading.undone.append(clip(said, UNDONE_CHARS))
        self.last_prompt = " ".join(text.split())
        made = self.ask(marks.ask_text(text), message, position, "prompt")
        if made is not None:
            made.asked_for = marks.asked_output(text)

    def _user_shell(self, content: str, message: Message, position: int) -> bool:
        """A command the user ran (``!cmd``) or its output: kept until the agent acts on it (see `agent_marks`)."""
        ran = marks.USER_SHELL.match(content)
        if ran is not None:
            self.user_shell = (f"ran `{clip(' '.join(ran.group(1).split()), 100)}`", message, position)
        printed = marks.USER_SHELL_OUTPUT.findall(content)
        if printed and self.user_shell is not None:
            errors = [html.unescape(text) for stream, text in printed if stream == "stderr" and text.strip()]
            if errors:
                said, made, at = self.user_shell
                self.user_shell = (f"{said}, which failed: {first_error_line(errors[0])}", made, at)
        return ran is not None or bool(printed)

    def _acted_on_user_shell(self) -> None:
        """The agent acts right after a command the user ran: that command is what it was asked."""
        if self.user_shell is not None:
            text, message, position = self.user_shell
            self.user_shell = None
            self.ask(clip(text, marks.ASK_CHARS + 60), message, position, "shell")

    def _drop_repeated_command(self, text: str) -> None:
        """A slash command whose arguments this prompt repeats whole is one request with it: the prompt's.

        Claude Code's ``/plan I've added the logos ... Update them in`` (its arguments cut
        short) is followed by the full prompt, a typo fixed maybe; the fuller text names the request.
        """
        previous = self.reading.asks[-1] if self.reading.asks else None
        if previous is None or previous.via != "command" or " " not in previous.text:
            return
        given = _key(previous.text.split(" ", 1)[1].rstrip("…"))
        start = _key(text)[: len(given)]
        if len(given) >= REPEATED_ARGS and difflib.SequenceMatcher(None, given, start).ratio() >= REPEAT_RATIO:
            self.reading.asks.remove(previous)
            self.seen.pop(_key(previous.text), None)

    def _offer(self) -> str | None:
        if self.last_reply is None:
            return None
        question = reply_text.closing_question(self.last_reply.content)
        if not question or not reply_text.is_offer(question):
            return None
        asked = self.reading.asks[-1].text if self.reading.asks else None
        offer = reply_text.offered_work(question)
        return reply_text.offer_in_full(self.last_reply.content, offer, asked, marks.ASK_CHARS - 5)

    def expansion(self, message: Message) -> None:
        """An injected prompt right after a slash command without arguments: its first sentence says what it asks."""
        ask, self.pending_command = self.pending_command, None
        self.local_next = bool(marks.LOCAL_CAVEAT.match(message.content))
        if ask is None:
            return
        said = [s for s in reply_text.sentences(reply_text.plain(" ".join(message.content.split()))) if len(s) > 12]
        if said:
            ask.text = f"{ask.text}: {clip(said[0], marks.ASK_CHARS - len(ask.text))}"

    def call(self, message: Message, call: ToolCall) -> None:
        self._acted_on_user_shell()
        self.reading.tool_calls += 1
        todos = todo_list(call.name, call.args)
        todos = self.tasks.apply(call.name, call.args) if todos is None else todos
        if todos is not None:
            self.todos, self.todo_at = todos, len(self.order)
        done = todos is not None or call.name in marks.NO_RESULT_TOOLS  # bookkeeping, or a call never answered
        state = _Call(call, message, len(self.turns) - 1, result="ok" if done else None)
        if call.name in SHELL_TOOLS:
            state.command = shell_command(call.args)
            state.category = shell_commands.category(state.command) if state.command else None
        if call.name in marks.WATCH_TOOLS:
            state.polls = self.running.get(marks.polled_id(call.args))
        if call.id is not None:
            self.calls[call.id] = state
        self.order.append(state)
        if todos is None:  # a todo list written after the last reply is bookkeeping, not more work
            self.turn.last = "call"

    def result(self, message: Message, position: int) -> None:
        """A call's result; Codex's "Process running with session ID N" (or a cell's "Script running with cell ID N")
        waits for the poll that sees it end."""
        state = self.calls.get(message.tool_call_id or "")
        if state is None:
            return
        head = message.content[:400]
        if state.polls is not None and not marks.is_rejection(message):
            state.result = "ok"
            self.turn.last = "result"
            if marks.stops(state.call):
                state.polls.result = "stopped"  # the agent ended it (a dev server): no outcome of its own
            elif marks.EXITED.search(head) is not None and state.polls.result == "running":
                self._settle(state.polls, message, position, late=True)
            return
        running = marks.RUNNING.search(head)
        if state.command is not None and running is not None and marks.EXITED.search(head) is None:
            state.result = "running"  # neither passed nor failed yet: a check still running proves nothing
            self.running[running.group(1)] = state
            self.turn.last = "result"
            return
        self._settle(state, message, position)

    def _task_ended(self, notice: marks.TaskNotice, message: Message, position: int) -> None:
        """Claude Code's notice that a background task ended settles the command that started it, as a poll would."""
        state = self.running.get(notice.task_id)
        if state is None or state.result != "running":
            return
        if notice.stopped():
            state.result = "stopped"
            return
        self._settle(state, notice.as_result(message), position, late=True)

    def _settle(self, state: _Call, message: Message, position: int, *, late: bool = False) -> None:
        """Read a call's outcome from ``message``; ``late`` when it comes after later calls (a poll, a notice).

        A failure is weighed against the calls after the point it was seen: work that went
        on while a background job still ran did not move on from its failure.
        """
        turn = self.turns[state.turn]
        interrupted = marks.interruption(message)
        if marks.is_rejection(message):
            state.result = "rejected"
            verb = "cancelled" if message.metadata.get("status") == "cancelled" else "rejected"
            turn.rejected.append(f"{verb} {marks.describe_call(state.call)}")
            self.turn.last, self.turn.halted = "reject", False
            reason = marks.rejection_reason(message)
            if reason is not None:
                self.ask(marks.ask_text(reason), message, position, "redirect")
            return
        if interrupted is not None:
            state.result = "interrupted"
            self.turn.last = "interrupt"
            return
        if marks.not_granted(message):  # nothing ran and no one refused: it waits on the user's permission
            state.result = "not_granted"
            named = marks.describe_call(state.call)
            self.not_granted.pop(named, None)  # the latest try last
            self.not_granted[named] = None
            self.turn.last = "result"
            return
        code, body, failed = outcome(message, state.command)
        hidden = hidden_failure(state.command, body) if state.command is not None else None
        failed = failed or hidden is not None
        if failed and state.category == "check" and _NEVER_RAN.search(body[:3000]):
            state.category = "other"  # the tool never started: no check of the project failed
        state.result = "failed" if failed else "ok"
        if not failed and self.not_granted:
            self.not_granted.pop(marks.describe_call(state.call), None)
        if state.call.name not in TODO_TOOLS:
            self.turn.last = "result"
        found = _ISSUE_KEY.search(message.content[:2000])
        if found is not None:
            state.issue = found.group(1) or f"#{found.group(2)}"
        pull = _PULL_URL.search(message.content[:4000])
        if pull is not None:
            state.pull = pull.group(0)
        viewed = _PR_NUMBER.search(state.command or "")
        if viewed is not None and _MERGED.search(message.content[:4000]) is not None:
            self.merged.add(viewed.group(1) or viewed.group(2))
        if state.call.name in marks.QUESTION_TOOLS and not failed:
            for answer in marks.answers(message.content):
                self.ask(marks.ask_text(answer), message, position, "answer")
            return
        if state.command is not None and state.category in ("check", "state", "other"):
            shown = shell_commands.shown(state.command)
            kinds = shell_commands.families(state.command) if state.category == "check" else frozenset({shown})
            if state.category == "check":
                # What a script runs, once its runner echoed it, stays known: ``just check`` that passes after
                # failing on its echoed ``pytest --cov ...`` fixed that pytest run too.
                kinds |= _script_families(body, shown) | self.kinds.get(shown, frozenset())
                for known in [cmd for cmd in turn.checks if self.kinds.get(cmd, frozenset()) & kinds]:
                    del turn.checks[known]
                self.kinds[shown] = kinds
                turn.checks[shown] = "failed" if failed else "passed"
            arguments = shown.split()[1:]
            for known in [
                cmd
                for cmd, failure in self.failing.items()
                if cmd == shown or failure.kinds & kinds or (arguments and cmd.split()[1:] == arguments)
            ]:
                if not failed:
                    del self.failing[known]
            if failed:
                at = len(self.order) - 1 if late else self.order.index(state)
                error = hidden or first_error_line(body)
                for known in [cmd for cmd, failure in self.failing.items() if failure.kinds & kinds]:
                    del self.failing[known]  # the same check failing again: its latest run is what is open
                self.failing[shown] = _Failure(error, state.category, kinds, at)
        if failed:
            return
        description = state.call.args.get("description")
        if state.call.name in marks.TASK_TOOLS and isinstance(description, str) and description:
            if clip(description, 60) not in turn.tasks:
                turn.tasks.append(clip(description, 60))
        content = state.call.args.get("content")
        if state.call.name in WRITE_TOOLS and isinstance(content, str) and path_arg(state.call.args):
            heading = next((line.lstrip("# ").strip() for line in content.splitlines() if line.startswith("#")), None)
            name = str(path_arg(state.call.args)).rsplit("/", 1)[-1]
            self.last_written = f"{name}: {clip(heading, 100)}" if heading else name
        # A shell command's paths are the session's own unless it moved first (``cd /tmp && rm -rf clone``).
        own = state.command is None or _MOVES.search(state.command) is None
        for path, action in _written(state):
            path = path.rstrip("/") or path
            if own:
                self.git.wrote(path, action)
            turn.changed[path] = action if turn.changed.get(path) != "created" or action == "deleted" else "created"
            self.reading.changed[path] = _after(self.reading.changed.get(path), action)
        if state.command is not None:
            self.git.ran(state.command, body)  # after its writes: ``sed -i ... f && git commit -am`` commits f
            turn.effects += [
                effect.text[:1].lower() + effect.text[1:]
                for effect in shell_commands.effects(state.command)
                if not effect.files and effect.text not in turn.effects
            ]
            turn.effects += [text for text in _commit(state.command, body) if text not in turn.effects]

    def reply(self, message: Message) -> None:
        self._acted_on_user_shell()
        for state in self.order:
            if state.result is None:  # the assistant went on: the call waits for nothing
                state.result = "no result"
        self.reading.replies += 1
        self.turn.replies.append(message)
        self.turn.last = "reply"
        self.last_reply = message

    def interruption(self, for_tool: bool) -> None:
        if for_tool and self.turn.last == "reject":
            self.turn.halted = True
        else:
            self.turn.last = "interrupt"

    def error(self, message: Message) -> None:
        """An error the agent showed instead of going on; the session ended on it if nothing came after."""
        if self.turn.last != "error":
            self.turn.errors = []
            self.turn.after_reply = self.turn.last == "reply"
        self.turn.errors.append(clip(" ".join(message.content.split()), ERROR_CHARS))
        self.turn.last = "error"


#: A command line that changes folder before its other steps: its relative paths are not the project's.
_MOVES = re.compile(r"(?:^|[;&|(]\s*)\s*(?:cd|pushd|Set-Location)\s", re.IGNORECASE | re.MULTILINE)


def _after(known: str | None, action: str) -> str:
    """What a file has undergone after one more change: a file the session created stays created."""
    if known in ("created", "created then deleted"):
        return "created then deleted" if action == "deleted" else "created"
    return action


#: The line a package manager prints before running a script: bun's and yarn's ``$ biome check .``, npm's and
#: pnpm's ``> biome check .`` (after their ``> name@1.0.0 lint`` header).
_SCRIPT_LINE = re.compile(r"^(?:\$|>) (?!\S+@\S* \S)(\S.*)$", re.MULTILINE)
#: Runners that echo each recipe line bare before running it (``just check`` prints ``pytest tests/ --cov=src``).
_ECHOING_RUNNERS = re.compile(r"^(?:just|make|gmake)\b")
#: The line Claude Code puts before a failed command's output.
_EXIT_LINE = re.compile(r"^Exit code \d+\n")


def _script_families(output: str, shown: str) -> frozenset[str]:
    """The checks a package script ran, read from the line its runner echoes first (none when it echoes none).

    ``bun run lint`` failing on ``$ biome check .`` is fixed by a later ``bunx biome check`` passing;
    ``just`` and ``make`` echo the recipe's line with no prompt, as the output's first line. ``shown``
    is the command as `shell_commands.shown` names it.
    """
    found = _SCRIPT_LINE.search(output[:2000])
    line = found.group(1) if found is not None else None
    if line is None and _ECHOING_RUNNERS.match(shown):
        line = _EXIT_LINE.sub("", output[:2000].lstrip(), count=1).split("\n", 1)[0].strip()
    if not line or shell_commands.category(line) != "check":
        return frozenset()
    return shell_commands.families(line)


def _written(state: _Call) -> list[tuple[str, str]]:
    """The files a successful call changed, with what it did to each."""
    call = state.call
    if call.name in WRITE_TOOLS:
        path = path_arg(call.args)
        return [(path, "created" if call.args.get("command") == "create" else WRITE_TOOLS[call.name])] if path else []
    if call.name == "apply_patch" or (state.command and "*** Begin Patch" in state.command):
        patch = state.command or (call.raw if not call.args else str(call.args.get("input", "")))
        actions = {"Add": "created", "Update": "edited", "Delete": "deleted"}
        return [
            (path.strip(), actions[verb])
            for verb, path in re.findall(r"^\*\*\* (Add|Update|Delete) File: (.+)$", patch, re.M)
        ]
    if state.command is not None:
        return [file for effect in shell_commands.effects(state.command) for file in effect.files]
    return []


def _commit(command: str, output: str) -> list[str]:
    """A commit a successful command made: its first message line and hash, as git printed them."""
    found = shell_commands.commit_made(command, output)
    if "commit" not in command or found is None:
        return []
    body = shell_commands.commit_body(command, 90)
    return [f'committed "{clip(found[1], 80)}" ({found[0]}{f": {body}" if body else ""})']


def read_session(messages: Sequence[Message]) -> SessionReading:
    """Read ``messages`` (a session's, oldest first) as a conversation; see the module docstring."""
    reader = _Reader()
    for position, message in enumerate(messages):
        following = messages[position + 1] if position + 1 < len(messages) else None
        in_git = message.metadata.get("git_branch") or message.metadata.get("git_commit")
        folder = message.metadata.get("cwd")
        if isinstance(folder, str) and folder:
            reader.folder = folder
            if in_git:
                reader.git.repository = folder
        interrupted = marks.interruption(message)
        if interrupted is not None and message.role is not Role.tool:
            reader.interruption(interrupted)
            continue
        if marks.agent_error(message):
            reader.error(message)
            continue
        if is_not_work(message):
            if message.role is Role.user and message.metadata.get("meta"):
                reader.expansion(message)
            continue
        call = tool_call(message)
        if call is not None:
            reader.call(message, call)
        elif message.role is Role.tool or message.metadata.get("kind") == "tool_result":
            reader.result(message, position)
        elif message.role is Role.user and message.metadata.get("kind") in (None, "text"):
            reader.user(message, position, following)
        elif message.role is Role.assistant and message.metadata.get("kind") in (None, "text"):
            if message.content.strip():
                reader.reply(message)
    return _finish(reader)


def _finish(reader: _Reader) -> SessionReading:
    reading = reader.reading
    turns = reader.turns
    for ask in reading.asks:
        ask.outcome = _outcome(ask.turn)
    if not reading.replies and not reading.tool_calls:
        return reading
    last = turns[-1]
    reading.ending = _ending(reader, last)
    reading.open_items = _open(reader, last, reading.ending)
    reading.did = _did(reader)
    reading.finished = [text for text, done in reader.todos if done]
    reading.finished += [cmd for turn in turns for cmd, status in turn.checks.items() if status == "passed"]
    reading.committed, reading.pushed = reader.git.committed, reader.git.pushed
    return reading


def _outcome(turn: _Turn) -> str:
    """What was done for one request, in a few words."""
    parts: list[str] = []
    if turn.changed:
        names = [path.rstrip("/").rsplit("/", 1)[-1] for path in turn.changed]
        parts.append("changed " + ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else ""))
    parts += turn.effects[:2]
    if turn.tasks:
        parts.append("subagent: " + "; ".join(turn.tasks[:2]))
    if turn.rejected:
        parts.append(turn.rejected[0])
    failing = [cmd for cmd, status in turn.checks.items() if status == "failed"]
    if failing:
        parts.append(f"`{clip(failing[-1], 40)}` failing")
    if parts and turn.replies:
        said = reply_text.conclusion(turn.replies[-1].content, OUTCOME_CHARS - 10)
        room = OUTCOME_CHARS - len("; ".join(parts)) - 2
        if said and room >= 30:
            parts.append(reply_text.cut(said, room))
    if not parts and turn.replies:
        answer = reply_text.conclusion(turn.replies[-1].content, OUTCOME_CHARS - 10) or ", ".join(
            reply_text.table_digest(turn.replies[-1].content)[:4]
        )
        parts.append(f"answered: {answer}" if answer else "answered")
    if turn.last == "interrupt":
        parts.append("interrupted")
    return clip("; ".join(parts), OUTCOME_CHARS)


def _conclusion(turn: _Turn, limit: int) -> tuple[str, str | None]:
    """The last reply's conclusion, with earlier replies of the turn when it says little."""
    texts: list[str] = []
    source: str | None = None
    for reply in reversed(turn.replies):
        room = limit - sum(len(t) + 1 for t in texts)
        text = reply_text.conclusion(reply.content, room, cut_first=not texts)  # an earlier reply: whole sentences only
        if not text and not texts and reply_text.table_digest(reply.content):
            text = "; ".join(reply_text.table_digest(reply.content)[:6])
        if text:
            texts.insert(0, text)
            source = source or reply.id
        if sum(len(t) for t in texts) >= SHORT_CONCLUSION or limit - sum(len(t) + 1 for t in texts) < 40:
            break
    return " ".join(texts), source


def _ending(reader: _Reader, turn: _Turn) -> Ending:
    long = _ending_at(reader, turn, CONCLUSION_CHARS)
    long.brief = _ending_at(reader, turn, BRIEF_CHARS).conclusion
    return long


def _ending_at(reader: _Reader, turn: _Turn, limit: int) -> Ending:
    calls = [state for state in reader.order if reader.turns[state.turn] is turn]
    pending = [state for state in calls if state.result is None and state.call.name not in marks.QUESTION_TOOLS]
    said, source = _conclusion(turn, limit)
    intent = reply_text.announced(turn.replies[-1].content, INTENT_CHARS) if turn.replies else ""
    about = f"; it was about to: {intent.rstrip('.')}" if intent else ""
    if turn.last == "interrupt":
        running = next((state for state in reversed(calls) if state.result in (None, "interrupted")), None)
        during = f" during {marks.describe_call(running.call)}" if running is not None else ""
        return Ending("interrupted", _join(f"interrupted by the user{during}{about}", said), source)
    if turn.last == "reject":
        rejected = turn.rejected[-1] if turn.rejected else "rejected a tool call"
        stopped = " and interrupted the agent" if turn.halted else ""
        return Ending("tool_rejected", _join(f"the user {rejected}{stopped}", said), source)
    if turn.last == "error":
        announced = _cut_off(turn)
        cut_off = f"; it was about to: {announced.rstrip('.')}" if announced else ""
        exhausted = next((error for error in turn.errors if marks.USAGE_LIMIT.search(error)), None)
        if exhausted is not None:  # the provider cut the agent off mid-request: no failure of the work
            return Ending(
                "stopped_mid_work",
                _join(f"stopped mid-work, {CUT_OFF} by a usage limit: {exhausted}{cut_off}", said),
                source,
            )
        more = f"; then {len(turn.errors) - 1} more, the last: {turn.errors[-1]}" if len(turn.errors) > 1 else ""
        return Ending("failed", _join(f"failed: stopped on an error: {turn.errors[0]}{more}{cut_off}", said), source)
    if not turn.last:
        return Ending("stopped_mid_work", f"stopped before any reply to the last request, {CUT_OFF}", None)
    asking = _asking(calls)
    if asking is not None and not pending:  # the agent's last act was a question to the user: it waits on them
        said = _join(f"asked the user: {clip(asking, 160)}", said)
    elif pending or turn.last in ("call", "result"):
        waiting = _awaited(pending or [state for state in calls if state.result == "running"])
        what = f"; was running {marks.describe_call(waiting.call)} (no result)" if waiting is not None else ""
        doing = next((text for text, done in reader.todos if not done), None) if reader.todo_at >= 0 else None
        step = f' during "{clip(doing, 80)}"' if doing else ""
        return Ending("stopped_mid_work", _join(f"stopped mid-work, {CUT_OFF}{step}{what}{about}", said), source)
    plan = _only_announced(turn) if turn.last == "reply" and calls and _plan_not_done(turn, calls) is None else ""
    if plan:  # the agent's last word said what it would do next, and nothing followed (a plan says so itself)
        return Ending("stopped_mid_work", _join(f"stopped mid-work, {CUT_OFF}; it was about to: {plan}", said), source)
    left = _left_running(calls)
    if left is not None:  # the last reply came while a job ran: what it produced was never seen
        still = f"stopped mid-work: {marks.describe_call(left.call)} still running at the end, its result not seen"
        return Ending("stopped_mid_work", _join(still, said), source)
    settled = [state for state in calls if state.result is not None]
    if settled and settled[-1].result == "not_granted":  # the agent stopped on a call it had no permission for
        waits = f"failed: not permitted, waits on the user's permission for {marks.describe_call(settled[-1].call)}"
        return Ending("failed", _join(waits, said), source)
    failing = [cmd for cmd, status in turn.checks.items() if status == "failed"]
    if failing and not _committed_past(reader, calls, failing[-1]):
        return Ending("failed", _join(f"failed: `{clip(failing[-1], 60)}` still failing", said), source)
    change = _change_failed(calls)
    if change is not None and change.command is not None:
        return Ending("failed", _join(f"failed: `{clip(shell_commands.shown(change.command), 60)}`", said), source)
    if turn.changed or turn.effects:
        return Ending("completed", said, source)
    final = reader.ask_of(turn)
    if "passed" in turn.checks.values() and final is not None and not final.text.endswith(reply_text.QUESTION_MARKS):
        # What was asked was run, and ran ("npm run dev", "run the tests"); a question a run answered stays answered.
        return Ending("completed", said, source)
    return Ending("answered", said, source)


def _cut_off(turn: _Turn) -> str:
    """What the last reply announced when an error came in place of the calls it announced ("I will read limiter.ts
    to see whether it should use Redis too." then an API error): work begun in words only."""
    if not turn.after_reply or not turn.replies:
        return ""
    return reply_text.announced(turn.replies[-1].content, INTENT_CHARS, every=True)


def _committed_past(reader: _Reader, calls: list[_Call], check: str) -> bool:
    """Whether the turn changed state for good (a commit, a tag, a push) after ``check`` last failed.

    The agent judged the failure not its request's (tests of cloned repositories, say) and
    finished the work: the session completed, and the failing check stays an open item.
    """
    failure = reader.failing.get(check)
    if failure is None:
        return False
    later = reader.order[failure.at + 1 :]
    return any(state in later and state.result == "ok" and _publishes(state.command) for state in calls)


def _publishes(command: str | None) -> bool:
    """Whether a command line records work for good: ``git commit``, ``tag``, ``push``, ``merge``, ``gh release``."""
    for words in shell_commands.parse(command).commands if command else []:
        verbs = [word for word in words[1:] if not word.startswith("-")]
        if words[0] == "git" and verbs[:1] and verbs[0] in ("commit", "tag", "push", "merge"):
            return True
        if words[0] == "gh" and verbs[:2] in (["pr", "create"], ["pr", "merge"], ["release", "create"]):
            return True
    return False


def _asking(calls: list[_Call]) -> str | None:
    """The question a turn's last call put to the user and got no answer to (Claude Code's ``AskUserQuestion``)."""
    last = calls[-1] if calls else None
    if last is None or last.call.name not in marks.QUESTION_TOOLS or last.result is not None:
        return None
    return marks.question_text(last.call.args)


def _change_failed(calls: list[_Call]) -> _Call | None:
    """The turn's last command that changes state (a commit, a push), when it failed: what was asked is not done.

    A failing check is told on its own; this is the ``git commit`` a pre-commit hook refused.
    A file written after it means work went on (the failed command was a scratch step).
    """
    changes = [state for state in calls if state.category == "state" and state.result in ("ok", "failed")]
    if not changes or changes[-1].result != "failed":
        return None
    after = calls[calls.index(changes[-1]) + 1 :]
    moved_on = any(state.call.name in WRITE_TOOLS and state.result == "ok" for state in after)
    return None if moved_on else changes[-1]


def _awaited(pending: list[_Call]) -> _Call | None:
    """The call a session cut off was waiting on: the last that could change something, else the last.

    Codex runs ``git commit`` and ``git status`` side by side: the commit is what is unfinished.
    A poll of a running command stands for that command (``git commit``, not ``write_stdin``).
    """
    calls = [state.polls or state for state in pending]
    changing = [state for state in calls if state.category != "read"]
    return changing[-1] if changing else calls[-1] if calls else None


#: A sentence that says what a step is for, not what happened: "This ensures ...", "That way ...".
_PURPOSE = re.compile(r"^(?:this|that)(?: way,?| will| should)?\s+(?:ensures?|keeps?|makes sure|guarantees?)\b", re.I)


def _only_announced(turn: _Turn) -> str:
    """What the turn's last reply announced, where that is all it says ("First I'll copy the dialog, then push.").

    Such a reply after the turn's calls is the agent setting out on the next step: a
    transcript that ends there was cut off before it. A reply with a finding, a question
    or anything but prose says more, and "Let me know ..." announces nothing.
    """
    text = turn.replies[-1].content if turn.replies else ""
    parts = reply_text.units(text)
    if not parts or any(unit.kind not in ("para", "bullet") for unit in parts):
        return ""
    for sentence in reply_text.prose_sentences(parts):
        if _PURPOSE.match(sentence):
            continue  # what the announced step is for ("This ensures the project is self-contained.")
        if _LET_KNOW.search(sentence) or not (reply_text.is_preface(sentence) or reply_text.is_opener(sentence)):
            return ""
    return reply_text.announced(text, INTENT_CHARS, every=True).rstrip(".")


def _left_running(calls: list[_Call]) -> _Call | None:
    """The last command of the turn still running when the session ended, unless it serves (a dev server, a watcher).

    A background job (a generator, a training run, a long test run) the agent started and
    never saw end leaves its result unknown; a server left running is how the work is used.
    """
    return next(
        (
            state
            for state in reversed(calls)
            if state.result == "running" and state.command is not None and not shell_commands.serves(state.command)
        ),
        None,
    )


def _only_reads(state: _Call) -> bool:
    """Whether a call only looks (``git diff --cached``, a Read): cut off, it leaves no work of its own undone."""
    return state.category == "read" or state.call.name in READ_TOOLS or state.call.name in marks.SEARCH_TOOLS


def _join(state: str, said: str) -> str:
    return f"{state}. {said}" if said else state


def _open(reader: _Reader, turn: _Turn, ending: Ending) -> list[str]:
    """What is still open at the end: the unfinished ask, unfixed failures, todos, next steps, offers, questions,
    a plan left undone (with its steps) or carried out with its checks by hand never run, a review's findings.

    Failures of checks stay until a pass; other failed commands only when nothing worked
    after them. A last request that reported an error and got words alone is not known fixed.
    """
    found: list[str] = []
    asks = reader.reading.asks
    final = reader.ask_of(turn)
    calls = [state for state in reader.order if reader.turns[state.turn] is turn]
    change = _change_failed(calls)
    # An error after the turn's changes came in place of its last reply: the work is told as done, the error as how it
    # ended; one before any change left the request undone.
    errored = turn.last == "error" and not (turn.changed or turn.effects)
    # A usage limit that cut the agent off after its changes leaves them done, as any error does.
    cut_short = (
        ending.kind in ("interrupted", "tool_rejected", "stopped_mid_work") and turn.last != "error"
    ) or errored
    for ask in asks[:-1] if final is not None else asks:  # earlier requests the agent answered with an error only
        if ask.turn is not turn and ask.turn.last == "error" and not ask.turn.changed and not ask.turn.replies:
            found.append(f"unfinished request (the agent stopped on an error): {ask.text}")
    if final is not None and cut_short:
        found.append(f"unfinished request: {final.text}")
        if final.asked_for:
            found.append(f"the answer it asked for, not given: {final.asked_for}")
    elif turn.last == "error" and (announced := _cut_off(turn)):
        found.append(f"announced, then stopped by an error: {announced}")
    elif change is not None and change.command is not None and final is not None:
        failure = reader.failing.get(shell_commands.shown(change.command))
        why = f" (`{clip(shell_commands.shown(change.command), 60)}` failed" + (
            f": {failure.error})" if failure else ")"
        )
        found.append(f"unfinished request: {final.text}{why}")
    waiting = _awaited(
        [state for state in calls if state.result is None and state.call.name not in marks.QUESTION_TOOLS]
    )
    if ending.kind == "stopped_mid_work" and waiting is not None and not _only_reads(waiting):
        found.append(f"waiting on {marks.describe_call(waiting.call)} (started, no result)")
    left = _left_running(calls)
    if ending.kind == "stopped_mid_work" and left is not None and left is not waiting:
        found.append(f"result not seen: {marks.describe_call(left.call)} was still running when the session ended")
    asking = _asking(calls)
    if asking is not None:
        found.append(f"asked the user, no answer yet: {clip(asking, 200)}")
    if reader.not_granted:
        found.append(f"not run, waits on the user's permission: {'; '.join(list(reader.not_granted)[-3:])}")
    found += _checks_declined(reader, turn if ending.kind == "tool_rejected" else None)
    named = shell_commands.shown(change.command) if change is not None and change.command is not None else None
    for command, failure in reader.failing.items():
        if command == named:
            continue  # told with the unfinished request
        if failure.category == "check" or not _moved_on(reader, failure):
            found.append(f"`{clip(command, 80)}` still failing: {failure.error}")
    if reader.reading.undone:
        times = f", {len(reader.reading.undone)} times" if len(reader.reading.undone) > 1 else ""
        found.append(f"undone at the user's request{times}: {reader.reading.undone[-1]}")
    found += [f"tracked as a new issue: {title}" for title in _issues_created(reader)]
    push_spoken = any(PUSH_WORDS.search(ask.text) for ask in asks) or any(
        NOT_PUSHED.search(reply.content) for reply in turn.replies
    )
    git_spoken = any(GIT_WORDS.search(ask.text) for ask in asks) or any(
        GIT_STATE.search(reply.content) for past in reader.turns for reply in past.replies
    )
    found += reader.git.open_items(git_spoken, push_spoken)
    found += _pulls_unmerged(reader)
    after = reader.order[reader.todo_at + 1 :] if reader.todo_at >= 0 else []
    for text, done in reader.todos:
        if not done and not _done_later(text, after, reader) and not _current(text, ending, reader):
            found.append(f"todo: {text}")
    recent = reader.turns[-ACTION_TURNS:]
    for position, past in enumerate(recent):
        # The last reply's next steps all stand, and so do those of a reply no later one followed (the requests after
        # it got only errors: an API error on every deploy asked for leaves the steps it listed to do).
        last = position == len(recent) - 1 or past is turn or not any(later.replies for later in recent[position + 1 :])
        for reply in past.replies[-1:] if past.replies else []:
            steps = reply_text.next_steps(reply.content)
            if not last:
                steps = [step for step in steps if reply_text.is_user_action(step)]
            found += [clip(step, 160) for step in steps]
    if turn.replies:
        question = reply_text.closing_question(turn.replies[-1].content)
        if question and reply_text.is_offer(question):
            found.append(_offer(reader, turn.replies[-1], question, final.text if final else None))
        elif not question and (stated := reply_text.stated_offer(turn.replies[-1].content)) is not None:
            found.append(f"{OFFERED}{clip(stated, OFFER_CHARS)}")
        elif question and reply_text.is_open_question(question):
            choices = reply_text.options(turn.replies[-1].content)
            listed = "; ".join(
                f"{number}: {clip(re.split(r' [-—:] ', text, maxsplit=1)[0], 60)}"
                for number, text in sorted(choices.items())[:4]
            )
            found.append(f"asked the user, no answer yet: {clip(question, 160)}" + (f" ({listed})" if listed else ""))
        elif ending.kind == "answered" and (passed := _offer_passed_over(reader, final)) is not None:
            found.append(passed)
    planned = _plan_not_done(turn, calls)
    if planned is not None:
        found.append(planned)
    if ending.kind == "completed":
        found += _plan_unverified(reader)
    if ending.kind == "answered" and final is not None and reply_text.REVIEW_ASK.search(final.text) and turn.replies:
        found += [f"review finding: {item}" for item in reply_text.findings(turn.replies[-1].content, FINDING_CHARS)]
    if ending.kind == "answered" and final is not None and _REPORTED_ERROR.search(final.text):
        found.append(f"not confirmed fixed: {final.text}")
    found += reader.git.left_in_project(git_spoken)
    if turn.replies:
        found += said_left_out(reply_text.prose_sentences(reply_text.units(turn.replies[-1].content)), found)
    # A step an offer quotes as what it is about ("I skipped the gate… Say the word if you want it run") is told once.
    quoted = [item[len(OFFERED) :].split("…")[0] for item in found if item.startswith(OFFERED)]
    return [
        item
        for item in dict.fromkeys(found)
        if item.startswith(OFFERED) or not any(len(quote) >= 20 and item.startswith(quote) for quote in quoted)
    ]


def _checks_declined(reader: _Reader, told: _Turn | None) -> list[str]:
    """The checks the user turned down that never ran after: nothing verified what they check.

    A user who declines ``mise run fmt && mise run lint && mise run test:ci`` ("I'll take it
    from here") and later asks for the lint alone leaves the format and the tests unrun; a
    decline in ``told``, the turn the session ended on with it, is told as the ending.
    """
    found: list[str] = []
    for index, state in enumerate(reader.order):
        if state.result != "rejected" or state.category != "check" or state.command is None:
            continue
        if reader.turns[state.turn] is told:
            continue
        ran = frozenset().union(
            *(
                shell_commands.families(later.command)
                for later in reader.order[index + 1 :]
                if later.command is not None and later.result in ("ok", "failed")
            )
        )
        left = sorted(shell_commands.families(state.command) - ran, key=state.command.find)
        if left:
            found.append("not run, the user declined it: " + ", ".join(f"`{family}`" for family in left))
    return list(dict.fromkeys(found))


def _offer(reader: _Reader, reply: Message, question: str, asked: str | None) -> str:
    """An offer a reply closed on, as an open item: what it proposes, in full when it only points back."""
    offer = reply_text.offered_work(question)
    if offer == question and reader.last_written is not None:  # "Ready to implement?": what it just wrote
        offer += f" ({reader.last_written})"
    offer = reply_text.offer_in_full(reply.content, offer, asked, OFFER_CHARS)
    return f"{OFFERED}{clip(offer, OFFER_CHARS)}"


def _offer_passed_over(reader: _Reader, final: Ask | None) -> str | None:
    """The offer of the turn before the last, when the user answered it with a question of their own.

    "Want me to implement loss.py next?" - "Which chapter of the book explains this?" - an
    answer: the last turn did no work, so the offer still waits. A refusal ("no, just
    explain") or an offer the last reply made anew leaves it.
    """
    if final is None or final.via != "prompt" or _DECLINED.match(final.text) or len(reader.turns) < 2:
        return None
    before = reader.turns[-2]
    if before is final.turn or not before.replies:
        return None
    question = reply_text.closing_question(before.replies[-1].content)
    if question is None or not reply_text.is_offer(question):
        return None
    asked = reader.ask_of(before)
    return _offer(reader, before.replies[-1], question, asked.text if asked is not None else None)


def _plan_not_done(turn: _Turn, calls: list[_Call]) -> str | None:
    """The plan a last request ended on, when nothing of it was carried out: how it stands, its title, its steps.

    Codex's plan mode ends its turn on a ``<proposed_plan>`` block; Claude Code's on an
    ``ExitPlanMode`` call, approved or rejected. Work done after it (a file written, a state
    changed) means the plan is being carried out. Its steps are named (`reply_text.plan_steps`):
    the next session has to do them, and a title alone does not say what they are.
    """
    put = [state for state in calls if state.call.name in marks.PLAN_TOOLS and state.result in ("ok", "rejected")]
    after = calls[calls.index(put[-1]) :] if put else []
    if put and not any(state.category == "state" or _written(state) for state in after):
        plan = put[-1].call.args.get("plan")
        if not isinstance(plan, str):
            return None
        stands = "proposed, not implemented yet" if put[-1].result == "ok" else "rejected by the user, not carried out"
        return _with_steps(f"plan {stands}: {marks.describe_call(put[-1].call)}", plan)
    last = turn.replies[-1].content if turn.replies else ""
    if "<proposed_plan>" not in last or turn.changed or turn.effects:
        return None
    inside = last.split("<proposed_plan>", 1)[1]
    heading = re.search(r"^#{1,3}\s+(.+?)\s*$", inside, re.MULTILINE)
    title = heading.group(1) if heading is not None else reply_text.conclusion(inside, OFFER_CHARS)
    return _with_steps(f"plan proposed, not implemented yet: {title}", inside)


def _with_steps(said: str, plan: str) -> str:
    steps = reply_text.plan_steps(plan, PLAN_STEP_CHARS)
    return clip(f"{said}; steps: {'; '.join(steps)}" if steps else said, PLAN_CHARS)


def _plan_unverified(reader: _Reader) -> list[str]:
    """The checks of the last plan carried out that the session never ran: its "Verification" items left over.

    The plan is the one the last request handed over ("Implement the following plan:", Claude
    Code's words when a plan is carried out in a fresh context) or approved (``ExitPlanMode``);
    once a later request came, the user has seen the work and its checks are theirs.
    An item that names a command is done when a check of the same kind passed after the
    plan (```bun test` — all new tests pass``); one that asks for hands and eyes ("Upload
    sampleInput3.json ... the modal should show ...") is left to the user, and open.
    """
    plan, at = reader.handed_plan if reader.handed_plan is not None else ("", -1)
    for index, state in enumerate(reader.order):
        text = state.call.args.get("plan")
        if state.call.name in marks.PLAN_TOOLS and state.result == "ok" and isinstance(text, str) and index >= at:
            plan, at = text, index
    after = reader.order[max(at, 0) :]
    last = reader.turns[-1]
    if not plan or any(reader.turns[state.turn] is not last for state in after):
        return []  # a later request came after the plan's work: the user has seen it since
    if not any(state.category == "state" or _written(state) for state in after):
        return []
    ran = frozenset().union(
        *(
            reader.kinds.get(shell_commands.shown(state.command), frozenset())  # a check's families, as settled
            for state in after
            if state.command is not None and state.category == "check" and state.result == "ok"
        )
    )
    left = [
        item
        for item in reply_text.plan_checks(plan)
        if not item.endswith(":")
        and not any(shell_commands.families(command) & ran for command in reply_text.check_commands(item))
    ]
    return [clip("not verified yet (the plan's checks): " + "; ".join(left), PLAN_CHARS)] if left else []


#: Claude Code's words handing an approved plan to a fresh context to carry out.
_PLAN_HANDOFF = re.compile(r"^implement the following plan\b", re.IGNORECASE)
#: An issue's key in a tracker's answer: Linear's or Jira's ``identifier`` / ``key``, a GitHub issue URL.
_ISSUE_KEY = re.compile(r'"(?:identifier|key)"\s*:\s*"([A-Z][A-Z0-9]+-\d+)"|/issues/(\d+)\b')
_CREATES_ISSUE = re.compile(r"(?:^|_)create_(?:issue|task|ticket|story|card)s?$", re.IGNORECASE)


def _issues_created(reader: _Reader) -> list[str]:
    """Titles of the issues a session opened in a tracker (an MCP ``create_issue``, ``gh issue create``): later work."""
    titles: list[str] = []
    for state in reader.order:
        if state.result != "ok":
            continue
        name = state.call.name.rsplit("__", 1)[-1]
        title = state.call.args.get("title")
        if _CREATES_ISSUE.search(name) and isinstance(title, str) and title.strip():
            key = state.issue
            titles.append(clip(f"{key}: {title}" if key else title, 120))
        elif state.command and "issue create" in state.command:
            titles += _issues_opened(state.command, state.issue)
    return list(dict.fromkeys(titles))


def _issues_opened(command: str, key: str | None) -> list[str]:
    """The issues ``gh issue create`` opened, by title, or by number when the title is a shell word.

    A script that only holds the command (``cat > create.sh <<'EOF' ... gh issue create``)
    opens none; a title given as ``"$title"`` or ``"$(grep ...)"`` names nothing, so the
    issue is named by the key its result gave (``#328``, from the URL gh printed).
    """
    opened: list[str] = []
    for words in shell_commands.parse(command).commands:
        if words[:3] != ["gh", "issue", "create"] and words[:2] != ["issue", "create"]:  # ``url=$(gh issue create``
            continue
        at = next((index for index, word in enumerate(words) if word in ("--title", "-t")), None)
        title = words[at + 1] if at is not None and at + 1 < len(words) else None
        if title and "$" not in title:
            opened.append(clip(title, 120))
        elif key is not None:
            opened.append(key)
    return opened


#: What a runner says when the tool it was asked for never started (exit 127, npx without the package).
_NEVER_RAN = re.compile(
    r"command not found|could not determine executable to run|No such file or directory.{0,40}(?:exec|spawn)|"
    r"^error: Script not found|is not recognized as an internal or external command|"
    r"^error: unrecognized subcommand",
    re.IGNORECASE | re.MULTILINE,
)
#: A command about one pull request (``gh pr view 90``, ``gh api repos/o/r/pulls/90``), and a result saying it merged.
_PR_NUMBER = re.compile(r"\bgh pr (?:view|checks|status|merge)\s+#?(\d+)|/pulls/(\d+)\b(?!/)")
_MERGED = re.compile(r'"state"\s*:\s*"MERGED"|"merged"\s*:\s*true|^state:\s*MERGED\b', re.MULTILINE)
_PULL_URL = re.compile(r"https://[\w.-]+/[\w.-]+/[\w.-]+/pull/\d+")
_CREATES_PULL = re.compile(r"(?:^|_)create_pull_request$", re.IGNORECASE)


def _pulls_unmerged(reader: _Reader) -> list[str]:
    """Pull requests the session opened and did not merge: they wait on a review, a merge, CI.

    ``gh pr create`` and GitButler's ``but pr new`` (titled by ``--title`` or the first line
    of ``-m``); a PR the session commented on or reviewed (``gh pr comment 444``) is in its
    review loop, open too. A draft says so (it is unfinished by its own flag). A later ``gh pr merge``
    (or a tracker's ``merge_pull_request``) of the session settles them all.
    """
    opened: list[str] = []
    for state in reader.order:
        if state.result != "ok":
            continue
        name = state.call.name.rsplit("__", 1)[-1]
        command = state.command or ""
        if re.search(r"\bgh pr merge\b", command) or name.endswith("merge_pull_request"):
            opened = []
            continue
        title = state.call.args.get("title") if _CREATES_PULL.search(name) else None
        draft = state.call.args.get("draft") is True
        if re.search(r"\bgh pr create\b|\bbut pr new\b", command):
            found = re.search(r"--title[= ](?:\"([^\"]+)\"|'([^']+)')", command)
            title = (found.group(1) or found.group(2)) if found is not None else shell_commands.commit_subject(command)
            draft = re.search(r"\s(?:--draft|-d)\b", command) is not None
        if isinstance(title, str) and (title or state.pull):
            named = "; ".join(part for part in (clip(title, 100), state.pull) if part)
            opened.append(f"{'draft ' if draft else ''}PR opened, not merged: {named}")
        commented = re.search(r"\bgh pr (?:comment|review)\s+#?(\d+)", command)
        if commented is not None and "--approve" not in command and commented.group(1) not in reader.merged:
            opened.append(f"PR #{commented.group(1)} commented on, not merged")
    return list(dict.fromkeys(opened))


_TEST_WORDS = re.compile(r"\b(?:tests?|verify|verification|lint|build|check|run|type[- ]?check|suite)\b", re.I)


def _done_later(text: str, after: list[_Call], reader: _Reader) -> bool:
    """Whether what happened after the todo list's last state did the item (a check passed, a commit made...)."""
    ok = [state for state in after if state.result == "ok"]
    if _TEST_WORDS.search(text) and any(state.category == "check" for state in ok):
        return not any(state.category == "check" and state.result == "failed" for state in after[-3:])
    for word, needle in (("commit", "commit"), ("merge", "merge"), ("push", "push")):
        if re.search(rf"\b{word}", text, re.I) and any(needle in (state.command or "") for state in ok):
            return True
    return False


#: A request that quotes an error the user hit: answered with words alone, it is not known to be fixed.
_REPORTED_ERROR = re.compile(r"(?:^|\s)(?:error|fatal|traceback|panic|exception|failed)\b\s*[:!(]", re.IGNORECASE)


def _moved_on(reader: _Reader, failure: _Failure) -> bool:
    """Whether work went on after a command that is no check failed: the agent went another way, nothing is left open.

    A build or test still failing is open whatever came after it; a scratch command that
    failed (a cleanup, a look into the module cache) and was followed by calls that worked
    is not what the next session has to fix.
    """
    return any(state.result == "ok" and state.call.name not in TODO_TOOLS for state in reader.order[failure.at + 1 :])


def _current(text: str, ending: Ending, reader: _Reader) -> bool:
    """The step a session stopped in the middle of: named in its ending, not again as open."""
    return ending.kind == "stopped_mid_work" and f'"{clip(text, 80)}"' in ending.conclusion


#: Longest path a file is named by in the "Did" line; a longer one is named by its file name.
_PATH_CHARS = 40


def _in_folder(path: str, folder: str | None) -> str:
    """A changed file as the "Did" line names it: its path in the session's folder when short (``src/generate.rs``,
    ``src/providers/mod.rs``: a bare ``mod.rs`` says little), else its file name."""
    path = path.rstrip("/")
    name = path.rsplit("/", 1)[-1] or path
    root = folder.rstrip("/") + "/" if folder else None
    if root and path.startswith(root):
        path = path[len(root) :]
    elif path.startswith("/") or re.match(r"[A-Za-z]:[\\/]", path):  # elsewhere on the machine (``D:\\tools\\x``)
        return name.rsplit("\\", 1)[-1]
    return path if len(path) <= _PATH_CHARS else name


def _did(reader: _Reader) -> list[str]:
    """What the whole session did, in a few phrases: files, state changes, checks, rejections."""
    parts: list[str] = []
    groups: dict[str, list[str]] = {}
    for path, action in reader.reading.changed.items():
        groups.setdefault(action, []).append(_in_folder(path, reader.folder))
    for action, names in groups.items():
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        parts.append(f"{action} {shown}")
    effects = [effect for turn in reader.turns for effect in turn.effects]
    if reader.git.committed:  # what was staged went into a commit: the commits and what is left uncommitted tell it
        effects = [effect for effect in effects if not effect.lower().startswith("staged ")]
    parts += list(dict.fromkeys(effects))[:6]
    checks: dict[str, str] = {}
    for turn in reader.turns:
        for command, status in turn.checks.items():
            for known in [cmd for cmd in checks if shell_commands.family(cmd) == shell_commands.family(command)]:
                del checks[known]
            checks[command] = status
    if checks:
        parts.append("checks: " + ", ".join(f"`{clip(c, 60)}` {s}" for c, s in list(checks.items())[-3:]))
    tasks = [task for turn in reader.turns for task in turn.tasks]
    if tasks:
        parts.append(f"{len(tasks)} subagent task{'s' if len(tasks) > 1 else ''} ({'; '.join(tasks[:3])})")
    return parts
