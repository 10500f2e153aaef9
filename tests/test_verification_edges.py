"""The quote-edge reads (``limits_before``, ``limits_after``) give what the plain reading of their contract gives.

Both look first at something cheaper (the words before a passage, the word after it) and read the clause only when
that look finds a candidate; these tests hold them to the plain reading, kept here as the reference, at every
position of the real opinions and of generated text full of near misses (longer words that end in a negation, curly
apostrophes, characters whose case folding meets an ASCII letter). Pure Python, no database.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lqai_verify.verification.policy import (
    LIMITED_BEFORE,
    NEGATED_BEFORE,
    NEGATIONS,
    WORD,
    limits_after,
    limits_before,
)
from tests.conftest import corpus

_LIMITING_BEFORE = frozenset(["only", "solely", "exclusively", "merely", "except", "unless"])
_UP_TO_LAST_CLAUSE_MARK = re.compile(r""".*(?:[;!?()"\u201c\u201d]|[.,:](?!\d)|\n\s*\n)""", re.DOTALL)
_SENTENCE_CLOSE = re.compile(r"""[.?!]['"\u201d\u2019)\]]*\s*$""")
_LIMITING_AFTER = re.compile(
    r"""[\s,;\u2014\u2013-]*['"\u201d\u2019)\]]*[\s,;\u2014\u2013-]*"""
    r"(?P<words>unless|except|excepting|but|if|only|provided|in\s+part|so\s+long\s+as|as\s+long\s+as|when|whenever"
    r"|where|subject\s+to|to\s+the\s+extent|until|absent|notwithstanding|save|however|not|never|other\s+than"
    r"|without|barring|no|nothing|none|neither|nor)\b",
    re.IGNORECASE,
)
# Rules version 4 adds the concessions: `, although he was able to pay` limits a passage as much.
_LIMITING_AFTER_4 = re.compile(
    _LIMITING_AFTER.pattern.replace("|nor)", "|nor|although|though|even\\s+though|even\\s+if|despite|regardless)"),
    re.IGNORECASE,
)


def reference_limits_before(source: str, start: int, window: int = 60) -> tuple[str, int, int] | None:
    """The clause before ``start`` (back to its last mark, at most ``window`` characters), its last five words."""
    lo = max(0, start - window)
    tail = source[lo:start]
    if not tail.strip() or tail.rstrip()[-1:] in '.;:!?()"\u201c\u201d':
        return None
    last = _UP_TO_LAST_CLAUSE_MARK.match(tail)
    offset = lo + (last.end() if last is not None else 0)
    clause = source[offset:start].lower().replace("\u2019", "'")
    found: tuple[str, int, int] | None = None
    for m in [*WORD.finditer(clause)][-5:]:
        w = m.group()
        if w in NEGATIONS or w == "cannot" or w.endswith("n't"):
            return NEGATED_BEFORE, offset + m.start(), offset + m.end()
        if found is None and w in _LIMITING_BEFORE:
            found = (LIMITED_BEFORE, offset + m.start(), offset + m.end())
    return found


def reference_limits_after(source: str, end: int, rules: int = 4) -> tuple[int, int] | None:
    """A limiting phrase right after ``end``, unless the passage closed its sentence; `No.` is no negation."""
    if _SENTENCE_CLOSE.search(source[max(0, end - 4) : end]):
        return None
    m = (_LIMITING_AFTER_4 if rules >= 4 else _LIMITING_AFTER).match(source, end, min(len(source), end + 80))
    if m is None or (m.group("words").lower() == "no" and source[m.end() : m.end() + 1] == "."):
        return None
    return m.span("words")


def assert_edges_agree(text: str) -> tuple[int, int]:
    """Both reads agree with the references at every position of ``text``; how many positions each flagged."""
    before = after = 0
    for pos in range(len(text) + 1):
        expected = reference_limits_before(text, pos)
        assert limits_before(text, pos) == expected, (pos, text[max(0, pos - 60) : pos])
        before += expected is not None
        for rules in (3, 4):
            expected_after = reference_limits_after(text, pos, rules)
            assert limits_after(text, pos, rules=rules) == expected_after, (rules, pos, text[pos : pos + 80])
        after += expected_after is not None
    return before, after


@pytest.mark.parametrize("name", sorted(corpus()))
def test_edge_reads_agree_with_the_plain_reading_on_every_position_of_the_opinions(name: str) -> None:
    before, after = assert_edges_agree(corpus()[name])
    assert before > 0  # the opinions do have negations and limiting words before some positions
    assert after > 0


# Pieces whose joins make near misses: words that end in a negation or limiting word (`piano`, `commonly`,
# `governor`), contractions with either apostrophe, `\u017f` (long s), `\u0130`/`\u0131` (dotted and dotless i) and
# `\u212a` (Kelvin sign), which case-insensitive matching folds to ASCII letters, and the marks of a clause's end.
_NEAR_MISS_WORDS = """unless excepting but if in part so long as subject to extent until absent notwithstanding save
    however never other than without barring whenever where piano commonly governor honor knot Not NOT ONLY Unless
    BUT If nothing nobody noted nonetheless norm North No. no. although though even though even if despite
    regardless thought Although"""
_PIECES = [
    *sorted(NEGATIONS | _LIMITING_BEFORE),
    *_NEAR_MISS_WORDS.split(),
    "don't",
    "can\u2019t",
    "N'T",
    "n\u2019T",
    "\u017fo",
    "\u0130f",
    "\u0131f",
    "\u212anot",
    "u\u0130nless",
    "\u00bdnot",
    "the",
    "court",
    "42",
    "3.5",
    *[" ", " ", " ", "\n", "\n\n", ",", ".", ";", ":", "'", '"', "\u201d", "\u2019", ")", "(", "]", "\u2014", "-", "?"],
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=60))
def test_edge_reads_agree_with_the_plain_reading_on_near_misses(pieces: list[str]) -> None:
    assert_edges_agree("".join(pieces))
