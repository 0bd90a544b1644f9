"""The coding-session question set and the helpers of ``bench/coding_recall.py`` that need no sessions.

The sessions themselves stay outside the repository, so the benchmark is run by hand; what
can break silently without them is checked here: a question missing its kind, half or
evidence, a source named nowhere, a half left without some kind of question (a tuning
score with nothing to check it against), and the tables that report the halves.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from rich.console import Console

from bench import coding_recall

FIELDS = {"question", "kind", "source", "evidence", "half"}


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads(coding_recall.QUESTIONS.read_text())


def test_every_question_has_its_fields_kind_half_and_transcript_lines(data: dict) -> None:
    assert data["questions"], "the question set is empty"
    for question in data["questions"]:
        assert set(question) == FIELDS, question
        assert question["question"].strip(), question
        assert question["kind"] in coding_recall.KINDS, question
        assert question["half"] in coding_recall.HALVES, question
        assert question["source"] in data["sources"], question
        evidence = question["evidence"]
        assert evidence and len(set(evidence)) == len(evidence), question
        for line in evidence:
            uuid.UUID(line)  # a transcript line's uuid, nothing else


def test_questions_are_not_repeated_and_every_source_is_asked_about(data: dict) -> None:
    texts = Counter(question["question"] for question in data["questions"])
    assert [text for text, count in texts.items() if count > 1] == []
    asked = {question["source"] for question in data["questions"]}
    assert asked == set(data["sources"])
    for name, where in data["sources"].items():
        repository, _, path = where.partition(" ")
        assert "/" in repository and path, f"{name}: the source must name a repository and a path: {where!r}"


def test_both_halves_hold_every_kind_in_about_equal_shares(data: dict) -> None:
    cells = Counter((question["half"], question["kind"]) for question in data["questions"])
    for kind in coding_recall.KINDS:
        tune, check = cells[("tune", kind)], cells[("check", kind)]
        assert tune and check, f"{kind}: tune {tune}, check {check}"
        assert abs(tune - check) <= max(3, (tune + check) // 4), f"{kind}: tune {tune}, check {check}"
    kinds = Counter(question["kind"] for question in data["questions"])
    assert kinds["command"] >= 12 and kinds["failure"] >= 12, kinds


def test_chosen_questions_keeps_the_named_sessions_and_refuses_an_unknown_one(data: dict) -> None:
    name = next(iter(data["sources"]))
    chosen = coding_recall.chosen_questions(data, [name])
    assert chosen and {question["source"] for question in chosen} == {name}
    assert coding_recall.chosen_questions(data, []) == data["questions"]
    with pytest.raises(SystemExit, match="no-such-session"):
        coding_recall.chosen_questions(data, [name, "no-such-session"])


def test_recall_at_k_counts_the_evidence_among_the_first_k_hits_only() -> None:
    found = [{"a"}, {"x", "b"}, {"c"}]
    assert coding_recall.recall_at_k(["a", "b"], found, 2) == 1.0
    assert coding_recall.recall_at_k(["a", "c"], found, 2) == 0.5
    assert coding_recall.recall_at_k(["c"], found, 3) == 1.0
    assert coding_recall.recall_at_k(["a"], [], 10) == 0.0


def test_render_halves_gives_each_half_its_own_row_of_kinds() -> None:
    scores = {"text": {("tune", "command"): [1.0, 0.5], ("check", "failure"): [0.0, 1.0, 1.0]}}
    console = Console(record=True, width=200)
    console.print(coding_recall.render_halves(scores, 10))
    rows = [line.split("│")[1:-1] for line in console.export_text().splitlines() if line.startswith("│ text")]
    cells = [[cell.strip() for cell in row] for row in rows]
    # method, half, command, failure, file, decision, all, n
    assert cells == [
        ["text", "tune", "75.0", "-", "-", "-", "75.0", "2"],
        ["text", "check", "-", "66.7", "-", "-", "66.7", "3"],
    ]
