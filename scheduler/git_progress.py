"""What a session left outside git's history: files changed and never committed, commits never pushed.

The next session must know that the work it finds is in the working tree only, or on this
machine only: that is what "it is done" hides most often. Read from the session's own
steps, in order (`session_reading` feeds each successful call):

- a file a write tool or a shell command changed is **pending** (not one a command named
  after changing folder, ``cd /tmp && rm -rf clone``: that is no path of the project); ``git add PATH`` stages the
  pending files under PATH (``git add .``, ``-A``, ``--all``, ``-u`` all of them), and a
  ``git commit`` commits the staged ones (``-a`` / ``--all``: every pending file; paths
  after the options: those too). ``git restore PATH`` and ``git checkout -- PATH`` take
  changes back, ``git stash`` puts them aside (``stash pop`` / ``apply`` brings them back),
  and a ``git status`` that says "nothing to commit" settles them all (a hook or the user
  committed them where the session could not see), while one that lists changed files
  (long or short format; tracked files only) makes them pending too, staged or not as it says: work from before
  the session is as uncommitted as the session's own. So does a ``git diff`` of the working
  tree (no revision, or ``HEAD``; ``--cached`` for staged files): one between commits lists
  nothing pending. What is pending at the end is **uncommitted**.
- a file under a line the session added to a ``.gitignore`` (``echo "dist/" >> .gitignore``,
  PowerShell's ``Add-Content .gitignore "data_working/"``) is no work to commit: a data
  folder moved out of git's way is not left uncommitted.
- GitButler's CLI (``but commit``, ``but push``) is read as git's; its commit takes every
  pending file, since it names the changes it commits by ids of its own. Opening a pull
  request (``gh pr create``, ``but pr new``) pushes its branch, as do the gh-stack extension's
  ``gh stack push`` and ``gh stack submit``. A command asked for its
  ``--help`` does nothing.
- a commit is **unpushed** until a ``git push`` after it, or until git says the branch is up
  to date with its upstream. That is told only when pushing is in play: the session pushed
  before, the user spoke of pushing, a reply of the last request says the work is not
  pushed, or git said the branch is ahead of its upstream ("use git push to publish your
  local commits"). Many users push themselves, and a commit is the work done.

Where the calls show no git state (Cursor keeps no results; files the user changed and the
agent left alone), the last reply's own word stands for it: "Not committed (left unstaged /
untracked): …" and "Nothing was pushed." are open items, under the same prefixes.

Files outside the project (a temporary folder, an agent's own folder such as
``~/.claude/plans``, a dot file of the home folder such as ``~/.zshrc``) are no work to
commit. Uncommitted files are told when git is in play in the session (it staged,
committed or pushed, the user spoke of committing or pushing, or a reply said something is
untracked or uncommitted, or offered to commit), or when the agent recorded the session's
git branch, the project being a repository: then only the files in the project's folder.
A session in a folder that is no repository, and never touches git, says nothing of it.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from palimpsest.scheduler import shell_commands
from palimpsest.scheduler.session_facts import clip

#: Files that are no part of a project's history: scratch folders, agents' own folders, git's own files, and
#: the home folder's dot files and folders (``~/.zshrc``, ``~/.gstack/...``), a user's and tools' own settings.
_OUTSIDE = re.compile(
    r"(?:^|[/\\])(?:tmp|var[/\\]folders|\.claude|\.codex|\.gemini|\.cursor|\.git)[/\\]|AppData[/\\]Local[/\\]Temp"
    r"|^(?:~|\$\{?HOME\}?)[/\\]\.",
    re.IGNORECASE,
)
#: A request that speaks of git's history: then what is left out of it matters.
GIT_WORDS = re.compile(r"\b(?:commit(?:s|ted|ting)?|push(?:ed|ing)?|git)\b", re.IGNORECASE)
#: A reply that speaks of what git has not recorded yet, or offers to commit ("The file is untracked. Want me to
#: commit it?").
GIT_STATE = re.compile(
    r"\buntracked\b|\buncommitted\b|\bnot (?:yet )?committed\b|\b(?:want me to|shall I|should I|like me to) commit\b",
    re.IGNORECASE,
)
#: ``gh`` and ``but`` subcommands that push the branch: a pull request opened, gh-stack's push and submit.
_PUBLISHING = (["pr", "create"], ["pr", "new"], *shell_commands.GH_STACK_PUSHES)
#: Words that speak of pushing, in a request, or in a last reply saying the work is not pushed yet.
PUSH_WORDS = re.compile(r"\bpush(?:ed|ing)?\b", re.IGNORECASE)
NOT_PUSHED = re.compile(r"\b(?:not (?:yet )?pushed|unpushed|(?:have not|haven't) (?:been )?pushed)\b", re.IGNORECASE)
#: A reply's own word that work stays out of git's history: "Not committed (left unstaged / untracked): …",
#: "Nothing was pushed.", "I haven't pushed; …". Where the session's calls show no git state (Cursor keeps no
#: results; the user's own edits), that word is all a later session has.
_DENIED = (
    r"\b(?:not|never|nothing (?:else )?(?:was|is|has been)|haven't|have not|hasn't|has not|isn't|is not|aren't|"
    r"are not|wasn't|was not|weren't|were not)\s+(?:yet\s+|been\s+)*"
)
_SAID_UNPUSHED = re.compile(rf"{_DENIED}pushed\b|\bunpushed\b", re.IGNORECASE)
_SAID_UNCOMMITTED = re.compile(
    rf"{_DENIED}(?:committed|staged)\b"
    r"|\b(?:left|remain(?:s|ing)?|still)\s+(?:unstaged|untracked|uncommitted)\b|^(?:uncommitted|unstaged|untracked)\b",
    re.IGNORECASE,
)
#: "Nothing is left uncommitted", "no files remain untracked": the reply says all is recorded.
_SAID_NONE_LEFT = re.compile(
    r"\b(?:nothing|none|no \w+)\s+(?:is\s+|are\s+|was\s+|were\s+)?(?:left|remain)", re.IGNORECASE
)
#: What ``git status`` says of commits the upstream branch lacks, and of a branch that has none it lacks.
_AHEAD = re.compile(r"\bYour branch is ahead of '[^']+' by \d+ commits?\b")
_UP_TO_DATE = re.compile(r"\bYour branch is up to date with '[^']+'")
#: What ``git status`` says of a working tree with nothing to commit.
_CLEAN = re.compile(r"\bnothing to commit\b", re.IGNORECASE)
#: How the two open items begin (a later session's commit or push settles them: `retrieval/standing.py`).
UNCOMMITTED = "uncommitted changes"
UNPUSHED = "committed, not pushed"
#: How many file names and commits an open item names.
SHOWN = 4


@dataclass
class GitProgress:
    """The session's files not yet committed and commits not yet pushed, as its steps go by."""

    pending: dict[str, bool] = field(default_factory=dict)  # path -> staged
    unpushed: list[str] = field(default_factory=list)
    created: set[str] = field(default_factory=set)
    committed: bool = False
    in_play: bool = False
    pushed: bool = False
    #: Whether git said the branch is ahead of its upstream: pushing is then in play.
    ahead: bool = False
    stashed: dict[str, bool] = field(default_factory=dict)
    #: The project's folder when the agent recorded a git branch for the session: the project is a repository, so
    #: what the session changed in it and left uncommitted is told though the session never ran git.
    repository: str | None = None
    #: What the session added to a ``.gitignore`` (``echo "dist/" >> .gitignore``, ``Add-Content .gitignore "data/"``):
    #: files under it are no work to commit.
    ignored: list[str] = field(default_factory=list)

    def wrote(self, path: str, action: str) -> None:
        """A file a successful call changed (``created``, ``edited``, ``deleted``, ...).

        What only looks like one is passed over: a shell variable (``mv "$SRC" "$DST"``),
        a word with no letter or digit (an ``=`` a command's parsing left), git's own files.
        A Windows path is kept with forward slashes, as git is given paths.
        """
        if _OUTSIDE.search(path) or path.startswith("$") or not re.search(r"[^\W_]", path):
            return
        path = path.replace("\\", "/")
        if action == "created":
            self.created.add(path)
        if action == "deleted" and path in self.created:  # a scratch file the session made and removed
            self.pending.pop(path, None)
            return
        self.pending[path] = False

    def ran(self, command: str, output: str) -> None:
        """A successful shell command: its ``git add``, ``commit``, ``push``, ``restore`` steps, in order.

        Then what git printed of the upstream: a branch ahead of it brings pushing into play
        (git's own hint is to push), one up to date with it after the session's commits
        means they were pushed, from here or elsewhere.
        """
        committing = False
        self.ignored += shell_commands.ignored_patterns(command)
        for words in shell_commands.parse(command).commands:
            if "--help" in words or "-h" in words:
                continue
            if words[0] in ("but", "gh"):  # GitButler's CLI; a pull request opened pushes its branch
                self._published(words[0], words[1:3], command, output)
            if words[0] != "git":
                continue
            rest = shell_commands.git_arguments(words[1:])
            verb, args = (rest[0], rest[1:]) if rest else ("", [])
            if verb == "add":
                self.in_play = True
                self._stage(args)
            elif verb in ("rm", "mv") and shell_commands.operands(args):  # git stages what it moves or removes
                self._stage(shell_commands.operands(args))
            elif verb == "commit":
                self.in_play = committing = True
                self._commit(args, command, output)
            elif verb == "push":
                self.in_play = self.pushed = True
                self.unpushed = []
            elif verb == "status" and _CLEAN.search(output) is not None:
                self.pending = {}
            elif verb == "status" and "-C" not in words[1:3]:  # another repository's status lists none of ours
                self._listed(_status_paths(output, short=bool({"-s", "--short", "--porcelain"} & set(args))))
            elif verb == "diff" and "-C" not in words[1:3] and _of_working_tree(args):
                staged = bool({"--cached", "--staged"} & set(args))
                self._listed([(path, staged) for path in _diff_paths(output, args)])
            elif verb == "stash":
                self._stash(shell_commands.operands(args)[:1])
            elif verb == "restore" or (verb == "checkout" and "--" in args):
                for path in [p for p in shell_commands.operands(args) if p != "--"]:
                    for known in [k for k in self.pending if _under(k, path)]:
                        del self.pending[known]
        if _AHEAD.search(output):
            self.in_play = self.ahead = True
        elif _UP_TO_DATE.search(output) and not committing:
            self.unpushed = []

    def _listed(self, paths: list[tuple[str, bool]]) -> None:
        """Files ``git status`` lists as changed: pending too, though the session may never have touched them.

        Changes made before the session, or by the user meanwhile, are as uncommitted at its end
        as its own (a branch made for one change leaves the earlier work of another in the tree).
        """
        for path, staged in paths:
            if _OUTSIDE.search(path):
                continue
            known = [k for k in self.pending if _under(k, path)]
            for key in known:
                self.pending[key] = self.pending[key] or staged
            if not known:
                self.pending[path] = staged

    def _published(self, program: str, verbs: list[str], command: str, output: str) -> None:
        if program == "but" and verbs[:1] == ["commit"]:
            self.in_play = True
            self._commit(["--all"], command, output)  # which ids name which files is GitButler's own: all of them
        elif (program == "but" and verbs[:1] == ["push"]) or verbs in _PUBLISHING:
            self.in_play = self.pushed = True
            self.unpushed = []

    def _stash(self, action: list[str]) -> None:
        if action in ([], ["push"], ["save"]):
            self.stashed, self.pending = {**self.stashed, **self.pending}, {}
        elif action in (["pop"], ["apply"]):
            self.pending.update(self.stashed)
            self.stashed = {}

    def _stage(self, args: list[str]) -> None:
        paths = shell_commands.operands(args)
        everything = not paths or any(a in (".", "-A", "--all", "-u", "--update", ":/") for a in args)
        for known in self.pending:
            if everything or any(_under(known, path) for path in paths):
                self.pending[known] = True

    def _commit(self, args: list[str], command: str, output: str) -> None:
        made = shell_commands.commit_made(command, output)
        if made is None and re.search(r"\bnothing (?:added )?to commit\b", output):
            return
        every = any(a in ("-a", "--all") or re.fullmatch(r"-[a-zA-Z]*a[a-zA-Z]*", a) for a in args)
        paths = shell_commands.operands(_without_values(args))
        for known in list(self.pending):
            if every or self.pending[known] or any(_under(known, path) for path in paths):
                del self.pending[known]
        self.committed = True
        subject = shell_commands.commit_subject(command)
        self.unpushed.append(made[0] if made else f'"{clip(subject, 60)}"' if subject else "a commit")

    def open_items(self, asked_of_git: bool, push_spoken: bool) -> list[str]:
        """What is left out of git's history at the end, as open items (see the module docstring for when)."""
        items: list[str] = []
        if self.in_play or asked_of_git:
            items += self._uncommitted(list(self.pending))
        if self.unpushed and (self.pushed or push_spoken or self.ahead):
            items.append(f"{UNPUSHED}: {_listing(list(dict.fromkeys(self.unpushed)))}")
        return items

    def left_in_project(self, asked_of_git: bool) -> list[str]:
        """What a session that never touched git changed in its repository's folder: open, after all else.

        Told last, since many a user commits by hand; a new session still learns where the
        work it finds came from.
        """
        if self.in_play or asked_of_git or self.repository is None:
            return []
        folder = self.repository
        return self._uncommitted([path for path in self.pending if _inside(path, folder)])

    def _uncommitted(self, pending: list[str]) -> list[str]:
        pending = [path for path in pending if not any(_ignores(pattern, path) for pattern in self.ignored)]
        names = list(dict.fromkeys(path.rstrip("/").rsplit("/", 1)[-1] for path in pending))
        if not names:
            return []
        when = "after the last commit" if self.committed else "not committed in the session"
        return [clip(f"{UNCOMMITTED} ({when}): {_listing(names)}", 160)]


def said_left_out(sentences: list[str], told: list[str]) -> list[str]:
    """The sentences of a last reply saying work is not committed or not pushed, as open items.

    Each is told under the prefix of the item the calls would have given (so a later
    session's commit or push settles it), unless ``told`` holds that item already, or the
    sentence itself as another step ("... those were never committed").
    """
    items: list[str] = []
    for sentence in sentences:
        if _SAID_NONE_LEFT.search(sentence):
            continue
        if _SAID_UNPUSHED.search(sentence):
            prefix = UNPUSHED
        elif _SAID_UNCOMMITTED.search(sentence):
            prefix = UNCOMMITTED
        else:
            continue
        if any(sentence[:60] in item for item in told):
            continue
        if not any(item.startswith(prefix) for item in told + items):
            items.append(clip(f"{prefix}, the last reply says: {sentence}", 200))
    return items


def _listing(names: list[str]) -> str:
    """The first `SHOWN` names, and how many more there are."""
    return ", ".join(names[:SHOWN]) + (f" +{len(names) - SHOWN}" if len(names) > SHOWN else "")


#: ``git status``'s long format: the section a file is listed in, and its line (``\tmodified:   src/a.ts``).
_SECTION = re.compile(r"^(Changes to be committed|Changes not staged for commit|Untracked files):")
_LISTED = re.compile(r"^\t(?:(?:modified|new file|deleted|renamed|copied|typechange):\s+)?(?:.* -> )?(\S.*?)\s*$")
#: ``git status --short``: two status letters, then the path (``R  old -> new``: the new one). Two blanks are no
#: status: an indented line another command of the same call printed ("   FAILED (failures=11)").
_SHORT = re.compile(r"^([ MADRCUT?!])([ MADRCUT?!]) (?:.* -> )?(\S.*?)\s*$")


def _status_paths(output: str, *, short: bool) -> list[tuple[str, bool]]:
    """The tracked files ``git status`` lists as changed, each with whether it is staged.

    Untracked files are left out: a cache or a local note no one committed (``.pnpm-store``)
    is no work; the session's own new files are pending already.
    """
    found: list[tuple[str, bool]] = []
    section = ""
    for line in output.splitlines():
        if short:
            match = _SHORT.match(line)
            if match is not None and match.group(1) not in "?!" and match.group(1) + match.group(2) != "  ":
                found.append((match.group(3).strip('"'), match.group(1) != " "))
            continue
        heading = _SECTION.match(line)
        if heading is not None:
            section = heading.group(1)
        elif section and not line.strip():
            continue
        elif section == "Untracked files":
            continue
        elif section and (listed := _LISTED.match(line)) is not None:
            found.append((listed.group(1).strip('"'), section == "Changes to be committed"))
        elif section and not line.startswith((" ", "\t")):
            section = ""
    return found


def _of_working_tree(args: list[str]) -> bool:
    """Whether ``git diff ARGS`` shows changes not yet committed: no revision, or ``HEAD`` alone, before ``--``.

    ``git diff main``, ``git diff HEAD~1`` or ``git diff a1b2c3 d4e5f6`` compare commits: what
    they list may be committed already.
    """
    before = args[: args.index("--")] if "--" in args else args
    return shell_commands.operands(before) in ([], ["HEAD"])


#: The files a diff shows: its headers (``diff --git a/src/x.ts b/src/x.ts``), ``--stat`` lines (`` src/x.ts | 4 +-``).
_DIFF_HEADER = re.compile(r"^diff --git a/.+? b/(.+?)\s*$")
_DIFF_STAT = re.compile(r"^ (\S.*?)\s+\|\s+(?:\d+|Bin)")
#: A line of ``--name-only``: a relative path with a folder or an extension, no space, no colon, no commit id.
_NAME_LINE = re.compile(r"^(?![0-9a-f]{7,40}$)[^\s:]*[./][^\s:]*[^\s:./]$")


def _diff_paths(output: str, args: list[str]) -> list[str]:
    """The files ``git diff`` lists as changed, in its full, ``--stat``, ``--name-only`` or ``--name-status`` form."""
    lines = output.splitlines()
    if "--name-only" in args:  # lines of other commands on the same line may be mixed in: a commit id, a label
        return [line.strip() for line in lines if _NAME_LINE.match(line.strip())]
    if "--name-status" in args:
        return [line.split("\t")[-1].strip() for line in lines if "\t" in line]
    header = [found.group(1) for line in lines if (found := _DIFF_HEADER.match(line)) is not None]
    if header:
        return list(dict.fromkeys(header))
    return [found.group(1) for line in lines if (found := _DIFF_STAT.match(line)) is not None and "=>" not in line]


def _ignores(pattern: str, path: str) -> bool:
    """Whether a ``.gitignore`` line the session added covers ``path`` (a folder and what is under it, or a glob)."""
    pattern = pattern.strip().strip("/")
    if not pattern or pattern.startswith("!"):
        return False
    path = path.strip("/")
    return (
        path == pattern
        or path.startswith(f"{pattern}/")
        or f"/{pattern}/" in f"/{path}/"
        or fnmatch.fnmatch(path.rsplit("/", 1)[-1], pattern)
    )


def _without_values(args: list[str]) -> list[str]:
    """A commit's arguments without its options' values (``-m MESSAGE``, ``-F FILE``, ``--author NAME``)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-m", "--message", "-F", "--file", "--author", "-c", "-C", "--date", "--fixup", "--squash"):
            skip = True
        elif not re.fullmatch(r"-[a-zA-Z]*m", arg):
            kept.append(arg)
        else:
            skip = True  # -am MESSAGE
    return kept


def _inside(path: str, folder: str) -> bool:
    """Whether a file a tool wrote lies in the project's folder (a relative path does)."""
    folder = folder.replace("\\", "/").rstrip("/")
    if not re.match(r"^(?:/|~|[A-Za-z]:/)", path):
        return True
    return path.lower().startswith(folder.lower() + "/")


def _under(path: str, given: str) -> bool:
    """Whether ``given`` (as git was given it, relative) names ``path`` (as a tool wrote it, maybe absolute).

    Both are compared with forward slashes (`GitProgress.wrote` keeps them so): git is given
    ``.github/workflows/x.yml`` for the ``D:\\repo\\.github\\workflows\\x.yml`` a tool wrote.
    """
    given = given.strip().replace("\\", "/").rstrip("/")
    if given in ("", "."):
        return True
    path = path.rstrip("/")
    return path == given or path.endswith("/" + given) or f"/{given}/" in f"/{path}" or path.startswith(given + "/")
