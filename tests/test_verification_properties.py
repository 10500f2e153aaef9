"""Property-based tests of quote verification over random passages of the real opinions (hypothesis).

A passage verifies exactly where it is; formatting perturbations verify as tolerant; a single word or digit deleted,
inserted or replaced never verifies; neither does a "not" inserted or removed, nor a negation, number or modal verb
replaced by a bracket or omitted by an ellipsis. Pure Python, no database.
"""

from __future__ import annotations

import functools
import random
import re
import unicodedata

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lqai_verify.verification import SUBSTITUTION_MAX_CONFIDENCE, QuoteMatch
from lqai_verify.verification.normalization import is_token_boundary
from lqai_verify.verification.policy import ARTICLES, MODALS, NEGATIONS, PRONOUNS, ROLE_NOUNS
from tests.conftest import corpus, normalized
from tests.test_verification import assert_exact, assert_tolerant, flagged_only

PROPERTY_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_WORDS = re.compile(r"\S+")
REFERENCE_WORDS = PRONOUNS | ARTICLES | ROLE_NOUNS
# A blank line, or a line holding only a number, may hold or be a running head (a page number), which is meant to be
# skipped: passages with one are kept out of the properties about changed words.
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n|\n[^\S\n]*\d+[^\S\n]*\n")
_MARKERS = re.compile(r"\.\.\.|\. \.|\u2026|\[|\]")


@functools.cache
def tokens(name: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _WORDS.finditer(corpus()[name])]


@functools.cache
def vocabulary() -> list[str]:
    """Words of the corpus, to insert or substitute: real words, so that a change is never obviously foreign."""
    words = {w for text in corpus().values() for w in re.findall(r"[A-Za-z]{3,}", text)}
    return sorted(words)


def crude(text: str) -> str:
    """Letters and digits only, lower-cased: coarser than any tolerance the verifier applies."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text)).lower()


@functools.cache
def crude_corpus(name: str) -> str:
    return crude(corpus()[name])


def _line_of(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    return text[line_start : line_end if line_end != -1 else len(text)]


def draw_passage(data: st.DataObject, min_words: int = 1, max_words: int = 40) -> tuple[str, int, int]:
    """A whitespace-aligned passage of a real opinion that starts and ends with a letter or digit, in body text (its
    first and last lines are not short lines, which could be running heads)."""
    name = data.draw(st.sampled_from(sorted(corpus())))
    text = corpus()[name]
    toks = tokens(name)
    i = data.draw(st.integers(0, len(toks) - min_words))
    j = data.draw(st.integers(i + min_words - 1, min(i + max_words, len(toks) - 1)))
    start, end = toks[i][0], toks[j][1]
    assume(text[start].isalnum() and text[end - 1].isalnum())
    # Not the second half of a word broken by a soft hyphen (`Hop\u00ad\nwood`) or a hyphen (`sec-\nond`), nor the first
    # half: that is inside a word.
    assume(not text[:start].rstrip().endswith("\u00ad") and text[end : end + 1] != "\u00ad")
    assume(is_token_boundary(text, start) and is_token_boundary(text, end))
    for pos in (start, end - 1):
        assume(len(" ".join(_line_of(text, pos).split())) >= 50)
    return name, start, end


def draw_plain_words(data: st.DataObject) -> tuple[str, list[str]]:
    """A passage's words, free of omission markers, brackets and blank lines (which may hold a running head)."""
    name, start, end = draw_passage(data, min_words=4)
    original = corpus()[name][start:end]
    assume(not _MARKERS.search(original) and not _BLANK_LINE.search(original))
    return name, original.split()


def _meaningful(word: str) -> bool:
    bare = re.sub(r"\W+$", "", word.lower())
    return bare in NEGATIONS or bare in MODALS or bare.endswith("n't") or bare.isdigit()


def _has_digit(word: str) -> bool:
    return any(ch.isdigit() for ch in word)


@functools.cache
def _centres(name: str, kind: str) -> list[int]:
    test = _meaningful if kind == "meaningful" else _has_digit
    text = corpus()[name]
    return [i for i, (a, b) in enumerate(tokens(name)) if test(text[a:b])]


def draw_words_around(data: st.DataObject, kind: str) -> tuple[str, list[str], int]:
    """Words of a passage (as :func:`draw_plain_words`) around a word of ``kind`` ("meaningful": a negation, a modal
    or a number; "digit": any word with a digit), and that word's index, never the first or last."""
    name = data.draw(st.sampled_from([n for n in sorted(corpus()) if _centres(n, kind)]))
    text = corpus()[name]
    toks = tokens(name)
    centre = data.draw(st.sampled_from(_centres(name, kind)))
    before = data.draw(st.integers(1, 15))
    after = data.draw(st.integers(1, 15))
    assume(centre - before >= 0 and centre + after < len(toks))
    start, end = toks[centre - before][0], toks[centre + after][1]
    original = text[start:end]
    assume(text[start].isalnum() and text[end - 1].isalnum())
    assume(not _MARKERS.search(original) and not _BLANK_LINE.search(original))
    return name, original.split(), before


def verify(name: str, quote: str) -> QuoteMatch | None:
    return normalized(name).verify(quote)


def assert_not_verified(name: str, quote: str) -> None:
    # The changed quote may, by coincidence, be real text elsewhere in the source.
    assume(crude(quote) not in crude_corpus(name))
    assert verify(name, quote) is None, quote


# --- The passage itself ---------------------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(data=st.data())
def test_a_passage_verifies_exactly_with_its_offsets(data: st.DataObject) -> None:
    name, start, end = draw_passage(data, max_words=60)
    text = corpus()[name]
    quote = text[start:end]

    match = verify(name, quote)

    match = assert_exact(match)
    assert match.alterations == ()
    assert text[match.start : match.end] == quote
    if match.start != start:
        # The same text at token boundaries earlier in the source (a syllabus repeats the opinion).
        assert match.start < start
        assert is_token_boundary(text, match.start)
        assert is_token_boundary(text, match.end)


# --- Formatting perturbations verify --------------------------------------------------------------------------------

_STRAIGHTEN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_DASHES = str.maketrans({"\u2014": "--", "\u2013": "-"})
_WHITESPACE = [" ", "\n", "  ", "\n    ", "\t", "\u00a0", " \r\n "]
# A quotation mark (not an apostrophe, which stands between two letters) turned from double to single or back.
_QUOTATION_MARK = re.compile(r"[\u201c\u201d\"]|(?<![^\W\d_])[\u2018\u2019']|[\u2018\u2019'](?![^\W\d_])")
_SWAP = {"\u201c": "\u2018", "\u201d": "\u2019", '"': "'", "\u2018": "\u201c", "\u2019": "\u201d", "'": '"'}


def perturb(quote: str, rnd: random.Random, kinds: set[str]) -> str:
    if "quote_style" in kinds:
        quote = _QUOTATION_MARK.sub(lambda m: _SWAP[m.group()], quote)
    if "straight_quotes" in kinds:
        quote = quote.translate(_STRAIGHTEN)
    if "dashes" in kinds:
        quote = quote.translate(_DASHES)
    if "line_breaks" in kinds:
        quote = re.sub(r" +", lambda _: "\n" if rnd.random() < 0.3 else " ", quote)
    if "whitespace" in kinds:
        quote = re.sub(r"\s+", lambda _: rnd.choice(_WHITESPACE), quote)
    if "soft_hyphens" in kinds:
        spots = [m.start() for m in re.finditer(r"(?<=[a-z])(?=[a-z])", quote)]
        for spot in sorted(rnd.sample(spots, min(3, len(spots))), reverse=True):
            quote = quote[:spot] + rnd.choice(["\u00ad", "\u00ad\n", "\u200b"]) + quote[spot:]
    return quote


@PROPERTY_SETTINGS
@given(
    data=st.data(),
    kinds=st.sets(
        st.sampled_from(["quote_style", "straight_quotes", "dashes", "line_breaks", "whitespace", "soft_hyphens"]),
        min_size=1,
    ),
    rnd=st.randoms(use_true_random=False),
)
def test_formatting_perturbations_verify(data: st.DataObject, kinds: set[str], rnd: random.Random) -> None:
    name, start, end = draw_passage(data)
    text = corpus()[name]
    quote = perturb(text[start:end], rnd, kinds)
    assume(quote.strip() not in text)

    match = verify(name, quote)

    match = assert_tolerant(match)
    assert 0.9 <= match.confidence < 1 or flagged_only(match)
    assert all(alteration.kind == "quote_mark" for alteration in match.alterations)
    if (match.start, match.end) != (start, end):
        # The same words (modulo formatting) occur earlier, e.g. the syllabus repeats the opinion.
        assert match.start < start
        assert normalized(name).verify(text[match.start : match.end]) is not None


# --- Word and digit edits never verify ------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(data=st.data(), change=st.sampled_from(["delete", "insert", "replace"]))
def test_a_single_word_deleted_inserted_or_replaced_never_verifies(data: st.DataObject, change: str) -> None:
    name, words = draw_plain_words(data)
    i = data.draw(st.integers(0, len(words) - 1))
    if change == "delete":
        changed = [*words[:i], *words[i + 1 :]]
    else:
        new = data.draw(st.sampled_from(vocabulary()))
        assume(new.lower() != words[min(i, len(words) - 1)].lower())
        changed = [*words[:i], new, *words[i:]] if change == "insert" else [*words[:i], new, *words[i + 1 :]]
    assert_not_verified(name, " ".join(changed))


@PROPERTY_SETTINGS
@given(data=st.data(), change=st.sampled_from(["delete", "insert", "replace"]))
def test_a_single_digit_deleted_inserted_or_replaced_never_verifies(data: st.DataObject, change: str) -> None:
    name, words, i = draw_words_around(data, "digit")
    quote = " ".join(words)
    offset = len(" ".join(words[:i])) + 1
    at = offset + data.draw(st.sampled_from([k for k, ch in enumerate(words[i]) if ch.isdigit()]))
    digit = data.draw(st.sampled_from([d for d in "0123456789" if d != quote[at]]))
    if change == "delete":
        changed = quote[:at] + quote[at + 1 :]
    elif change == "insert":
        changed = quote[:at] + digit + quote[at:]
    else:
        changed = quote[:at] + digit + quote[at + 1 :]
    assume(changed.strip())
    assert_not_verified(name, changed)


# --- "not" and the words that carry the meaning ----------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(data=st.data())
def test_inserting_not_never_verifies(data: st.DataObject) -> None:
    name, words = draw_plain_words(data)
    i = data.draw(st.integers(0, len(words)))
    assert_not_verified(name, " ".join([*words[:i], "not", *words[i:]]))


@PROPERTY_SETTINGS
@given(data=st.data(), how=st.sampled_from(["remove", "ellipsis", "bracket", "empty_bracket"]))
def test_removing_a_negation_modal_or_number_never_verifies(data: st.DataObject, how: str) -> None:
    """Removed outright, omitted by an ellipsis, or replaced by a bracket: "not" (or another negation, a modal
    verb or a number) never disappears from a verified quote (a match elsewhere never hides that word)."""
    name, words, i = draw_words_around(data, "meaningful")
    trailing = re.search(r"\W*$", words[i])
    punctuation = trailing.group() if trailing else ""
    if how == "ellipsis":
        assume(not words[i].lower().strip(".,;:").isdigit())  # a number may go with a whole citation or list item
        assume(not punctuation)  # `not.` ending a sentence: an omission up to a sentence end is a different rule
    replacement = {
        "remove": [],
        "ellipsis": [". . ."],
        "bracket": ["[" + data.draw(st.sampled_from(["it", "the Court", "held", "that", "plaintiff"])) + "]"],
        "empty_bracket": ["[ ]"],
    }[how]
    changed = " ".join([*words[:i], *replacement, *words[i + 1 :]])
    if how == "remove":
        assert_not_verified(name, changed)
    else:
        # Where the quote verifies at all, it is elsewhere in the source, where the marker stands for other words:
        # never for the word it removed here.
        match = verify(name, changed)
        if match is not None:
            source = corpus()[name]
            assert not any(
                re.sub(r"\W+$", "", words[i].lower()) in source[a.source_start : a.source_end].lower().split()
                for a in match.alterations
                if a.kind != "case"  # a case difference spans the whole passage: it stands for no word
            ), (changed, source[match.start : match.end])


@PROPERTY_SETTINGS
@given(data=st.data())
def test_a_word_replaced_by_other_bracketed_words_never_verifies_above_the_substitution_cap(
    data: st.DataObject,
) -> None:
    """`[x]` standing for a different content word is a substitution: shown, and capped."""
    name, words = draw_plain_words(data)
    i = data.draw(st.integers(1, len(words) - 2))
    word = re.sub(r"\W+", "", words[i]).lower()
    assume(word and word not in REFERENCE_WORDS)
    new = data.draw(st.sampled_from(vocabulary())).lower()
    assume(new[:3] != word[:3] and new not in REFERENCE_WORDS)  # not another form of the word, not a reference
    quote = " ".join([*words[:i], f"[{new}]", *words[i + 1 :]])

    match = verify(name, quote)

    if match is not None and match.confidence > SUBSTITUTION_MAX_CONFIDENCE:
        # Verified elsewhere, where the bracket stands for a pronoun, an article or a role noun: never for the word
        # it replaced here.
        source = corpus()[name]
        for alteration in match.alterations:
            assert alteration.detail != "substitution"
            spanned = source[alteration.source_start : alteration.source_end].lower()
            assert word not in re.findall(r"\w+", spanned), (quote, source[match.start : match.end])
