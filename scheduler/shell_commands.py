"""What a shell command does: only read, change state, or check (build, test, lint or run) the project.

A memory of what a session did must never present a command that only looked around
(``ls``, ``cat``, ``git status``, ``grep``) as something done, and should name what a
command changed rather than quote it: "Deleted docs/blue.md", not ``rm docs/blue.md``
passed. The rules, on the command line as the agent ran it (``bash -lc`` already
unwrapped, see `session_facts.shell_command`):

- The line is split into simple commands at ``&&``, ``||``, ``;`` and ``|``; a ``\\``
  continuation joins lines, a heredoc's body is skipped. Words before the program that
  set variables (``FOO=1 cmd``) and wrappers (``sudo``, ``env``, ``time``, ``nohup``,
  ``command``, ``rtk``) are skipped; ``cd DIR`` only moves. In a loop or condition the
  shell's own words (``while``, ``do``, ``then``) are skipped too, and its head and end
  (``for f in ...``, ``read pr``, ``done``) run nothing: a loop of reads reads.
- **read**: every simple command is one of `READ_PROGRAMS` (or a read-only ``git``/``gh``
  subcommand, ``sed`` without ``-i``, ``find`` without ``-delete``/``-exec``, an interpreter's
  inline code that prints and neither writes nor runs anything: ``python3 -c "...print(...)"``,
  a package manager's query such as ``npm view``, any tool asked for ``--help`` or
  ``--version``; ``git branch`` and ``git tag`` with a listing option such as ``--contains``;
  any other tool whose subcommand asks what there is: ``entire session list``, ``entire auth
  status``, ``docker ps``; PowerShell's reading cmdlets such as ``Get-Command`` and
  ``Select-Object``, a string or variable printed, a variable set to a value)
  and no output goes to a file (``>``/``>>`` to ``/dev/null`` or a descriptor does not count).
- **check**: a simple command builds, tests, lints or runs the project (`CHECKS`:
  ``pytest``, ``go test``, ``mise run lint``, ``npm test``, ``cargo build``, ``make``, ...).
- **state**: anything that writes a file (a redirect, ``tee``, ``sed -i``), or a program of
  `STATE_PROGRAMS` (``rm``, ``mv``, ``git commit``, ``npm install``, ``gh pr create``, ...),
  or a PowerShell cmdlet that writes (``Set-Content``, ``Add-Content``, ``Out-File``,
  ``New-Item``, ``Remove-Item``, ``Copy-Item``, ``Move-Item``, ``Rename-Item`` and their
  aliases; in a line PowerShell runs, a backslash separates folders and escapes nothing).
- **other**: the rest (a script of the project, ``curl``): it may change state, so it is
  no read-only command, but nothing says what it did.

`effects` says what a state change did, each as a sentence of our own with the files it
touched: files deleted, moved, written or appended to, staged, branches created, renamed,
merged or pushed, pull requests opened. A file under a temporary folder (``/tmp``,
``$TMPDIR``, a variable ``mktemp`` set) is scratch: no change of the project.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Category = Literal["read", "check", "state", "other"]

#: Programs that only read (when no output of theirs goes to a file).
READ_PROGRAMS = frozenset(
    {
        "ls", "ll", "la", "dir", "cat", "bat", "head", "tail", "less", "more", "wc", "pwd", "tree", "stat", "du",
        "df", "which", "whereis", "type", "echo", "printf", "nl", "awk", "gawk", "jq", "yq", "whoami", "printenv",
        "env", "realpath", "readlink", "file", "date", "uname", "hostname", "id", "ps", "top", "diff", "cmp",
        "sort", "uniq", "cut", "tr", "basename", "dirname", "true", "false", "sleep", "history", "man", "grep",
        "egrep", "fgrep", "rg", "ag", "ack", "fd", "locate", "od", "xxd", "hexdump", "strings", "column", "fold",
        "md5sum", "sha256sum", "shasum", "test", "[", "lsof", "netstat", "ss", "free", "uptime", "tput", "sed",
        "find", "xargs", "seq", "yes", "cd", "pushd", "popd", "set", "source", ".", "base64", "json.tool",
        "pgrep", "pidof", "nproc", "lscpu", "lsblk", "who", "groups", "sw_vers", "arch",
    }
)  # fmt: skip
#: ``git`` subcommands that only read.
_GIT_READ = frozenset(
    {
        "status", "log", "diff", "show", "rev-parse", "ls-files", "ls-tree", "blame", "describe", "reflog",
        "fetch", "grep", "shortlog", "cat-file", "rev-list", "merge-base", "whatchanged", "count-objects",
        "check-ignore", "name-rev", "for-each-ref", "show-ref", "ls-remote", "help", "version", "var",
    }
)  # fmt: skip
_GH_READ_VERBS = frozenset({"view", "list", "diff", "checks", "status", "search"})
#: Program (and first subcommand, where it matters) that builds, tests, lints or runs the project.
CHECKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pytest", ()), ("py.test", ()), ("tox", ()), ("nox", ()), ("mypy", ()), ("ruff", ()), ("pyright", ()),
    ("flake8", ()), ("pylint", ()), ("black", ()), ("isort", ()), ("unittest", ()),
    ("go", ("test", "build", "vet", "run", "generate")), ("golangci-lint", ()), ("gofmt", ()),
    ("cargo", ("test", "build", "check", "clippy", "run", "fmt", "bench")),
    ("npm", ("test", "run", "build", "t", "ci")), ("pnpm", ("test", "run", "build", "lint")),
    ("yarn", ("test", "run", "build", "lint")), ("bun", ("test", "run", "build")),
    ("npx", ()), ("bunx", ()), ("pnpx", ()), ("biome", ("check", "lint", "format", "ci")),
    ("jest", ()), ("vitest", ()), ("tsc", ()), ("eslint", ()), ("prettier", ()), ("playwright", ()),
    ("make", ()), ("mise", ("run", "r", "test", "lint", "build")), ("just", ()), ("task", ()), ("rake", ()),
    ("rspec", ()), ("mvn", ()), ("gradle", ()), ("gradlew", ()), ("bazel", ()), ("dotnet", ("test", "build", "run")),
    ("swift", ("test", "build")), ("xcodebuild", ()), ("ctest", ()), ("cmake", ("--build",)),
    ("uvicorn", ()), ("gunicorn", ()), ("flask", ("run",)), ("django-admin", ("test", "runserver")),
    ("deno", ("test", "run", "lint", "check")), ("phpunit", ()), ("composer", ("test",)),
    ("docker", ("build",)), ("podman", ("build",)),
)  # fmt: skip
#: Runners whose argument is the real command (``uv run pytest``, ``python -m pytest``).
_RUNNERS = {"uv": "run", "poetry": "run", "pipenv": "run", "hatch": "run", "pdm": "run", "bundle": "exec", "rye": "run"}
#: Programs that change state whatever their arguments (the rest depends on the subcommand).
STATE_PROGRAMS = frozenset(
    {"rm", "rmdir", "mv", "cp", "mkdir", "touch", "chmod", "chown", "ln", "tee", "truncate", "unlink", "install",
     "patch", "kill", "pkill", "apt", "apt-get", "brew", "dnf", "yum", "kubectl", "terraform", "unzip", "tar",
     "export"}
)  # fmt: skip
#: Programs that run the command after them: ``rtk`` (a proxy that trims output for agents: ``rtk git status``) too.
_WRAPPERS = frozenset(
    {"sudo", "env", "time", "nohup", "command", "exec", "nice", "stdbuf", "timeout", "gtimeout", "rtk"}
)
#: ``timeout`` (GNU coreutils' name on macOS: ``gtimeout``), which runs the command after its duration.
_TIMEOUTS = frozenset({"timeout", "gtimeout"})
#: A wrapper's options that take the next word (``timeout -s KILL``, ``nice -n 10``, ``sudo -u postgres``): that word
#: is no program. Each wrapper its own: ``env -i`` and ``sudo -i`` take none.
_WRAPPER_VALUES = {
    **dict.fromkeys(_TIMEOUTS, frozenset({"-s", "-k", "--signal", "--kill-after"})),
    "nice": frozenset({"-n"}),
    "sudo": frozenset({"-u", "-g", "--user", "--group"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "time": frozenset({"-o", "-f"}),
}
#: Programs that take a toolchain first (``cargo +nightly build``), as rustup's proxies do.
_TOOLCHAIN_PROGRAMS = frozenset({"cargo", "rustc", "rustdoc", "rustfmt", "cargo-clippy"})
#: ``timeout``'s duration before the command it limits (``60``, ``5s``, ``1.5m``).
_DURATION = re.compile(r"^\d+(?:\.\d+)?[smhd]?$")
#: The shell's words before a command in a loop or condition (``while read pr; do gh pr view "$pr"; done``).
_KEYWORDS = frozenset({"if", "then", "else", "elif", "while", "until", "do", "!", "try", "{", "}", "catch", "finally"})
#: Simple commands of a loop or condition that run nothing of their own: its head and its end.
_SHELL_STEPS = frozenset({"for", "read", "done", "fi", "esac", "true", ":"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "|&", ";;"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
#: Redirect targets that are no file; a ``)`` may follow when the redirect closes ``$(... 2>/dev/null)``.
_NOT_FILES = re.compile(r"^(?:/dev/(?:null|stdout|stderr|tty)|&?\d*|-)\)*$")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


@dataclass(frozen=True)
class Effect:
    """One thing a command changed: a sentence of our own, its subject, and the files it touched."""

    text: str
    subject: str
    files: tuple[tuple[str, str], ...] = ()


@dataclass
class Parsed:
    """A command line as simple commands (each a list of words) and the files its output goes to."""

    commands: list[list[str]] = field(default_factory=list)
    written: list[tuple[str, bool]] = field(default_factory=list)  # (path, appended)


def _logical_lines(command: str) -> list[str]:
    """The lines that hold commands: continuations joined, heredoc bodies left out, and a quoted word that goes
    on over several lines (``python3 -c "`` then the script) kept whole with the line it opened on.
    """
    lines = command.replace("\\\n", " ").splitlines()
    kept: list[str] = []
    ending: str | None = None
    quoted = False
    for line in lines:
        if ending is not None:
            if line.strip() == ending:
                ending = None
            continue
        if quoted:
            kept[-1] += "\n" + line
        else:
            kept.append(line)
        heredoc = _HEREDOC.search(line)
        if heredoc is not None:
            ending, quoted = heredoc.group(1), False
            continue
        quoted = _open_quote(kept[-1])
    return kept


def _open_quote(text: str) -> bool:
    """Whether a quote opened in ``text`` is still open at its end (a backslash escapes outside single quotes)."""
    quote = ""
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and not quote:
            break  # a comment: its quotes open nothing
    return bool(quote)


@functools.lru_cache(maxsize=4096)
def parse(command: str) -> Parsed:
    """The simple commands and output files of a command line (see the module docstring).

    Cached: a session asks the same command's kind, effects and family many times. The
    result is shared, so it is never changed by a caller.
    """
    parsed = Parsed()
    for line in _logical_lines(command):
        if _POWERSHELL.search(line):  # its backslashes separate folders (``code\\model.py``); none escapes
            line = line.replace("\\", "/")
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens: list[str] = []
        try:
            tokens.extend(lexer)
        except ValueError:  # a quote left open (a heredoc's ``"$(cat <<'EOF'`` goes on below): the words before it
            pass
        words: list[str] = []
        index = 0
        while index < len(tokens):
            token = tokens[index]
            if token in _SEPARATORS:
                if words:
                    parsed.commands.append(words)
                words = []
            elif token in (">&", "<&", "&>&"):
                if words and words[-1].isdigit():
                    words.pop()  # 2>&1: a descriptor copied, no file
                index += 1
            elif token in _REDIRECTS or (token.endswith(">") and token.rstrip(">").isdigit()):
                if words and words[-1].isdigit():
                    words.pop()  # the descriptor of 2>file
                target = tokens[index + 1] if index + 1 < len(tokens) else ""
                if target and not _NOT_FILES.match(target) and not target.startswith("&"):
                    parsed.written.append((target, token.endswith(">>")))
                index += 1
            elif token in ("<", "<<", "<<<", "<<-"):
                index += 1
            else:
                words.append(token)
            index += 1
        if words:
            parsed.commands.append(words)
    parsed.commands = [_program_first(words) for words in parsed.commands]
    parsed.commands = [words for words in parsed.commands if words]
    unwrapped: list[list[str]] = []
    for words in parsed.commands:
        script = _shell_script(words[0], words[1:])
        if script is None:
            unwrapped.append(words)
            continue
        inner = parse(script)  # what the shell runs, read as if typed
        unwrapped += inner.commands
        parsed.written += inner.written
    parsed.commands = unwrapped
    return parsed


def _program_first(words: list[str]) -> list[str]:
    """Words from the program on: variable settings and wrappers before it skipped, its path dropped."""
    index = 0
    while index < len(words):
        word = words[index]
        if "=" in word and not word.startswith(("-", "=")) and re.match(r"^[A-Za-z_]\w*=", word):
            index += 1
        elif word in _KEYWORDS:
            index += 1
        elif (wrapper := word.rsplit("/", 1)[-1]) in _WRAPPERS:
            if word == "command" and words[index + 1 : index + 2] in (["-v"], ["-V"]):
                return ["which", *words[index + 2 :]]  # ``command -v entire`` looks the program up, runs nothing
            index += 1
            valued = _WRAPPER_VALUES.get(wrapper, frozenset())
            while index < len(words) and words[index].startswith("-"):
                index += 2 if words[index] in valued else 1
            if wrapper in _TIMEOUTS and index < len(words):
                index += 1 if _DURATION.match(words[index]) else 0
            if word == "rtk" and index < len(words) and words[index] == "proxy":  # ``rtk proxy CMD``: CMD untrimmed
                index += 1
        else:
            break
    rest = words[index:]
    if rest:
        rest = [rest[0].lstrip("({[").rsplit("/", 1)[-1], *rest[1:]]
    if len(rest) > 1 and rest[0] in _TOOLCHAIN_PROGRAMS and rest[1].startswith("+"):
        rest = [rest[0], *rest[2:]]  # ``cargo +1.96.0 test`` is ``cargo test`` on another toolchain
    return rest


def _unwrap_runner(words: list[str]) -> list[str]:
    """The command a runner runs (``uv run pytest`` → ``pytest``; ``python -m pytest`` → ``pytest``)."""
    program = words[0]
    if _RUNNERS.get(program) and len(words) > 2 and words[1] == _RUNNERS[program]:
        return _program_first(words[2:]) or words
    if re.fullmatch(r"python[\d.]*", program) and len(words) > 2 and words[1] == "-m":
        return words[2:]
    return words


def _shell_script(program: str, rest: list[str]) -> str | None:
    """The command line a shell is handed: ``bash -c "..."``, Git Bash's ``bash.exe -c``, ``powershell -Command``.

    Claude Code on Windows wraps many commands so: ``powershell -Command "Set-Location 'c:/app'; npm test"``.
    """
    name = program.lower().removesuffix(".exe")
    if name in ("sh", "bash", "zsh") and len(rest) >= 2 and rest[0] in ("-c", "-lc"):
        return rest[1]
    if name in ("powershell", "pwsh"):
        flags = [word.lower() for word in rest]
        for flag in ("-command", "-c"):
            if flag in flags and flags.index(flag) + 1 < len(rest):
                return rest[flags.index(flag) + 1]
    return None


def _category(words: list[str]) -> Category:
    """What one simple command does."""
    words = _unwrap_runner(words)
    program, rest = words[0], words[1:]
    script = _shell_script(program, rest)
    if script is not None:  # a shell handed to xargs (``xargs -I{} sh -c '...'``)
        return category(script)
    if "--help" in rest or "--version" in rest or "--list" in rest or rest[:1] == ["help"]:
        return "read"  # any tool asked how it is used (``entire checkpoint explain --help``) or to list only prints
    if rest and rest[0] in _PACKAGE_QUERIES.get(program, ()):
        return "read"
    for name, subcommands in CHECKS:
        if program == name and (not subcommands or (rest and rest[0] in subcommands)):
            return "check"
    if program == "git":
        return _git_category(rest)
    if program == "gh":
        verbs = [word for word in rest if not word.startswith("-")]
        if verbs[:1] == ["api"]:
            return "state" if _api_effects(rest) else "read"
        return "read" if len(verbs) >= 2 and verbs[1] in _GH_READ_VERBS else "state"
    if program in ("sed", "perl") and any(word == "-i" or word.startswith(("-i", "--in-place")) for word in rest):
        return "state"
    if program == "find" and any(word in ("-delete", "-exec", "-execdir", "-fprint") for word in rest):
        return "state" if "-delete" in rest or any(w in ("rm", "mv", "cp", "chmod") for w in rest) else "read"
    if program == "xargs":
        inner = _xargs_command(rest)
        return _category(inner) if inner else "read"
    if program == "sort" and any(word.startswith("-o") for word in rest):
        return "state"
    if program in READ_PROGRAMS or program in _SHELL_STEPS or _inline_read(program, rest) or _sql_read(program, rest):
        return "read"
    if _READ_OPTIONS.get(program, frozenset()) & set(rest) or _fetch_only(program, rest):
        return "read"
    if program in STATE_PROGRAMS or program.lower() in _POWERSHELL_WRITES or _adds_dependency(program, rest):
        return "state"
    if program == "but" and _GITBUTLER_CHANGES.match(" ".join(operands(rest)[:2])):
        return "state"
    if _powershell_read(program, rest) or _queries(rest):
        return "read"
    return "other"


#: GitButler CLI subcommands that change the repository (``but commit``, ``but push``, ``but pr new``).
_GITBUTLER_CHANGES = re.compile(r"^(?:commit|push|pr new|branch new|absorb|amend|undo|rub)\b")
#: Subcommands that ask a tool what is there (``entire checkpoint list``, ``entire auth status``,
#: ``docker ps``, ``vercel inspect URL``) rather than change anything.
_QUERY_VERBS = frozenset(
    {"list", "ls", "show", "get", "view", "status", "info", "version", "describe", "inspect", "whoami", "search",
     "logs", "ps", "explain", "doctor"}
)  # fmt: skip
#: A line PowerShell runs: a cmdlet (``Set-Content``), an environment variable, a .NET type (``[System.IO.File]``).
_POWERSHELL = re.compile(
    r"\b(?:Get|Set|New|Remove|Copy|Move|Rename|Add|Out|Select|Test|Write|Invoke|ForEach|Where|Join|Split|Start|"
    r"Stop|Import|Export|ConvertTo|ConvertFrom|Resolve|Push|Pop|Measure|Sort|Format)-[A-Z][A-Za-z]+\b(?!:)"
    r"|\$env:|\[(?:System\.)?IO\."
)
#: PowerShell's cmdlets that write, lowercased (PowerShell ignores case), with their aliases, and what each does.
_POWERSHELL_WRITES = {
    "set-content": "written", "out-file": "written", "add-content": "edited", "new-item": "created", "ni": "created",
    "remove-item": "deleted", "ri": "deleted", "del": "deleted", "erase": "deleted", "copy-item": "copied",
    "cpi": "copied", "copy": "copied", "move-item": "moved", "mi": "moved", "move": "moved",
    "rename-item": "renamed", "rni": "renamed", "ren": "renamed",
}  # fmt: skip
#: Their parameters that take no value.
_POWERSHELL_SWITCHES = frozenset(
    {"-force", "-recurse", "-nonewline", "-append", "-whatif", "-confirm", "-passthru", "-noclobber", "-container"}
)
#: PowerShell's verbs of cmdlets that only read or print (``Get-Command``, ``Select-Object``, ``Test-Path``).
_POWERSHELL_READ = re.compile(
    r"(?:Get|Test|Select|Format|Measure|Where|Write|Find|Resolve|Compare|Sort|Group|ConvertTo|ConvertFrom|Show|"
    r"Split|Join)-\w+|Set-Location|Push-Location|Pop-Location|Out-(?:String|Host|Null)",
    re.IGNORECASE,
)


def _queries(rest: list[str]) -> bool:
    """Whether a tool's subcommand is a query: its first word, or one after words such as ``repo mirror``.

    ``config`` alone prints the configuration (``docker compose config``); followed by more
    words it may set it (``npm config set``).
    """
    words = operands(rest)
    for index, word in enumerate(words[:3]):
        if word in _QUERY_VERBS or (word == "config" and index == len(words) - 1):
            return True
        if re.fullmatch(r"[a-z][a-z-]*", word) is None:
            return False
    return False


def _powershell_read(program: str, rest: list[str]) -> bool:
    """Whether a PowerShell step only reads or prints: a reading cmdlet, a value printed, or a variable set to a value.

    ``$env:Path += ";C:\\tools"`` and ``$dest = "C:\\bin"`` only set the shell's variables; a
    variable set to what a command returns (``$r = Invoke-RestMethod ...``) is that command.
    """
    if program.startswith("$") and rest[:1] in (["="], ["+="]):
        value = rest[1:]
        if value and (_POWERSHELL_READ.fullmatch(value[0]) or re.fullmatch(r"[A-Z][a-z]+-[A-Z]\w+", value[0])):
            return _category(value) == "read"
        return True
    if not rest and (program.startswith("$") or " " in program):
        return True  # a variable (``$items``) or a string (``"--- a heading ---"``) alone is printed
    return _POWERSHELL_READ.fullmatch(program) is not None


def _xargs_command(rest: list[str]) -> list[str]:
    """The command ``xargs`` runs, its own options skipped (``xargs -0 -I{} biome check {}`` → ``biome check {}``)."""
    index = 0
    while index < len(rest) and rest[index].startswith("-"):
        index += 2 if rest[index] in ("-I", "-n", "-P", "-L", "-d", "-s", "-E") else 1
    return _program_first(rest[index:])


#: Interpreters given code inline (``python3 -c CODE``, ``node -e CODE``), with that flag.
_INLINE_CODE = {
    "python": ("-c",),
    "node": ("-e", "-p"),
    "bun": ("-e", "--eval", "-p", "--print"),
    "ruby": ("-e",),
    "perl": ("-e",),
}
#: What inline code that writes, deletes or runs something else says.
_INLINE_WRITES = re.compile(
    r"""open\([^)]*['"][wax+]|\.write|unlink|remove|rmtree|rename|replace\(|mkdir|makedirs|subprocess|os\.system|"""
    r"""writeFile|appendFile|rmSync|execSync|spawn|File\.write|chmod|shutil|requests\.(?:post|put|delete)|\.save\("""
)


def _inline_read(program: str, rest: list[str]) -> bool:
    """Whether an interpreter runs inline code that only prints what it read (``python3 -c "import json; print(...)"``).

    Agents look into JSON and logs this way; code that prints nothing is run for its effect.
    """
    flags = _INLINE_CODE.get(re.sub(r"[\d.]+$", "", program), ())
    if len(rest) < 2 or rest[0] not in flags:
        return False
    code = rest[1]
    return re.search(r"\bprint\b|console\.log|\bputs\b|\bp\(", code) is not None and _INLINE_WRITES.search(code) is None


#: Options that make a program print what is there and do nothing else: ``ssh -G host`` (the configuration it
#: would use), ``ssh-keygen -lf KEY`` (a key's fingerprint), ``ssh-add -l`` (the agent's keys).
_READ_OPTIONS: dict[str, frozenset[str]] = {
    "ssh": frozenset({"-G", "-V", "-Q"}),
    "ssh-keygen": frozenset({"-l", "-lf", "-F", "-y", "-yf", "-L", "-Lf", "-B"}),
    "ssh-add": frozenset({"-l", "-L"}),
}
#: curl's options that send a body, and PowerShell's (``Invoke-RestMethod -Body``).
_SENDS = re.compile(r"^(?:-d|--data(?:-\w+)?|-F|--form(?:-string)?|-T|--upload-file|--json|-body|-infile|-form)$")
#: PowerShell's cmdlets that fetch a URL (and their aliases).
_WEB_CMDLETS = frozenset({"invoke-restmethod", "invoke-webrequest", "irm", "iwr"})


def _fetch_only(program: str, rest: list[str]) -> bool:
    """Whether ``curl`` or PowerShell's web cmdlets only fetch a URL: a health probe, an API read, a page.

    No body sent, no method but GET or HEAD, and no output kept but in a temporary folder
    (``curl -o /tmp/schema.json``); ``-O`` saves into the working folder.
    """
    curl = program == "curl"
    if not curl and program.lower() not in _WEB_CMDLETS:
        return False
    for index, raw in enumerate(rest):
        word, value = raw.lower(), rest[index + 1] if index + 1 < len(rest) else ""
        if _SENDS.match(word) or (curl and raw in ("-O", "--remote-name", "--remote-name-all")):
            return False
        method = value if raw in ("-X", "--request") or word == "-method" else None
        method = raw[2:] if curl and raw.startswith("-X") and len(raw) > 2 else method
        if method is not None and method.upper() not in ("GET", "HEAD"):
            return False
        kept = raw in ("-o", "--output") if curl else word == "-outfile"
        if kept and _NOT_FILES.match(value) is None and _TEMPORARY.match(value) is None:
            return False
    return True


#: Database shells given their SQL on the command line (``sqlite3 chat.db "SELECT ..."``, ``psql -c "..."``).
_SQL_CLIENTS = frozenset({"sqlite3", "psql", "mysql", "duckdb"})
_SQL_READ = re.compile(r"^\s*(?:select|pragma|explain|show|describe|with)\b|^\s*\.(?:tables|schema|indexes)\b", re.I)
_SQL_WRITE = re.compile(
    r"\b(?:insert|update|delete|drop|create|alter|replace|truncate|vacuum|attach|grant|revoke)\b|^\s*\.(?:import|restore)",
    re.IGNORECASE,
)


def _sql_read(program: str, rest: list[str]) -> bool:
    """Whether a database shell only queries: its SQL reads (``SELECT``, ``PRAGMA``, ``.schema``), none writes."""
    if program not in _SQL_CLIENTS:
        return False
    statements = [word for word in rest if _SQL_READ.match(word)]
    return bool(statements) and not any(_SQL_WRITE.search(word) for word in statements)


def _git_category(rest: list[str]) -> Category:
    rest = git_arguments(rest)
    words = [word for word in rest if not word.startswith("-")]
    flags = [word for word in rest if word.startswith("-")]
    verb = words[0] if words else ""
    if not verb or verb in _GIT_READ:
        return "read"
    if verb == "branch":
        changing = {"-m", "-M", "-d", "-D", "-c", "-C", "--move", "--delete", "--copy", "-u", "--set-upstream-to"}
        return "state" if (set(flags) & changing or (len(words) > 1 and not _lists(flags))) else "read"
    if verb == "remote":
        return "state" if len(words) > 1 and words[1] in ("add", "remove", "rm", "rename", "set-url") else "read"
    if verb == "tag":
        return "state" if len(words) > 1 and not _lists(flags) else "read"
    if verb == "stash":
        return "read" if len(words) > 1 and words[1] in ("list", "show") else "state"
    if verb == "config":
        if _CONFIG_REMOVES & set(flags):
            return "state"
        return "state" if len(words) > 2 and not {"--get", "--list", "-l", "--get-all"} & set(flags) else "read"
    if verb == "worktree":
        return "read" if len(words) > 1 and words[1] == "list" else "state"
    return "state"


#: Options that make ``git branch`` or ``git tag`` list (``--contains X``, ``--list 'pat*'``), whatever words follow.
_LISTING = frozenset(
    {"-l", "--list", "-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--contains", "--no-contains",
     "--merged", "--no-merged", "--points-at", "--show-current", "-n", "--sort", "--format", "--column"}
)  # fmt: skip


def _lists(flags: list[str]) -> bool:
    """Whether ``git branch`` / ``git tag`` options ask for a listing (``--sort=-version:refname`` included)."""
    return any(flag.split("=", 1)[0] in _LISTING or re.fullmatch(r"-n\d*", flag) for flag in flags)


#: Package managers' subcommands that only ask the registry or the tree (``npm view agentv dist-tags``).
_PACKAGE_QUERIES: dict[str, tuple[str, ...]] = {
    "npm": ("view", "info", "show", "v", "ls", "list", "outdated", "search", "whoami", "explain", "why", "ping"),
    "pnpm": ("view", "info", "ls", "list", "outdated", "why", "search"),
    "yarn": ("info", "list", "outdated", "why", "npm"),
    "bun": ("pm",),
    "pip": ("show", "list", "freeze", "index"),
    "pip3": ("show", "list", "freeze", "index"),
    "cargo": ("tree", "search", "metadata"),
}
#: Package managers' subcommands that add, remove or install dependencies.
_DEPENDENCY_VERBS: dict[str, tuple[str, ...]] = {
    "pip": ("install", "uninstall"),
    "pip3": ("install", "uninstall"),
    "npm": ("install", "i", "add", "uninstall"),
    "pnpm": ("add", "install", "i", "remove"),
    "yarn": ("add", "remove", "install"),
    "bun": ("add", "install"),
    "uv": ("add", "remove", "sync", "pip", "lock"),
    "poetry": ("add", "remove", "install", "lock"),
    "pdm": ("add", "remove", "install"),
    "cargo": ("add", "install", "remove"),
    "go": ("get", "mod", "install"),
    "gem": ("install",),
    "bundle": ("install", "add"),
    "composer": ("require", "install"),
}


def _adds_dependency(program: str, rest: list[str]) -> bool:
    return bool(rest) and rest[0] in _DEPENDENCY_VERBS.get(program, ())


def category(command: str) -> Category:
    """What a command line does, taken whole: ``state`` if any part writes, else ``check``, ``other`` or ``read``."""
    parsed = parse(command)
    if parsed.written or script_writes(command):
        return "state"
    found = {_category(words) for words in parsed.commands}
    order: tuple[Category, ...] = ("state", "check", "other")
    return next((name for name in order if name in found), "read")


#: Words of a command that runs until it is stopped: a server, a watcher, a tunnel, a log followed.
_SERVES = re.compile(
    r"\b(?:uvicorn|gunicorn|hypercorn|daphne|runserver|http\.server|serve|server|dev|start|watch|preview|up|"
    r"nodemon|jupyter|streamlit|ngrok|tunnel|emulators?|storybook)\b|--watch\b|\btail\s+-[fF]\b"
)


def serves(command: str) -> bool:
    """Whether a command runs until stopped (``npm run dev``, ``uvicorn app:app``, ``tail -f``): no result awaited."""
    return _SERVES.search(command) is not None


#: Exit codes of a command ended by a time limit or a signal: ``timeout``'s 124, SIGKILL's 137, SIGTERM's 143.
_STOPPED_CODES = frozenset({124, 137, 143})
#: Programs that stop what a command line started.
_KILLS = frozenset({"kill", "pkill", "killall"})
#: A command line that sets its own end: a time limit in front, or a kill of what it started.
_SETS_ITS_END = re.compile(rf"(?:^|[\s;&|(])(?:{'|'.join(sorted(_TIMEOUTS | _KILLS))})\s")


def stopped_as_meant(command: str, code: int | None) -> bool:
    """Whether a command ended by the limit or signal its own line set, as it meant to: a dev server sampled with
    ``timeout 10 npm run dev`` (exit 124), a serial port read with ``cat /dev/ttyUSB0 & sleep 5; kill $!`` (exit 143).

    Such a run did what it was for and is no failure. A check that hits its limit (``timeout 60 pytest``) hung, and
    stays a failure; a server, a watcher or a command that is no check does not.
    """
    if code not in _STOPPED_CODES or _SETS_ITS_END.search(command) is None:
        return False
    return serves(command) or category(command) != "check"


def watched_only(command: str) -> bool:
    """Whether a line only reads, its waits and kills aside: ``cat /dev/ttyUSB0 & sleep 5; kill $!`` watches a port."""
    parts = [words for words in parse(command).commands if words[0] not in _KILLS]  # a wait (``sleep 5``) only reads
    return all(_category(words) == "read" for words in parts)


def operands(rest: list[str]) -> list[str]:
    """A command's words that are no option (``git add -A src`` → ``add``, ``src``)."""
    return [word for word in rest if not word.startswith("-")]


def git_arguments(rest: list[str]) -> list[str]:
    """``git``'s words from its subcommand on: ``-C DIR`` and ``-c KEY=VALUE`` before it skipped."""
    while len(rest) > 1 and rest[0] in ("-C", "-c"):
        rest = rest[2:]
    return rest


#: An interpreter a command line hands a script to (``python3 -c "..."``, ``python3 - <<'EOF'``, ``node -e``).
_INTERPRETER = re.compile(r"python[\d.]*|node|bun|deno")
#: A file a script opens for writing, named by a string literal: Python's ``open(PATH, 'w')`` (or ``'a'``) and
#: ``Path(PATH).write_text(``, Node's ``fs.writeFileSync(PATH``.
_SCRIPT_WRITES = (
    re.compile(r"""\bopen\(\s*(['"])(?P<path>[^'"\n]+)\1\s*,\s*(['"])(?P<mode>[wa])[bt+]*\3"""),
    re.compile(r"""\bPath\(\s*(['"])(?P<path>[^'"\n]+)\1\s*\)\s*\.write_(?:text|bytes)\("""),
    re.compile(r"""\b(?P<mode>write|append)FileSync\(\s*(['"])(?P<path>[^'"\n]+)\2"""),
)


def script_writes(command: str) -> list[tuple[str, bool]]:
    """The files a script run inline writes, each with whether it appends (see `_SCRIPT_WRITES`).

    An agent whose edit tool could not match the file's whitespace often rewrites the
    file from a one-off Python script; that is a change of the file all the same.
    """
    if not any(_INTERPRETER.fullmatch(words[0]) for words in parse(command).commands):
        return []
    found: dict[str, bool] = {}
    for pattern in _SCRIPT_WRITES:
        for match in pattern.finditer(command):
            mode = match.groupdict().get("mode") or "w"
            found.setdefault(match.group("path"), mode in ("a", "append"))
    return list(found.items())


def effects(command: str) -> list[Effect]:
    """What a successful command line changed, in order (see the module docstring); nothing for reads."""
    parsed = parse(command)
    found: list[Effect] = []
    for words in parsed.commands:
        found += _simple_effects(_unwrap_runner(words), command)
    for path, appended in parsed.written + script_writes(command):
        verb = "Appended to" if appended else "Wrote"
        found.append(Effect(f"{verb} {path}", f"file:{path}", ((path, "edited" if appended else "written"),)))
    scratch = _scratch_names(command)
    looped = _loop_names(parsed)
    return [
        effect
        for effect in found
        if not (effect.files and all(scratch(path, action) for path, action in effect.files))
        and not looped(effect.text)
    ]


def _loop_names(parsed: Parsed) -> Callable[[str], bool]:
    """Whether a text names a loop's variable (``for f in ...; do rm "$f"``): it names no one file.

    The loop's words name the files (``*.orig``), not the body's ``$f``; a fact saying
    "Deleted $f" would tell a later session nothing it could use.
    """
    names = {words[1] for words in parsed.commands if words[0] == "for" and len(words) > 1}
    names |= {word for words in parsed.commands if words[0] == "read" for word in words[1:] if not word.startswith("-")}
    if not names:
        return lambda text: False
    pattern = re.compile(r"\$\{?(?:" + "|".join(re.escape(name) for name in sorted(names)) + r")\b")
    return lambda text: pattern.search(text) is not None


#: Where scratch files go: the system's temporary folders, named or through ``$TMPDIR``.
_TEMPORARY = re.compile(r"^(?:/private)?(?:/tmp|/var/tmp|/var/folders|/dev/shm)(?:/|$)|^\$\{?(?:TMPDIR|TMP|TEMP)\b")
#: The folders under the home folder whose name starts with a dot, where tools keep their own state: a skill's
#: preamble making ``~/.gstack/sessions`` and appending to its log there changes no project. Deleting there is
#: kept (a user asks to clean up an agent's old sessions).
_TOOL_STATE = re.compile(r"^(?:~|\$\{?HOME\}?|/Users/[^/]+|/home/[^/]+)/\.[^/]+/")
_MKTEMP = re.compile(r"\b([A-Za-z_]\w*)=\$\(\s*mktemp\b")
#: A variable set to a path on the command line (``SCRATCH=/tmp/claude-501/...``).
_ASSIGNED = re.compile(r"(?:^|[\s;&(])([A-Za-z_]\w*)=([\"']?)([^\s\"';&]+)\2")


def _scratch_names(command: str) -> Callable[[str, str], bool]:
    """What says a path is scratch in this command line: a temporary folder, or a variable that holds one.

    A screenshot folder under ``/tmp``, a PR body written to ``$(mktemp)``, a folder set as
    ``SCRATCH=/tmp/...`` and made with ``mkdir -p "$SCRATCH"``, or a tool's state written under
    ``~/.tool/`` (`_TOOL_STATE`) is no change of the project.
    """
    made = set(_MKTEMP.findall(command))
    made |= {name for name, _, value in _ASSIGNED.findall(command) if _TEMPORARY.match(value)}

    def scratch(path: str, action: str) -> bool:
        variable = re.match(r"^\$\{?([A-Za-z_]\w*)\}?", path)
        if _TOOL_STATE.match(path):
            return action != "deleted"
        return bool(_TEMPORARY.match(path)) or (variable is not None and variable.group(1) in made)

    return scratch


def _arrived(sources: list[str], target: str) -> list[str]:
    """Where ``mv`` or ``cp`` put each source: into ``target`` when it is a folder, else ``target`` itself.

    A folder is told by a trailing slash, by several sources, or by a name with no
    extension taking a file that has one (``mv pending/x.md done``): git is later given the
    file's new path (``git add done/x.md``), not the folder's.
    """
    name = target.rstrip("/").rsplit("/", 1)[-1]
    single = sources[0].rstrip("/").rsplit("/", 1)[-1] if len(sources) == 1 else ""
    if target.endswith("/") or len(sources) > 1 or ("." not in name and "." in single.lstrip(".")):
        return [f"{target.rstrip('/')}/{source.rstrip('/').rsplit('/', 1)[-1]}" for source in sources]
    return [target]


def _simple_effects(words: list[str], command: str) -> list[Effect]:
    program, rest = words[0], words[1:]
    paths = operands(rest)
    if program == "rm" or program == "unlink" or program == "rmdir":
        return [Effect(f"Deleted {path}", f"file:{path}", ((path, "deleted"),)) for path in paths]
    if program in ("mv", "cp") and len(paths) >= 2:
        *sources, target = paths
        verb = "Moved" if program == "mv" else "Copied"
        files = [(source, "deleted") for source in sources] if program == "mv" else []
        files += [(path, "created") for path in _arrived(sources, target)]
        return [Effect(f"{verb} {' '.join(sources)} to {target}", f"file:{target}", tuple(files))]
    if program in ("mkdir", "touch"):
        what = "directory " if program == "mkdir" else ""
        return [Effect(f"Created {what}{path}", f"file:{path}", ((path, "created"),)) for path in paths]
    if program == "tee":
        appended = "-a" in rest or "--append" in rest
        return [
            Effect(f"{'Appended to' if appended else 'Wrote'} {path}", f"file:{path}", ((path, "edited"),))
            for path in paths
        ]
    if program in ("sed", "perl") and paths and any(word.startswith(("-i", "--in-place")) for word in rest):
        path = paths[-1]
        return [Effect(f"Edited {path} in place ({program} -i)", f"file:{path}", ((path, "edited"),))]
    if program.lower() in _POWERSHELL_WRITES:
        return _powershell_effects(program.lower(), rest)
    if program == "git":
        return _git_effects(rest)
    if program == "gh":
        return _gh_effects(rest)
    if program == "but":
        return _gitbutler_effects(rest, commit_subject(command))
    return []


def _cmdlet_parameters(rest: list[str]) -> tuple[dict[str, str], list[str]]:
    """A cmdlet's parameters: named ones (``-Path X``, lowercased names; a switch such as ``-Force`` takes no value),
    then the positional ones, the shell's braces left out."""
    named: dict[str, str] = {}
    positional: list[str] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        if word.startswith("-") and word.lower() not in _POWERSHELL_SWITCHES and index + 1 < len(rest):
            named[word.lower()] = rest[index + 1]
            index += 2
            continue
        if not word.startswith("-") and word not in _KEYWORDS:
            positional.append(word)
        index += 1
    return named, positional


def ignored_patterns(command: str) -> list[str]:
    """The lines a command line appends to a ``.gitignore``: ``echo "dist/" >> .gitignore``, ``printf 'a\\nb\\n' >>
    .gitignore``, ``Add-Content .gitignore "data_working/"``."""
    parsed = parse(command)
    found: list[str] = []
    appended = any(path.endswith(".gitignore") and appending for path, appending in parsed.written)
    for words in parsed.commands:
        lowered = [word.lower() for word in words]
        # PowerShell's ``if (...) { Add-Content ... }`` is one simple command here: the cmdlet may come late in it.
        if appended and lowered[0] in ("echo", "printf"):
            said = [word for word in words[1:] if not word.startswith("-")]
            found += [line for word in said for line in word.replace("\\n", "\n").splitlines()]
        elif "add-content" in lowered:
            named, positional = _cmdlet_parameters(words[lowered.index("add-content") + 1 :])
            path = named.get("-path") or named.get("-literalpath")
            if path is None:  # positional: the path first, then the value
                path, positional = (positional[0], positional[1:]) if positional else ("", [])
            value = named.get("-value") or (positional[:1] or [""])[0]
            if path.endswith(".gitignore"):
                found += value.splitlines()
    return [line.strip() for line in found if line.strip() and not line.strip().startswith("#")]


def _powershell_effects(cmdlet: str, rest: list[str]) -> list[Effect]:
    """What a PowerShell cmdlet that writes did: ``Set-Content code/x.py``, ``New-Item -ItemType Directory -Path d``,
    ``Copy-Item a b``, ``Remove-Item -Recurse -Force build``.

    Its parameters are named (``-Path X``) or positional; a switch (``-Force``) takes no value.
    """
    named, positional = _cmdlet_parameters(rest)
    path = named.get("-path") or named.get("-literalpath") or named.get("-filepath") or (positional[:1] or [""])[0]
    other = named.get("-destination") or named.get("-newname") or (positional[1:2] or [""])[0]
    action = _POWERSHELL_WRITES[cmdlet]
    if not path or path.startswith(("$", "(")):
        return []
    if action == "created" and named.get("-itemtype", "").lower() == "directory":
        return [Effect(f"Created directory {path}", f"file:{path}", ((path, "created"),))]
    if action in ("written", "created"):
        appended = cmdlet == "out-file" and "-append" in (word.lower() for word in rest)
        verb = "Appended to" if appended else "Created" if action == "created" else "Wrote"
        return [Effect(f"{verb} {path}", f"file:{path}", ((path, "edited" if appended else action),))]
    if action == "edited":
        return [Effect(f"Appended to {path}", f"file:{path}", ((path, "edited"),))]
    if action == "deleted":
        return [Effect(f"Deleted {path}", f"file:{path}", ((path, "deleted"),))]
    if not other:
        return []
    if action == "renamed":
        target = f"{path.rsplit('/', 1)[0]}/{other}" if "/" in path and "/" not in other else other
        return [Effect(f"Renamed {path} to {target}", f"file:{target}", ((path, "deleted"), (target, "created")))]
    verb = "Moved" if action == "moved" else "Copied"
    files = [(path, "deleted")] if action == "moved" else []
    files += [(arrived, "created") for arrived in _arrived([path], other)]
    return [Effect(f"{verb} {path} to {other}", f"file:{other}", tuple(files))]


def _gitbutler_effects(rest: list[str], subject: str) -> list[Effect]:
    """What GitButler's CLI did: ``but commit BRANCH -m MSG``, ``but push BRANCH``, ``but pr new BRANCH -m MSG``.

    ``subject`` is the first line of the message, read from the whole command line (a
    multi-line ``-m`` is no one line's words).
    """
    words = operands(rest)
    branch = words[1] if len(words) > 1 and words[0] in ("commit", "push") else words[2] if len(words) > 2 else ""
    if words[:1] == ["commit"] and subject:
        return [Effect(f'Committed "{subject}" (GitButler)', f"commit:{subject}")]
    if words[:1] == ["push"]:
        return [Effect(f"Pushed {branch}".strip(), f"git:push:{branch}")]
    if words[:2] == ["pr", "new"]:
        return [Effect(f'Opened PR "{subject}"' if subject else "Opened PR", f"gh:pr:{subject or branch}")]
    return []


def _git_effects(rest: list[str]) -> list[Effect]:
    rest = git_arguments(rest)
    words = operands(rest)
    if not words:
        return []
    verb, args = words[0], words[1:]
    flags = set(rest) - set(words)
    if verb in ("branch", "tag") and _git_category(rest) == "read":
        return []
    if verb == "add":
        staged = "all changes" if not args or args in (["."], ["-A"]) or "-A" in flags or "--all" in flags else None
        return [Effect(f"Staged {staged or ', '.join(args)} (git add)", f"git:staged:{staged or args[0]}")]
    if verb == "branch" and ({"-m", "-M", "--move"} & flags):
        if len(args) >= 2:
            return [Effect(f"Renamed branch {args[0]} to {args[1]}", f"branch:{args[1]}")]
        return [Effect(f"Renamed the current branch to {args[0]}", f"branch:{args[0]}")] if args else []
    if verb == "branch" and ({"-d", "-D", "--delete"} & flags):
        return [Effect(f"Deleted branch {name}", f"branch:{name}") for name in args]
    if verb == "branch" and args:
        return [Effect(f"Created branch {args[0]}", f"branch:{args[0]}")]
    if verb in ("checkout", "switch") and ({"-b", "-B", "-c", "-C", "--create"} & flags) and args:
        return [Effect(f"Created branch {args[0]}", f"branch:{args[0]}")]
    if verb in ("checkout", "switch") and args and "--" not in rest:
        return [Effect(f"Switched to {args[0]}", "git:head")]
    if verb == "merge" and args:
        return [Effect(f"Merged {' '.join(args)}", f"git:merge:{args[-1]}")]
    if verb == "push":
        where = " ".join(args) if args else "the current branch"
        return [Effect(f"Pushed {where}", f"git:push:{args[-1] if args else 'head'}")]
    if verb in ("rebase", "cherry-pick", "revert", "reset", "restore", "stash", "tag", "clone", "init", "pull"):
        shown = " ".join(rest)[:100]
        return [Effect(f"Ran git {shown}", f"git:{verb}:{args[0] if args else ''}")]
    if verb in ("rm", "mv") and args:
        if verb == "rm":
            return [Effect(f"Deleted {path} (git rm)", f"file:{path}", ((path, "deleted"),)) for path in args]
        *sources, target = args
        files = tuple((path, "created") for path in _arrived(sources, target))
        return [Effect(f"Moved {' '.join(sources)} to {target} (git mv)", f"file:{target}", files)]
    if verb == "worktree" and len(args) >= 2 and args[0] == "add":
        return [Effect(f"Added worktree {args[1]}", f"git:worktree:{args[1]}")]
    if verb == "config" and args and _CONFIG_REMOVES & flags:
        return [Effect(f"Unset {args[0]} (git config)", f"config:{args[0]}")]
    if verb == "config" and len(args) >= 2 and _git_category(rest) == "state":
        value = " ".join(args[1:])
        value = value if len(value) <= SETTING_CHARS else value[: SETTING_CHARS - 1].rstrip() + "…"
        return [Effect(f"Set {args[0]} to {value}", f"config:{args[0]}")]
    return []


#: ``git config`` options that take a setting away.
_CONFIG_REMOVES = frozenset({"--unset", "--unset-all", "--remove-section", "--rename-section"})
#: Longest value of a setting told as set.
SETTING_CHARS = 120
#: ``gh api`` methods that change something on GitHub (``-X DELETE``); a field (``-f``) makes it a POST.
_API_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _api_effects(rest: list[str]) -> list[Effect]:
    """What ``gh api`` changed: the method and the endpoint, a loop's variable shown as ``…``."""
    method = next((rest[i + 1].upper() for i, word in enumerate(rest[:-1]) if word in ("-X", "--method")), None)
    fields = any(word in ("-f", "-F", "--field", "--raw-field", "--input") for word in rest)
    method = method or ("POST" if fields else "GET")
    endpoint = next((word for word in rest[1:] if not word.startswith("-") and "/" in word), None)
    if method not in _API_WRITES or endpoint is None:
        return []
    shown = re.sub(r"\$\{?\w+\}?", "…", endpoint)
    return [Effect(f"Sent {method} {shown} (gh api)", f"gh:api:{method}:{shown}")]


#: The gh-stack extension's subcommands that push every branch of the stack.
GH_STACK_PUSHES = (["stack", "push"], ["stack", "submit"])


def _gh_effects(rest: list[str]) -> list[Effect]:
    words = operands(rest)
    if words[:1] == ["api"]:
        return _api_effects(rest)
    if words[:2] in GH_STACK_PUSHES:
        return [Effect("Pushed the stack's branches", "git:push:stack")]
    if len(words) < 2 or words[0] not in ("pr", "issue", "release") or words[1] in _GH_READ_VERBS:
        return []
    title = next((rest[i + 1] for i, word in enumerate(rest[:-1]) if word in ("--title", "-t")), None)
    # An operand after ``create`` is some option's value (``--base main``), never what was opened.
    named = f' "{title}"' if title else (f" {words[2]}" if len(words) > 2 and words[1] != "create" else "")
    verbs = {"create": "Opened", "merge": "Merged", "close": "Closed", "comment": "Commented on", "edit": "Edited"}
    verb = verbs.get(words[1], f"Ran gh {words[0]} {words[1]} on")
    noun = {"pr": "PR", "issue": "issue", "release": "release"}[words[0]]
    return [Effect(f"{verb} {noun}{named}", f"gh:{words[0]}:{title or (words[2] if len(words) > 2 else words[1])}")]


_TAIL_PIPE = re.compile(r"\s*(?:\|\s*(?:tail|head|grep|less|cat|tee|Select-Object|Out-String)\b[^|]*)+$", re.IGNORECASE)
_STDERR = re.compile(r"\s+2>&1\b|\s+2>/dev/null\b|\s+>\s*/dev/null\b")
#: Steps before the command that only set it up: ``cd DIR &&``, ``Set-Location "C:\\x";``, ``export A=1 &&``,
#: ``source .venv/bin/activate &&``, PowerShell's ``$env:Path += ";C:\\bin";``.
_VALUE = r"""(?:"[^"]*"|'[^']*'|[^\s;&]+)"""
_SETUP = (
    rf"(?:(?:cd|pushd|Set-Location)\s+{_VALUE}|export\s+\w+={_VALUE}|(?:source|\.)\s+\S*activate\S*|"
    rf"\$env:\w+\s*\+?=\s*{_VALUE})"
)
_CD_FIRST = re.compile(rf"^(?:\s*{_SETUP}\s*(?:&&|;)\s*)+", re.IGNORECASE)
#: A line that only sets up (``Set-Location "C:\\app"`` on a line of its own, the command on the next).
_SETUP_LINE = re.compile(rf"^\s*{_SETUP}\s*;?\s*$", re.IGNORECASE)
#: A command piped into a filter: the line's exit status is the filter's, not the command's.
_FILTERED = re.compile(r"\|\s*(?:tail|head|grep|less|cat|tee|sed|awk|sort|uniq|cut|wc)\b")


def shown(command: str, limit: int = 100) -> str:
    """A command as a person would name it: its first line without set-up (``cd DIR &&``), ``2>&1`` or ``| tail``."""
    lines = [_CD_FIRST.sub("", line) for line in command.replace("\\\n", " ").strip().splitlines()]
    first = next((line for line in lines if line.strip() and not _SETUP_LINE.match(line)), lines[0] if lines else "")
    text = _TAIL_PIPE.sub("", _STDERR.sub("", _CD_FIRST.sub("", first))).strip() or first.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


#: Options that name the package or directory a check runs in (``swift build --package-path control-plane``).
_PLACE_OPTIONS = frozenset(
    {"--package-path", "--manifest-path", "--prefix", "--filter", "--dir", "--cwd", "--project-dir",
     "--working-directory"}
)  # fmt: skip
#: Programs whose ``-C DIR`` runs them in another directory.
_DIRECTORY_PROGRAMS = frozenset({"make", "gmake", "ninja"})


def family(command: str) -> str:
    """What a check is, whatever its arguments: its words up to the first option or path (``go test``), and the
    package it was pointed at.

    So ``go test -run TestX ./pkg`` failing is fixed by a later ``go test ./...`` passing;
    ``mise run lint`` and ``mise run test`` stay two checks, and so do ``swift build
    --package-path control-plane`` and ``swift build --package-path libs/scim``: one
    package building says nothing of another.
    """
    words: list[str] = []
    place = ""
    for commands in parse(shown(command, 400)).commands[:1]:
        for word in _package_tool(_unwrap_runner(commands)):
            if word.startswith("-") or "/" in word or "." in word or "=" in word:
                break
            words.append(word)
        place = _place(commands)
    return " ".join(words[:3]) + (f" @{place}" if place else "")


def _place(words: list[str]) -> str:
    """The package or directory a command's options point it at, if any."""
    for index, word in enumerate(words):
        option, _, value = word.partition("=")
        named = option in _PLACE_OPTIONS or (option == "-C" and words[0] in _DIRECTORY_PROGRAMS)
        if named and not value and index + 1 < len(words):
            value = words[index + 1]
        if named and value:
            return value.rstrip("/")
    return ""


#: What runs a package's tool without installing it: ``npx biome``, ``bunx tsc``, ``pnpm dlx``, ``npm exec``.
_PACKAGE_RUNNERS = {"npx": 1, "bunx": 1, "pnpx": 1, "pnpm": 2, "yarn": 2, "npm": 2}


def _package_tool(words: list[str]) -> list[str]:
    """The tool a package runner runs, its own options skipped (``npx --yes biome check`` → ``biome check``).

    So ``npx biome check src`` and a ``bun run lint`` whose script is ``biome check .`` are one check.
    """
    if words[:1] == ["xargs"]:
        words = _xargs_command(words[1:]) or words
    skip = _PACKAGE_RUNNERS.get(words[0] if words else "", 0)
    if skip == 2 and (len(words) < 2 or words[1] not in ("dlx", "exec")):
        return words
    rest = words[skip:]
    while rest and rest[0].startswith("-"):
        rest = rest[1:]
    return rest or words


def families(command: str) -> frozenset[str]:
    """The family of each check a command line runs (``mise run fmt && mise run lint``: both).

    A compound check that failed is fixed by a later pass of any of its checks: the lint
    that failed in ``fmt && lint`` passes on its own afterwards.
    """
    found = {family(" ".join(words)) for words in parse(command).commands if _category(words) == "check"}
    return frozenset(found - {""}) or frozenset({family(command)})


_HEREDOC_BODY = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?\s*\n(.*?)\n\s*\1\b", re.DOTALL)


def commit_body(command: str, limit: int) -> str | None:
    """The first line of the body of a commit message written in a heredoc, after its subject (why it was made)."""
    found = _HEREDOC_BODY.search(command)
    if found is None:
        return None
    lines = [line.strip(" -*") for line in found.group(2).splitlines()[1:] if line.strip(" -*")]
    body = [line for line in lines if not line.startswith(("Co-Authored-By", "🤖", "Generated with"))]
    return (body[0] if len(body[0]) <= limit else body[0][: limit - 1].rstrip() + "…") if body else None


_OPTION_MESSAGE = re.compile(r"(?:^|\s)(?:-[a-zA-Z]*m|--message)[= ]\s*(?:\"([^\"]+)\"|'([^']+)')")
#: git's line for a commit it made: ``[main 1a2b3c4] Subject`` (``(root-commit)`` for the first).
_COMMIT_HASH = re.compile(r"^\[[^\]\s]+(?: \(root-commit\))? ([0-9a-f]{7,40})\]\s*(.*)$", re.MULTILINE)


def commit_subject(command: str) -> str:
    """The first line of a commit's message as the command gives it (``-m "..."`` or a heredoc); empty if none."""
    heredoc = _HEREDOC_BODY.search(command)
    option = _OPTION_MESSAGE.search(command)
    message = heredoc.group(2) if heredoc is not None else (option.group(1) or option.group(2)) if option else ""
    return message.strip().splitlines()[0].strip() if message.strip() else ""


def commit_made(command: str, output: str) -> tuple[str, str] | None:
    """The short hash and subject of the commit a command's output shows it made, if any.

    git prints ``[main 1a2b3c4] Subject``; with ``-q`` it prints nothing, and an agent then
    often shows the commit with ``git log --oneline`` in the same line: the log line whose
    subject is the commit message's first line is that commit.
    """
    found = _COMMIT_HASH.search(output)
    if found is not None:
        return found.group(1), found.group(2)
    if "commit" not in command or "log" not in command:
        return None
    subject = commit_subject(command)
    if not subject:
        return None
    logged = re.search(rf"^([0-9a-f]{{7,40}}) (?:\([^)]*\) )?({re.escape(subject)})\s*$", output, re.MULTILINE)
    return (logged.group(1), logged.group(2)) if logged is not None else None


def exit_hidden(command: str) -> bool:
    """Whether a command line's exit status is not the command's own: piped into a filter (``| tail -20``), or one of
    several lines, of which only the last one's status is told (a script of commands; a Codex code-mode cell running
    ``pnpm test:run`` and ``pnpm build`` at once, which prints their statuses its own way).

    Its outcome is then only in what it printed (see `session_facts.hidden_failure`).
    """
    lines = [line for line in _logical_lines(command) if re.search(r"\w", line)]  # a heredoc's closing ``)"`` aside
    return len(lines) > 1 or _FILTERED.search(lines[0] if lines else "") is not None
