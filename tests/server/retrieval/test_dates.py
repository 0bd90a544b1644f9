"""Time questions: which questions ask about time, which texts write one down, which
messages fall in a period a question names (`palimpsest.server.retrieval.dates`).

Hybrid ranking leans on these three answers when a question asks "when"; each is
checked here on phrasings from everyday talk and from coding sessions alike.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.server.retrieval.dates import (
    _TELLS_TIME,
    Period,
    asks_about_time,
    in_period,
    named_periods,
    tells_time,
)


@pytest.mark.parametrize(
    "question",
    [
        "When did Caroline go to the support group?",
        "when was the cache moved to Redis",
        "What year did she start painting?",
        "How long ago was the migration?",
        "How many years has he played?",
        "What did we change in March?",
        "What broke on 3 May, 2024?",
        "Which tests failed in 2023?",
    ],
)
def test_a_question_that_wants_or_names_a_time_asks_about_time(question: str) -> None:
    assert asks_about_time(question)


@pytest.mark.parametrize(
    "question",
    [
        "What did Caroline research?",
        "why did we stop keeping sessions in Redis",
        "may I see the config?",
        "who wrote vault.hcl",
    ],
)
def test_a_question_about_something_else_does_not(question: str) -> None:
    assert not asks_about_time(question)


@pytest.mark.parametrize(
    "text",
    [
        "I went to a support group yesterday",
        "Last Friday I moved the cache",
        "we shipped it two weeks ago",
        "I've known them for 4 years",
        "the build broke on Tuesday",
        "back in 2022 it was different",
        "released 2024-03-14",
        "see you next month",
        "we'll fix it this sprint",
    ],
)
def test_a_text_that_writes_a_time_down_tells_time(text: str) -> None:
    assert tells_time(text)


@pytest.mark.parametrize(
    "text", ["the cache lives in Redis", "upgrade to Python 3.11", "ran 42 tests, 3 failed", "I love painting sunsets"]
)
def test_a_text_without_one_does_not(text: str) -> None:
    assert not tells_time(text)


#: Pieces that make or nearly make a written time, in any case, with letters that
#: IGNORECASE folds to ASCII ones (dotted and dotless i, long s, the Kelvin sign).
_PIECES = st.sampled_from(
    ["yesterday", "YESTERDAY", "last", "Next", "few", "in", "İn", "the", "two", "weeks", "Friday", "fRİDAY",
     "ſunday", "WEEKEND", "ago", "May", "may.", "Sept", "2024", "1999", "3/14", "12/1/24", "2024-03-14",
     "3.11", "x2024", "2024_", "sprint", "seasons", "kelvin", "\u212aelvin", " ", "  ", "\n", ", ", ".", "ß"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=8).map("".join))
def test_tells_time_gives_the_answers_of_its_pattern_with_ignorecase(text: str) -> None:
    """`tells_time` matches lower-cased text without IGNORECASE, for speed; the answers must not change."""
    assert tells_time(text) == bool(re.compile(_TELLS_TIME.pattern, re.IGNORECASE).search(text))


def test_periods_a_question_names_are_days_months_and_years() -> None:
    assert named_periods("What broke on 3 May, 2024 and on May 5th?") == [Period(2024, 5, 3), Period(None, 5, 5)]
    assert named_periods("What did we change in March 2024?") == [Period(2024, 3, None)]
    assert named_periods("Which tests failed in 2023?") == [Period(2023, None, None)]
    assert named_periods("may I see what changed in June?") == [Period(None, 6, None)], "'may' lower-case is a verb"
    assert named_periods("why did the cache fail") == []


def test_a_message_is_in_a_period_from_its_start_to_a_week_after_its_end() -> None:
    march = [Period(2024, 3, None)]
    assert in_period(datetime(2024, 3, 1, tzinfo=UTC), march)
    assert in_period(datetime(2024, 4, 6, tzinfo=UTC), march), "told the week after"
    assert not in_period(datetime(2024, 4, 9, tzinfo=UTC), march)
    assert not in_period(datetime(2024, 2, 29, tzinfo=UTC), march)
    assert in_period(datetime(2023, 6, 20, tzinfo=UTC), [Period(None, 6, None)]), "a month of any year"
    assert in_period(datetime(2024, 1, 2, tzinfo=UTC), [Period(None, 12, 31)]), "the year before's last day"
    assert in_period(datetime(2024, 12, 31, tzinfo=UTC), [Period(2024, 12, None)])
    assert not in_period(datetime(2024, 2, 28, tzinfo=UTC), [Period(2024, 2, 31)]), "no such day"
    assert not in_period(datetime(2024, 3, 1, tzinfo=UTC), [])
    assert not in_period(datetime(1, 1, 5, tzinfo=UTC), [Period(None, 12, 31)]), "year 0 does not exist"
    assert in_period(datetime(9999, 12, 30, tzinfo=UTC), [Period(None, 12, None)]), "the calendar's last month"
