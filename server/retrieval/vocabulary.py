"""Words a developer asks with, and the words the tools they mean are written in.

A question says "which command ran the linter?" and the transcript holds ``ruff check
src/``; it says "how did I reword the commit?" and the call is ``git commit --amend``.
Neither full-text index nor a small embedding model bridges such a gap: the tool's name
is not a synonym of the developer's word, it is one of a few well-known programs that do
that job. `expanded_terms` adds those programs' names to the text index's query (never
to the vector query, which reads the question as written), so the call that ran one of
them can match.

Two rules, both general:

- **Developer vocabulary** (`VOCABULARY`): a word for a job (lint, format, type check,
  coverage, install, tunnel, amend, pull request, stylesheet, container) brings
  the common tools for it across Python, JavaScript, Elixir, Rust and Go, and the job's
  other names. It is kept short on purpose: each entry names only programs that are that
  job's usual tool, so a term it adds is rare in other messages and costs nothing where
  it does not occur (a term in no message matches nothing).
- **Compounds**: two adjacent words of the query, joined (``filter warnings`` →
  ``filterwarnings``, ``session store`` → ``sessionstore``), since code writes a name
  as one token (``filterwarnings``, ``sessionStore``, ``PYTHONTRACEMALLOC``) that both
  stores' tokenizers index whole, lower-cased.
"""

from __future__ import annotations

from palimpsest.graph_schema import identity

#: A job's words (lower case) and what the tools that do it are called.
VOCABULARY: dict[str, tuple[str, ...]] = {
    "lint": ("ruff", "flake8", "pylint", "eslint", "biome", "credo", "clippy", "golangci", "shellcheck"),
    "format": ("prettier", "black", "gofmt", "rustfmt"),
    "typecheck": ("mypy", "pyright", "tsc"),
    "coverage": ("cov", "coverage"),
    "install": ("pip", "npm", "uv", "brew", "pnpm", "yarn", "apt"),
    "tunnel": ("ngrok", "cloudflared"),
    "amend": ("amend", "reword", "rebase"),
    "pr": ("gh", "pr"),
    "stylesheet": ("css", "scss"),
    "container": ("docker", "compose"),
}
#: The words (lower case) that name each job in a question.
JOB_WORDS: dict[str, str] = {
    **dict.fromkeys(("lint", "linter", "linters", "linting", "lints"), "lint"),
    **dict.fromkeys(("format", "formatter", "formatting"), "format"),
    **dict.fromkeys(("typecheck", "typechecker", "typechecking", "typing"), "typecheck"),
    **dict.fromkeys(("coverage",), "coverage"),
    **dict.fromkeys(("install", "installed", "installing", "dependency", "dependencies"), "install"),
    **dict.fromkeys(("tunnel", "tunneling", "tunnelling", "expose", "exposed"), "tunnel"),
    **dict.fromkeys(("amend", "amended", "reword", "reworded", "rewording"), "amend"),
    **dict.fromkeys(("pr", "prs"), "pr"),
    **dict.fromkeys(("stylesheet", "stylesheets"), "stylesheet"),
    **dict.fromkeys(("container", "containers"), "container"),
}
#: Two-word names of a job.
JOB_PHRASES: dict[tuple[str, str], str] = {
    ("type", "check"): "typecheck",
    ("type", "checker"): "typecheck",
    ("type", "checking"): "typecheck",
    ("pull", "request"): "pr",
    ("public", "url"): "tunnel",
}
#: Compounds made from a query at most: its first adjacent pairs.
MAX_COMPOUNDS = 6


def expanded_terms(words: list[str]) -> list[str]:
    """The terms to add to a text query made of ``words`` (stop words already out): tool names, then compounds.

    Each term once, none that the query already holds.
    """
    lowered = [word.lower() for word in words]
    jobs = [JOB_WORDS[word] for word in lowered if word in JOB_WORDS]
    jobs += [job for pair, job in JOB_PHRASES.items() if pair in zip(lowered, lowered[1:], strict=False)]
    tools = [tool for job in dict.fromkeys(jobs) for tool in VOCABULARY[job]]
    compounds = [
        first + second
        for first, second in zip(lowered, lowered[1:], strict=False)
        if first.isalpha() and second.isalpha()
    ][:MAX_COMPOUNDS]
    held = set(lowered)
    return [term for term in dict.fromkeys([*tools, *compounds]) if term not in held]


def with_expansions(query: str) -> str:
    """``query`` (a text query) followed by its `expanded_terms`."""
    added = expanded_terms(identity.words(query))
    return " ".join([query, *added]) if added else query
