"""Hypothesis strategies of hostile arguments for every MCP tool, used by tests/server/mcp/test_fuzz_tools.py.

Why a module of its own: the strategies say what "hostile" means for this server (query
syntax of SQLite FTS5 and Neo4j's Lucene, injections aimed at SQL and Cypher, control
characters, catastrophic regexes, sizes just over each limit, numbers past every integer
type, metadata nested hundreds deep, other partitions' ids and unknown ids), so they can
be read and extended apart from the harness that drives them.

`HARNESS_LIMITS` names what the strategies leave out on purpose, and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from palimpsest.graph_schema.models import MAX_BATCH, MAX_MESSAGE_BYTES, MAX_NAME_CHARS
from palimpsest.server.retrieval.grep import MAX_QUERY_CHARS

#: What the strategies leave out on purpose.
HARNESS_LIMITS = {
    "writes_stay_home": "writes name no other partition: without tokens, naming one is an allowed, explicit "
    "crossing, and would change the other partition's digests the harness watches",
}
#: Names that once made two different messages share an id (fields joined with \x1f).
COLLIDING_NAMES = ["coll", "coll\x1fa", "a\x1fb", "b", "\x1f"]
#: Every year a datetime can hold: offsets near the calendar's ends must be refused clearly.
YEARS = (1, 9999)

#: Strings aimed at every query language and parser on the way: SQL, Cypher, Lucene,
#: FTS5, regex engines, format strings, terminals, paths.
INJECTIONS = [
    "' OR 1=1 --",
    "'; DROP TABLE messages; --",
    '" OR ""="',
    "x') UNION SELECT id, content FROM messages --",
    "' }) MATCH (n) DETACH DELETE n //",
    "`) RETURN 1 //",
    "$partition",
    "{partition: 'beta'}",
    "title:secret AND content:*",
    '"unterminated phrase',
    "a~2 b^3 c*",
    "*",
    "?",
    "~",
    "[a TO z]",
    "(",
    ")",
    "\\",
    "/.*/",
    '+-&&||!(){}[]^"~*?:\\/',
    "NEAR(alpha beta, 2)",
    "alpha NOT beta",
    "content:alpha",
    "^alpha",
    "AND",
    "OR NOT",
    '"',
    "(a+)+$",
    "(.*a){25}",
    "((a|a)*)*b",
    "[",
    "(?<",
    "(?P<n>a)(?P=n)\\1",
    "\\p{",
    "%s%n%x",
    "{0}{1}",
    "${jndi:ldap://127.0.0.1/x}",
    "../../etc/passwd",
    "\x00",
    "nul\x00inside",
    "\x1b[2J\x1b[31mred",
    "\r\n\r\n",
    "\u202eevil",
    "\ufeffbom",
    "\u2028\u2029",
    "\U0001f600 emoji",
    "ＡＢＣ",
    " ",
    "",
]


def just_past(limit: int, letter: str) -> st.SearchStrategy[str]:
    """A string one character past a limit, built on draw so reprs of the strategy stay short."""
    return st.just(limit + 1).map(lambda size: letter * size)


TOO_LONG_NAME = just_past(MAX_NAME_CHARS, "n")
TOO_LONG_QUERY = just_past(MAX_QUERY_CHARS, "q")
TOO_BIG_CONTENT = just_past(MAX_MESSAGE_BYTES, "c")

HUGE_INTS = [0, -1, 1, 2**31, -(2**31), 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30)]


@dataclass
class Known:
    """Ids the seeded store holds, so strategies can aim at real, foreign and unknown things."""

    own_threads: list[str]
    own_summaries: list[str]
    own_messages: list[str]
    foreign_threads: list[str]
    foreign_summaries: list[str]
    foreign_messages: list[str]
    foreign_partition: str
    own_partition: str
    unknown: list[str] = field(default_factory=lambda: ["sum_deadbeef", "msg_00", "fact_x", "t-nowhere"])


def text(*, max_size: int = 40) -> st.SearchStrategy[str]:
    """Any text but lone surrogates (they are refused before a tool runs; see test_fuzz_tools)."""
    return st.text(st.characters(exclude_categories=("Cs",)), max_size=max_size)


def hostile_text(*, max_size: int = 40) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(INJECTIONS), text(max_size=max_size))


def names(known: Known) -> st.SearchStrategy[str]:
    """Thread ids, summary ids, partitions: real ones, foreign ones, unknown ones, hostile ones."""
    pools = known.own_threads + known.own_summaries + known.unknown + known.foreign_threads + known.foreign_summaries
    return st.one_of(
        st.sampled_from(pools),
        hostile_text(max_size=60),
        TOO_LONG_NAME,
        st.sampled_from(COLLIDING_NAMES),
    )


def partitions(known: Known) -> st.SearchStrategy[str | None]:
    return st.one_of(
        st.none(),
        st.sampled_from([known.own_partition, known.foreign_partition]),
        hostile_text(max_size=20),
        TOO_LONG_NAME,
    )


def integers() -> st.SearchStrategy[Any]:
    """Integers of every size, and things that are not integers at all."""
    return st.one_of(
        st.sampled_from(HUGE_INTS),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([1.5, float("inf"), "12", "ten", None, True, [], {}]),
    )


def datetimes_or_junk() -> st.SearchStrategy[Any]:
    """ISO 8601 strings with every offset, up to the calendar's ends, and junk."""
    offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
    low, high = YEARS
    moments = st.datetimes(min_value=datetime(low, 1, 1), max_value=datetime(high, 12, 31), timezones=offsets)
    return st.one_of(
        moments.map(lambda moment: moment.isoformat()),
        st.sampled_from(["2024-13-45T99:99:99Z", "yesterday", "", "2024-05-01", "1714557600", "T", "-1"]),
        st.integers(min_value=-(2**40), max_value=2**40),
        hostile_text(max_size=20),
    )


def nested(depth: int) -> dict[str, Any]:
    """Metadata nested ``depth`` objects deep (fastmcp's client itself refuses to send much past 200)."""
    value: dict[str, Any] = {"leaf": True}
    for level in range(depth):
        value = {f"l{level}": value}
    return value


def metadata() -> st.SearchStrategy[Any]:
    json_leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        hostile_text(max_size=20),
    )
    trees = st.recursive(
        json_leaves,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(hostile_text(max_size=10), children, max_size=4)
        ),
        max_leaves=12,
    )
    return st.one_of(
        st.dictionaries(hostile_text(max_size=10), trees, max_size=4),
        st.sampled_from([nested(50), nested(180), {"list": list(range(1000))}]),
        st.sampled_from([[], "meta", 7, None]),
    )


def message(known: Known) -> st.SearchStrategy[Any]:
    """One message as a caller sends it: mostly well formed, every field sometimes hostile."""
    fields: dict[str, st.SearchStrategy[Any]] = {
        "role": st.one_of(st.sampled_from(["user", "assistant", "system", "tool"]), hostile_text(max_size=10)),
        "content": st.one_of(hostile_text(max_size=200), TOO_BIG_CONTENT, st.sampled_from([7, None, []])),
    }
    optional: dict[str, st.SearchStrategy[Any]] = {
        "message_id": st.one_of(names(known), st.sampled_from(known.own_messages)),
        "created_at": datetimes_or_junk(),
        "tool_call_id": names(known),
        "metadata": metadata(),
        "seq": integers(),
        "id": st.sampled_from(known.foreign_messages + known.own_messages),
    }
    return st.one_of(
        st.fixed_dictionaries(fields, optional=optional),
        st.sampled_from([{}, "a message", 7, None, {"role": "user"}]),
    )


def tool_arguments(tool: str, known: Known) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for one tool: each argument drawn hostile or plausible, optional ones often left out."""
    optional: dict[str, st.SearchStrategy[Any]] = {"partition": partitions(known)}
    required: dict[str, st.SearchStrategy[Any]]
    queries = st.one_of(hostile_text(max_size=80), TOO_LONG_QUERY)
    if tool == "append_messages":
        # Another partition's thread ids are fair game: a thread is (partition, id).
        required = {
            "thread_id": names(known),
            "messages": st.one_of(
                st.lists(message(known), max_size=4),
                st.just([{"role": "user", "content": "x"}] * (MAX_BATCH + 1)),
            ),
        }
        optional["project"] = st.one_of(st.none(), names(known))
        optional["partition"] = st.sampled_from([None, known.own_partition])
    elif tool == "grep_memories":
        required = {"query": queries}
        optional |= {
            "mode": st.one_of(st.sampled_from(["text", "regex", "semantic", "hybrid"]), hostile_text(max_size=8)),
            "thread_id": names(known),
            "kinds": st.one_of(
                st.lists(st.sampled_from(["message", "summary", "fact"]), max_size=3),
                st.lists(hostile_text(max_size=8), max_size=2),
            ),
            "since": datetimes_or_junk(),
            "until": datetimes_or_junk(),
            "limit": integers(),
        }
    elif tool in ("describe_summary", "expand_summary"):
        required = {"summary_id": names(known)}
        if tool == "expand_summary":
            optional |= {
                "depth": integers(),
                "limit": integers(),
                "cursor": st.one_of(hostile_text(max_size=30), st.integers().map(str)),
            }
    elif tool == "get_summary_dag":
        required = {"thread_id": names(known)}
    elif tool == "compact_thread":
        required = {"thread_id": names(known)}
        optional |= {"force": st.one_of(st.booleans(), st.sampled_from(["yes", 2, None]))}
        optional["partition"] = st.sampled_from([None, known.own_partition])
    elif tool == "memory_stats":
        required = {}
    elif tool == "recall":
        required = {"query": queries}
        optional |= {
            "project": names(known),
            "limit": integers(),
            "include_superseded": st.one_of(st.booleans(), st.just("no")),
        }
    elif tool == "kg":
        required = {"action": st.one_of(st.sampled_from(["status", "on", "off", "stats", "clear"]), hostile_text())}
        optional |= {"thread_id": names(known)}
        optional["partition"] = st.sampled_from([None, known.own_partition])
    elif tool == "assemble_context":
        required = {"thread_id": names(known)}
        optional |= {"budget_tokens": integers(), "query": queries}
    else:
        raise ValueError(f"no strategy for tool {tool!r}")
    unknown_argument = st.fixed_dictionaries({}, optional={"bogus": hostile_text(max_size=10)})
    return st.tuples(st.fixed_dictionaries(required, optional=optional), unknown_argument).map(
        lambda pair: pair[0] | pair[1]
    )
