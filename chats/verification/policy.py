"""The alteration policy: which brackets and ellipses a quote may use (Bluebook Rules 5.2 and 5.3).

Alterations and omissions are allowed only where they cannot change what the source says:

- a bracket's content and the source words it stands for carry the same negations, numbers (digits, number words,
  dates and month names) and modal verbs; ``[sic]`` stands for nothing; ``[ ]`` only for letters inside a word;
- an ellipsis never omits a negation, a number, a modal or a limiting word from inside a clause; omitting whole
  sentences, citations or list items is allowed;
- a bracket that stands for different words is allowed, but unless it replaces a pronoun, an article or a role noun,
  only shortens what it stands for, or changes only a word's form, it is a *substitution* and the match's confidence
  is capped at :data:`SUBSTITUTION_MAX_CONFIDENCE`; so is a bracket that adds words other than pronouns, articles
  and role nouns.

Everything here works on canonical text (see :mod:`chats.verification.normalization`): lower-cased words, straight
apostrophes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from chats.verification.results import (
    FORM,
    INSERTION,
    REFERENCE,
    SAME,
    SHORTENED,
    SUBSTITUTION,
)

#: The highest confidence a match with a substitution (a bracket standing for different words) may have.
SUBSTITUTION_MAX_CONFIDENCE = 0.6
#: Maximum source words a bracketed phrase (``[the Court]``) may stand for.
MAX_BRACKET_WORDS = 8
# Most letters `[ ]` may stand for (the rest of a word: `nudge[ ]` for "nudges").
MAX_OMITTED_LETTERS = 12

# A word of canonical text: a number with its inner separators (`4.5`, `10,000`, `42-1983.1`, `1/2/2024`), or letters
# with a clitic (`didn't`, `university's`). Canonical text drops whitespace next to quotation marks (`not 'hold'` is
# `not'hold'`), so an apostrophe joins letters only in a clitic.
WORD = re.compile(r"\d+(?:[.,:/-]\d+)*|[^\W\d_]+(?:'(?:t|s|d|ll|re|ve|m)(?![^\W\d_]))?")


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


NEGATIONS = _set("not no never neither nor none nothing nobody nowhere cannot without unless except")
MODALS = _set("shall may must should will would can could might")
LIMITING = _set("only solely exclusively all any every except unless")
NUMBER_WORDS = _set(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
    eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion trillion
    half twice thrice once double triple dozen first second third fourth fifth sixth seventh eighth ninth tenth
    eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth thirtieth
    fortieth fiftieth hundredth thousandth
    january february march april june july august september october november december"""
)
PRONOUNS = _set(
    """i me my mine we us our ours you your yours he him his she her hers it its they them their theirs this that these
    those who whom whose which one itself himself herself themselves ourselves"""
)
ARTICLES = _set("a an the")
ROLE_NOUNS = _set(
    """plaintiff plaintiffs defendant defendants petitioner petitioners respondent respondents appellant appellants
    appellee appellees court courts city cities state states board boards county counties agency commission
    government party parties movant movants claimant claimants applicant applicants intervenor intervenors
    complainant complainants employer employers employee employees legislature congress officer officers
    statute act section ordinance regulation rule"""
)
_REFERENCE_WORDS = PRONOUNS | ARTICLES | ROLE_NOUNS
# Endings that make another form of the same word (`impos[ing]` for "imposes"), and no ending at all.
INFLECTIONS = _set("s es ed d ing ion ions e er ers est ies ied y ly ment ments al ally 's ' ive") | {""}
# Prefixes that negate a word (`[un]constitutional`).
NEGATING_PREFIXES = ("un", "non", "in", "im", "il", "ir", "dis")
_MIN_STEM = 3
# Modal verbs hidden in a negated contraction: `can't` -> can, `won't` -> will.
_CONTRACTED_MODALS = {"ca": "can", "wo": "will", "sha": "shall"}

# Words that carry the meaning an omission must keep, and a quick test for them.
_MEANINGFUL = NEGATIONS | MODALS | LIMITING | NUMBER_WORDS
_LETTER_RUNS = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")


def _carries_meaning(text: str) -> bool:
    lowered = text.lower()
    return (
        _DIGIT.search(lowered) is not None
        or "n't" in lowered
        or not _MEANINGFUL.isdisjoint(_LETTER_RUNS.findall(lowered))
    )


# A clause ends at these (a `.`, `,` or `:` between two digits is inside a number).
_CLAUSE_MARK = re.compile(r"""[;!?()"]|[.,:](?!\d)|(?<!\d)[.,:]""")
# Sentence ends: `.`, `?`, `!`, `;` or `:`, maybe followed by closing quotation marks or parentheses.
_SENTENCE_END = re.compile(r"""[.?!;:]['")\]]*$""")
_SENTENCE_START = re.compile(r"""^['"(\[]*[.?!;:]""")
_LIST_END = re.compile(r"""[,;]['")\]]*$""")
_LAST_ITEM = re.compile(r"(?:and|or|nor)\b", re.IGNORECASE)
# Text that is (part of) a citation: a case name, a reporter, a code section, `Id.`, `supra`, a pin cite.
_CITATION = re.compile(
    r"\bv\.|\bU\.S\.|\bU\.S\.C\.|\bF\.(?:\d|Supp)|\bS\.Ct\.|\bL\.Ed\.|\u00a7|\b[Ii]d\.|\bsupra\b|\binfra\b|\bat \d"
    r"|\bCir\.|\(\d{4}\)|\bNo\.\d"
)


def words(text: str) -> list[str]:
    """The words of canonical ``text``, lower-cased."""
    return WORD.findall(text.lower())


def _profile(ws: Iterable[str]) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Negations, numbers and modal verbs in ``ws`` (lower-cased words)."""
    negations: Counter[str] = Counter()
    numbers: Counter[str] = Counter()
    modals: Counter[str] = Counter()
    for w in ws:
        if w.endswith("n't"):
            negations["not"] += 1
            stem = w[:-3]
            stem = _CONTRACTED_MODALS.get(stem, stem)
            if stem in MODALS:
                modals[stem] += 1
        elif w == "cannot":
            negations["not"] += 1
            modals["can"] += 1
        elif w in NEGATIONS:
            negations[w] += 1
        if w in MODALS:
            modals[w] += 1
        if w[0].isdigit() or w in NUMBER_WORDS:
            numbers[w] += 1
    return negations, numbers, modals


def meaning_change(quote_words: list[str], source_words: list[str]) -> str | None:
    """Why replacing ``source_words`` with ``quote_words`` changes the meaning, or None if it does not."""
    q_neg, q_num, q_mod = _profile(quote_words)
    s_neg, s_num, s_mod = _profile(source_words)
    if q_neg != s_neg:
        return "an alteration changes a negation"
    if q_num != s_num:
        return "an alteration changes a number"
    if q_mod != s_mod:
        return "an alteration changes a modal verb"
    return None


def hidden_change(content_words: list[str], beyond_words: list[str]) -> str | None:
    """Why words next to an edge bracket, in its clause but not covered by it, carry meaning the bracket hides."""
    c_neg, _, c_mod = _profile(content_words)
    b_neg, _, b_mod = _profile(beyond_words)
    if b_neg - c_neg:
        return "an alteration changes a negation"
    if b_mod - c_mod:
        return "an alteration changes a modal verb"
    return None


def _is_form(q: str, s: str) -> bool:
    """Whether ``q`` and ``s`` are forms of one word: a common stem and inflectional endings."""
    n = 0
    limit = min(len(q), len(s))
    while n < limit and q[n] == s[n]:
        n += 1
    return n >= _MIN_STEM and q[n:] in INFLECTIONS and s[n:] in INFLECTIONS


def _negated(word: str, other: str) -> bool:
    """Whether ``word`` is ``other`` with a negating prefix (`unconstitutional`, `constitutional`)."""
    return any(word == prefix + other for prefix in NEGATING_PREFIXES) and len(other) >= _MIN_STEM


def classify_bracket(quote_side: str, source_side: str) -> tuple[str | None, str]:
    """``(reason, detail)`` for a bracket: ``quote_side`` is the bracket's content completed to whole words by the
    letters it is attached to, ``source_side`` the source words it stands for. ``reason`` is None if the bracket is
    allowed; ``detail`` then says what it does (``SAME``, ``FORM``, ``REFERENCE``, ``SHORTENED``, ``INSERTION`` or
    ``SUBSTITUTION``)."""
    q = words(quote_side)
    s = words(source_side)
    reason = meaning_change(q, s)
    if reason is not None:
        return reason, ""
    if any(_negated(a, b) or _negated(b, a) for a in q for b in s):
        return "an alteration changes a negation", ""
    if q == s:
        return None, SAME
    if not s:
        # Added words: a subject or an article supplied for the reader is an insertion; anything else adds to what
        # the source says, and is shown and capped like a substitution.
        return None, INSERTION if all(w in _REFERENCE_WORDS for w in q) else SUBSTITUTION
    if len(q) == len(s) and all(a == b or _is_form(a, b) for a, b in zip(q, s, strict=True)):
        return None, FORM
    if all(w in _REFERENCE_WORDS for w in s):
        return None, REFERENCE
    if q and set(q) <= set(s):
        return None, SHORTENED
    return None, SUBSTITUTION


# Preference among the ways an edge bracket can be read (lowest first; on a tie, the fewest words): the reading
# that covers the most of what the bracket says.
DETAIL_RANK = {SAME: 0, FORM: 1, SHORTENED: 2, REFERENCE: 3, INSERTION: 4, SUBSTITUTION: 5}


def clause_words_before(text: str, pos: int, window: int = 400) -> list[tuple[int, int]]:
    """Spans of the words of the clause that ends at ``pos`` of canonical ``text`` (nearest last)."""
    lo = max(0, pos - window)
    region = text[lo:pos]
    last = None
    for last in _CLAUSE_MARK.finditer(region):  # noqa: B007 - the last mark is the one wanted
        pass
    offset = lo + (last.end() if last is not None else 0)
    return [(m.start(), m.end()) for m in WORD.finditer(text, offset, pos)]


def clause_words_after(text: str, pos: int, window: int = 400) -> list[tuple[int, int]]:
    """Spans of the words of the clause that starts at ``pos`` of canonical ``text`` (nearest first)."""
    hi = min(len(text), pos + window)
    mark = _CLAUSE_MARK.search(text, pos, hi)
    end = mark.start() if mark is not None else hi
    return [(m.start(), m.end()) for m in WORD.finditer(text, pos, end)]


def omission_change(before: str, gap: str, after: str) -> str | None:
    """Why omitting ``gap`` (canonical source text between ``before`` and ``after``) drops what carries the meaning,
    or None if the omission is allowed.

    Whole sentences (the omission starts after a sentence end and ends with one) may be omitted whatever they say;
    citations and list items (between commas or semicolons) may be omitted unless they hold a negation, a modal or
    a limiting word; anything else is inside a clause and may not hold a negation, a number, a modal or a limiting
    word.
    """
    stripped = gap.strip()
    if not stripped:
        return None
    before = before.rstrip()
    after = after.lstrip()
    starts_clean = not before or bool(_SENTENCE_END.search(before)) or bool(_SENTENCE_START.match(stripped))
    if starts_clean and (_SENTENCE_END.search(stripped) or _SENTENCE_START.match(after)):
        return None  # whole sentences
    if not _carries_meaning(stripped):
        return None  # the common case, and a cheap one: the search may try many omissions per quote
    ws = words(stripped)
    negations, numbers, modals = _profile(ws)
    limiting = any(w in LIMITING for w in ws)
    # List items: between separators, and either several of them or before the list's last item (`A, . . . and D`);
    # a single phrase between commas (`$500, payable within 30 days, after filing`) is inside its clause.
    structural = bool(_CITATION.search(stripped)) or (
        (before.endswith((",", ";")) or stripped.startswith((",", ";")))
        and (bool(_LIST_END.search(stripped)) or after.startswith((",", ";")))
        and (bool(_LAST_ITEM.match(after)) or any(mark in stripped.strip(",; ") for mark in ",;"))
    )
    if negations:
        return "an omission drops a negation"
    if modals:
        return "an omission drops a modal verb"
    if limiting:
        return "an omission drops a limiting word"
    if numbers and not structural:
        return "an omission drops a number"
    return None
