"""Quote verification against real court documents (``lqai_verify.verification``): pure Python, no database."""

from __future__ import annotations

import functools
import random
import re
import time
import unicodedata
from dataclasses import FrozenInstanceError

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lqai_verify.verification import (
    ALTERED,
    ALTERED_MAX_CONFIDENCE,
    EXACT_MATCH,
    MAX_ELLIPSIS_GAP,
    TOLERANT_MATCH,
    NormalizedSource,
    QuoteMatch,
    verify_quote,
)
from lqai_verify.verification.normalization import is_token_boundary
from tests.conftest import DEMOCRACY, FISHER, HOGARTH, corpus, normalized

PROPERTY_SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def verify(name: str, quote: str) -> QuoteMatch | None:
    return normalized(name).verify(quote)


def passage(name: str, match: QuoteMatch) -> str:
    return corpus()[name][match.start : match.end]


def flagged_only(match: QuoteMatch) -> bool:
    """Whether ``match`` is ``altered`` only for what the source says next to it (its context flags), not for
    anything the quote did: a random passage may start after a negation or stop before a limiting clause."""
    return (
        match.method == ALTERED
        and match.confidence <= ALTERED_MAX_CONFIDENCE
        and bool(match.flags)
        and not any(a.alters for a in match.alterations)
        and all(f.source_end <= match.start or f.source_start >= match.end for f in match.flags)
    )


def assert_tolerant(match: QuoteMatch | None) -> QuoteMatch:
    """Tolerant, or altered only for the passage's context (see :func:`flagged_only`)."""
    assert match is not None
    if flagged_only(match):
        return match
    assert match.method == TOLERANT_MATCH
    assert 0 < match.confidence < 1
    return match


def assert_exact(match: QuoteMatch | None) -> QuoteMatch:
    """Exact, or altered only for the passage's context (see :func:`flagged_only`)."""
    assert match is not None
    if flagged_only(match):
        assert match.alterations == ()
        return match
    assert match.method == EXACT_MATCH
    assert match.confidence == 1.0
    return match


def crude(text: str) -> str:
    """Letters and digits only, lower-cased: coarser than any tolerance the verifier applies."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text)).lower()


@functools.cache
def crude_corpus(name: str) -> str:
    return crude(corpus()[name])


def test_corpus_is_present() -> None:
    assert set(corpus()) >= {FISHER, DEMOCRACY, HOGARTH}
    fisher = corpus()[FISHER]
    assert "Cite as: 570 U. S." in fisher
    assert "admis-\n" in fisher
    assert "\u2019" in fisher
    assert "\u2014" in fisher
    assert ". . ." in fisher


# --- Property tests ------------------------------------------------------------------------------------------------

_WORDS = re.compile(r"\S+")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")


@functools.cache
def tokens(name: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _WORDS.finditer(corpus()[name])]


def _line_of(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    return text[line_start : line_end if line_end != -1 else len(text)]


def draw_passage(data: st.DataObject, max_words: int = 40) -> tuple[str, int, int]:
    """A word-aligned passage of a real opinion that starts and ends with a letter or digit, in body text (its first
    and last lines are not short lines, which could be running heads)."""
    name = data.draw(st.sampled_from(sorted(corpus())))
    text = corpus()[name]
    toks = tokens(name)
    i = data.draw(st.integers(0, len(toks) - 1))
    j = data.draw(st.integers(i, min(i + max_words, len(toks) - 1)))
    start, end = toks[i][0], toks[j][1]
    assume(text[start].isalnum() and text[end - 1].isalnum())
    # Not `cally` of "automati-\ncally": a passage starts and ends at a word's edge.
    assume(is_token_boundary(text, start) and is_token_boundary(text, end))
    for pos in (start, end - 1):
        assume(len(" ".join(_line_of(text, pos).split())) >= 50)
    return name, start, end


def boundary(text: str, i: int) -> bool:
    """A token boundary, and not inside a word broken by a soft hyphen (`Hop\u00ad\nwood`)."""
    return is_token_boundary(text, i) and not text[:i].rstrip().endswith("\u00ad") and text[i : i + 1] != "\u00ad"


@PROPERTY_SETTINGS
@given(data=st.data())
def test_any_substring_verifies_exactly_or_only_at_token_boundaries(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(corpus())))
    text = corpus()[name]
    length = data.draw(st.integers(1, 400))
    start = data.draw(st.integers(0, len(text) - length))
    quote = text[start : start + length]
    assume(quote.strip())
    stripped_start = start + len(quote) - len(quote.lstrip())

    match = verify(name, quote)

    if boundary(text, stripped_start) and boundary(text, stripped_start + len(quote.strip())):
        exact = assert_exact(match)
        assert text[exact.start : exact.end] == quote.strip()
        # str.find returns the first occurrence, which may precede the one the substring was cut from.
        assert exact.start <= stripped_start
    if match is not None and (match.method == EXACT_MATCH or (flagged_only(match) and not match.alterations)):
        # A quote never starts or ends inside a word or number of the source, wherever it is found.
        assert is_token_boundary(text, match.start)
        assert is_token_boundary(text, match.end)


_STRAIGHTEN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_CURL = str.maketrans({"'": "\u2019", '"': "\u201d"})
_DASHES = str.maketrans({"\u2014": "--", "\u2013": "-"})
_WHITESPACE = [" ", "\n", "  ", "\n    ", "\t", "\u00a0", " \r\n "]


def perturb(quote: str, rnd: random.Random, kinds: set[str]) -> str:
    if "hyphenation" in kinds:
        quote = re.sub(r"(?<=[a-z])-\n\s*(?=[a-z])", "", quote)
    if "quotes" in kinds:
        quote = quote.translate(_STRAIGHTEN) if rnd.random() < 0.7 else quote.translate(_CURL)
    if "dashes" in kinds:
        quote = quote.translate(_DASHES)
    if "whitespace" in kinds:
        quote = re.sub(r"\s+", lambda _: rnd.choice(_WHITESPACE), quote)
    if "zero_width" in kinds:
        spots = [m.start() for m in re.finditer(r"(?<=[a-z])(?=[a-z])", quote)]
        for spot in sorted(rnd.sample(spots, min(2, len(spots))), reverse=True):
            quote = quote[:spot] + rnd.choice(["\u200b", "\u00ad", "\ufeff"]) + quote[spot:]
    return quote


@PROPERTY_SETTINGS
@given(
    data=st.data(),
    kinds=st.sets(st.sampled_from(["whitespace", "quotes", "dashes", "hyphenation", "zero_width"]), min_size=1),
    rnd=st.randoms(use_true_random=False),
)
def test_formatting_perturbations_verify_as_tolerant(data: st.DataObject, kinds: set[str], rnd: random.Random) -> None:
    name, start, end = draw_passage(data)
    text = corpus()[name]
    original = text[start:end]
    quote = perturb(original, rnd, kinds)
    assume(quote.strip() not in text)

    match = assert_tolerant(verify(name, quote))

    if (match.start, match.end) != (start, end):
        # The same words (modulo formatting) occur earlier, e.g. the syllabus repeats the opinion.
        assert match.start < start
        assert verify_quote(quote, text[match.start : match.end]) is not None


_REPLACEMENTS = ["court", "statute", "plaintiff", "never", "Congress", "always", "state", "denied", "granted"]


@PROPERTY_SETTINGS
@given(data=st.data(), change=st.sampled_from(["replace", "drop", "insert_not"]))
def test_a_one_word_change_does_not_verify(data: st.DataObject, change: str) -> None:
    name, start, end = draw_passage(data)
    original = corpus()[name][start:end]
    # Omission markers and Bluebook brackets legitimately stand for words, and a blank line may hold a running head
    # (which is meant to be skipped): keep those out of this property.
    assume(not re.search(r"\.\.\.|\. \.|\u2026|\[|\]", original) and not _BLANK_LINE.search(original))
    words = original.split()
    assume(len(words) >= 4)
    alpha = [i for i, word in enumerate(words) if word.isalpha()]
    assume(alpha)
    i = data.draw(st.sampled_from(alpha))
    if change == "replace":
        new = data.draw(st.sampled_from([w for w in _REPLACEMENTS if w.lower() != words[i].lower()]))
        changed = [*words[:i], new, *words[i + 1 :]]
    elif change == "drop":
        changed = [*words[:i], *words[i + 1 :]]
    else:
        changed = [*words[:i], "not", *words[i:]]
    quote = " ".join(changed)
    # The changed quote may, by coincidence, be real text elsewhere in the source.
    assume(crude(quote) not in crude_corpus(name))

    assert verify(name, quote) is None


# --- Exact tier ----------------------------------------------------------------------------------------------------


def test_exact_match_offsets_and_confidence() -> None:
    text = corpus()[FISHER]
    quote = "The Court concludes\nthat the Court of Appeals did not hold the University"
    match = verify(FISHER, quote)
    assert match == QuoteMatch(EXACT_MATCH, 1.0, text.index(quote), text.index(quote) + len(quote))


def test_exact_match_ignores_surrounding_whitespace_of_the_quote() -> None:
    match = verify(FISHER, "  the Fifth Circuit did not hold the University \n")
    assert match is not None
    assert match.method == EXACT_MATCH
    assert passage(FISHER, match) == "the Fifth Circuit did not hold the University"


def test_verify_quote_accepts_a_string_or_a_normalized_source() -> None:
    text = corpus()[FISHER]
    for quote in ["the Fifth Circuit did not hold", "the University's decision to use race", "no such passage"]:
        assert verify_quote(quote, text) == verify_quote(quote, normalized(FISHER))


@pytest.mark.parametrize("quote", ["", "   ", "\n\t ", "\u200b", "\u2026", " . . ., ", "[the Court]", "\u201c \u201d"])
def test_empty_or_content_free_quotes_never_verify(quote: str) -> None:
    assert verify(FISHER, quote) is None
    assert verify_quote(quote, "") is None


def test_quote_longer_than_source() -> None:
    source = "The Court held that"
    assert verify_quote("The Court held that the statute applies", source) is None
    assert verify_quote(source + " it", NormalizedSource.build(source)) is None


def test_quote_match_is_frozen() -> None:
    match = QuoteMatch(EXACT_MATCH, 1.0, 0, 1)
    with pytest.raises(FrozenInstanceError):
        match.start = 5  # type: ignore[misc]
    assert (EXACT_MATCH, TOLERANT_MATCH) == ("exact_match", "tolerant_match")


# --- Tolerant tier: each normalization -----------------------------------------------------------------------------


def test_curly_quotes_match_straight_ones_and_back() -> None:
    match = assert_tolerant(verify(FISHER, "the University's 2008 entering class"))
    assert passage(FISHER, match) == "the\n  University\u2019s 2008 entering class"
    assert match.confidence == 0.98

    straight_source = corpus()[DEMOCRACY]
    quote = "Timothy K. Moore\u2019s (together, \u201cLegislative Defendants\u201d) Motion to Dismiss"
    match = assert_tolerant(verify(DEMOCRACY, quote))
    assert straight_source[match.start : match.end] == (
        'Timothy K. Moore\'s (together, "Legislative Defendants") Motion to Dismiss'
    )


@pytest.mark.parametrize(
    "quote",
    [
        "upholding the use of race as one of many \u2033plus factors\u2033",  # double primes
        "upholding the use of race as one of many \u201eplus factors\u201f",  # low-9 and reversed quotes
        "upholding the use of race as one of many \u00abplus factors\u00bb",  # guillemets
    ],
)
def test_double_quote_like_characters(quote: str) -> None:
    match = assert_tolerant(verify(FISHER, quote))
    assert passage(FISHER, match).endswith("\u201cplus factors\u201d")


@pytest.mark.parametrize("apostrophe", ["'", "`", "\u2032", "\u00b4", "\u02bc", "\u2018"])
def test_single_quote_like_characters(apostrophe: str) -> None:
    match = assert_tolerant(verify(FISHER, f"University{apostrophe}s 2008 entering class"))
    assert passage(FISHER, match) == "University\u2019s 2008 entering class"


def test_two_single_quotes_are_not_a_double_quote() -> None:
    assert verify(FISHER, "one of many \u2018\u2018plus factors\u2019\u2019") is None


@pytest.mark.parametrize(
    "quote",
    [
        "Argued October 10, 2012-Decided June 24, 2013",
        "Argued October 10, 2012--Decided June 24, 2013",
        "Argued October 10, 2012 \u2014 Decided June 24, 2013",
        "Argued October 10, 2012\u2013Decided June 24, 2013",
        "Argued October 10, 2012\u2212Decided June 24, 2013",
        "Argued October 10, 2012\u2015Decided June 24, 2013",
    ],
)
def test_dash_variants(quote: str) -> None:
    match = assert_tolerant(verify(FISHER, quote))
    assert passage(FISHER, match) == "Argued October 10, 2012\u2014Decided June 24, 2013"
    assert match.confidence == 0.98


def test_whitespace_runs_and_line_breaks_collapse() -> None:
    quote = "the court upheld the University's\tadmissions   plan.  Held: Because the Fifth Circuit"
    match = assert_tolerant(verify(FISHER, quote))
    assert passage(FISHER, match) == (
        "the court upheld the University\u2019s admissions plan.\nHeld: Because the Fifth Circuit"
    )


def test_whitespace_around_punctuation() -> None:
    # `U. S.` in the slip opinion, `U.S.` in the quote; `( Id.` in the source, `(Id.` in the quote.
    match = assert_tolerant(verify(FISHER, "Grutter v. Bollinger, 539 U.S. 306, upholding the use of race"))
    assert "539\n  U. S. 306" in passage(FISHER, match)
    match = assert_tolerant(verify(DEMOCRACY, "State Board Defendants are all associated with the State BoE. (Id."))
    assert passage(DEMOCRACY, match).endswith("( Id.")


def test_whitespace_between_digits_is_not_punctuation_spacing() -> None:
    source = "The ratio was 3.5 to 1 and the fee was 1,000 dollars."
    assert verify_quote("The ratio was 3. 5 to 1", source) is None
    assert verify_quote("the fee was 1, 000 dollars", source) is None
    assert_tolerant(verify_quote("The ratio  was 3.5 to 1", source))


def test_nfkc_ligatures_and_no_break_spaces() -> None:
    quote = "speaking a language other than English at home,\nsigni\ufb01cant\u00a0family responsibilities"
    match = assert_tolerant(verify(FISHER, quote))
    assert passage(FISHER, match).endswith("significant family responsibilities")
    # Fullwidth forms normalize to ASCII.
    assert_tolerant(verify(FISHER, "\uff34\uff45\uff58\uff41\uff53 State Legislature also responded"))


def test_nfkc_composes_combining_marks_either_way() -> None:
    source = "The cafe\u0301 owner and the r\u00e9sum\u00e9 clause."
    match = assert_tolerant(verify_quote("The caf\u00e9 owner", source))
    assert source[match.start : match.end] == "The cafe\u0301 owner"
    match = assert_tolerant(verify_quote("the re\u0301sume\u0301 clause", source))
    assert source[match.start : match.end] == "the r\u00e9sum\u00e9 clause"


def test_soft_hyphens_are_dropped() -> None:
    # The slip opinion has `Hop\u00ad\nwood` and `Grut\u00ad\nter`: soft hyphens at a line break.
    match = assert_tolerant(verify(FISHER, "The Texas State Legislature also responded to the Hopwood decision."))
    assert "Hop\u00ad\nwood" in passage(FISHER, match)
    assert match.confidence == 0.95  # a line break inside a word was joined
    match = assert_tolerant(verify(FISHER, "In Grutter, the Court reaffirmed his conclusion"))
    assert "Grut\u00ad\nter" in passage(FISHER, match)


def test_zero_width_characters_are_dropped() -> None:
    match = assert_tolerant(verify(FISHER, "the\nUniversity\u200b\u2019s 2008 en\u2060tering\ufeff class"))
    assert passage(FISHER, match) == "the\n  University\u2019s 2008 entering class"


# --- Hyphenation ---------------------------------------------------------------------------------------------------


def test_line_break_hyphenation_matches_joined_word() -> None:
    quote = "alleging that the University's consideration of race in admissions violated the Equal Protection Clause"
    match = assert_tolerant(verify(FISHER, quote))
    assert "admis-\n  sions violated" in passage(FISHER, match)
    assert passage(FISHER, match).startswith("alleging")
    assert passage(FISHER, match).endswith("Clause")
    assert match.confidence == 0.95


def test_line_break_hyphenation_also_matches_with_the_hyphen() -> None:
    match = assert_tolerant(verify(FISHER, "the University's consideration of race in admis-sions violated"))
    assert "admis-\n  sions" in passage(FISHER, match)


def test_real_compound_split_at_a_line_break_matches_with_hyphen() -> None:
    # `4.5% African-\nAmerican` in the slip opinion: the hyphen is real, and it must still match.
    match = assert_tolerant(verify(FISHER, "the entering class was 4.5% African-American and 16.9% Hispanic"))
    assert passage(FISHER, match).endswith("4.5% African-\nAmerican and 16.9% Hispanic")
    assert match.confidence == 0.98
    # Joined also matches (the verifier cannot tell a typesetting hyphen from a real one at a line end) ...
    assert_tolerant(verify(FISHER, "the entering class was 4.5% AfricanAmerican and 16.9% Hispanic"))
    # ... but a space is a different text.
    assert verify(FISHER, "the entering class was 4.5% African American and 16.9% Hispanic") is None


def test_constructed_compound_hyphenation_both_ways() -> None:
    source = "Plaintiffs, who are African-\nAmerican voters, challenged the admis-\nsions policy."
    assert_tolerant(verify_quote("who are African-American voters", source))
    assert_tolerant(verify_quote("challenged the admissions policy", source))
    assert_tolerant(verify_quote("challenged the admis-sions policy", source))


def test_a_hyphen_inside_a_line_is_a_real_hyphen() -> None:
    source = "a workable race-neutral alternative and a recover clause"
    assert verify_quote("a workable raceneutral alternative", source) is None
    assert verify_quote("a workable race neutral alternative", source) is None
    assert verify_quote("and a re-cover clause", source) is None
    assert_tolerant(verify_quote("a workable race\u2010neutral alternative", source))  # U+2010 HYPHEN


def test_quote_ending_in_a_line_end_hyphen() -> None:
    text = corpus()[FISHER]
    quote = "Grutter calls for deference to the University's experience and expertise about its edu-"
    match = assert_tolerant(verify(FISHER, quote))
    assert text[match.start : match.end].endswith("about its edu-")


# --- Running heads -------------------------------------------------------------------------------------------------


def test_running_head_inside_a_passage_is_skipped() -> None:
    # Page 2 -> 3 of the syllabus: `... decision\n\f  Cite as: 570 U. S. ____ (2013)  3\n\n  Syllabus\n\n  to use race`.
    quote = (
        "the Fifth Circuit held petitioner could challenge only whether the University's decision to use race as an "
    )
    quote += "admissions factor \u201cwas made in good faith.\u201d"
    match = assert_tolerant(verify(FISHER, quote))
    spanned = passage(FISHER, match)
    assert spanned.startswith("the Fifth Circuit\n    held petitioner")
    assert spanned.endswith("\u201cwas made in good faith.\u201d")
    assert "Cite as: 570 U. S. ____ (2013)" in spanned
    assert "Syllabus" in spanned
    assert match.confidence == 0.95


def test_running_head_inside_a_hyphenated_word_is_skipped() -> None:
    # `back-\n\f  Cite as: ...  3\n\n  Opinion of the Court\n\nground`: hyphenation across a page break.
    match = assert_tolerant(
        verify(FISHER, "circumstances that give insight into a student's background. These included")
    )
    spanned = passage(FISHER, match)
    assert spanned.startswith("circumstances")
    assert "back-\n" in spanned
    assert "Opinion of the Court" in spanned
    assert spanned.endswith("ground. These included")


def test_repeated_caption_running_head_is_skipped() -> None:
    # Page 1 -> 2 of the syllabus: `2   FISHER v. UNIVERSITY OF TEXAS AT AUSTIN` and `Syllabus` interrupt the quote.
    quote = "state university \u201cdecisions based on race or ethnic origin . . . are reviewable under the Fourteenth"
    match = assert_tolerant(verify(FISHER, quote))
    assert "FISHER v. UNIVERSITY OF TEXAS AT AUSTIN" in passage(FISHER, match)


def test_star_paging_inside_a_passage_is_skipped() -> None:
    quote = 'the factual allegations must be sufficient to "raise a right to relief above the speculative level"'
    match = assert_tolerant(verify(DEMOCRACY, quote))
    assert "[590 F.Supp.3d 861]" in passage(DEMOCRACY, match)


def test_bare_page_number_inside_a_passage_is_skipped() -> None:
    quote = "which are voters' photos of their own completed ballots or of themselves in the voting booth"
    match = assert_tolerant(verify(HOGARTH, quote))
    assert "completed\n\n4\n\nballots" in passage(HOGARTH, match)


def test_generic_repeated_short_lines_are_running_heads() -> None:
    page = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut\n" * 4
    head = "\n               SCALIA, J., concurring\n\n"
    source = (page + head) * 3 + "the judgment below\n" + head + "is reversed.\n"
    match = assert_tolerant(verify_quote("the judgment below is reversed.", source))
    assert "SCALIA" in source[match.start : match.end]
    # Once in a document is a heading, not a running head: it is part of the text.
    single = page + "the judgment below\n" + head + "is reversed.\n"
    assert verify_quote("the judgment below is reversed.", single) is None
    assert_tolerant(verify_quote("the judgment below SCALIA, J., concurring is reversed.", single))


def test_quoted_running_head_text_still_verifies() -> None:
    # Running-head detection must not make the head text itself unquotable.
    match = assert_tolerant(verify(FISHER, "SUPREME  COURT OF THE UNITED STATES\n\nSyllabus"))
    assert passage(FISHER, match).startswith("SUPREME COURT")
    assert_tolerant(verify(FISHER, "Cite as:  570 U.S. ____ (2013)"))


# --- Brackets and ellipses -----------------------------------------------------------------------------------------


def test_bracketed_letter_matches_either_case() -> None:
    match = assert_tolerant(
        verify(FISHER, "[t]he Court concludes that the Court of Appeals did not hold the University")
    )
    assert passage(FISHER, match).startswith("The Court concludes")
    assert match.confidence == 0.90
    match = assert_tolerant(verify(FISHER, "[T]he Court of Appeals did not hold the University"))
    assert passage(FISHER, match) == "the Court of Appeals did not hold the University"
    # The bracketed letter is a letter of the source, not a wildcard.
    assert verify(FISHER, "[b]he Court of Appeals did not hold the University") is None


def test_bracketed_phrase_replaces_a_few_words() -> None:
    quote = "The Court concludes that [the appeals court] did not hold the University to the demanding burden"
    match = assert_tolerant(verify(FISHER, quote))
    assert "the Court of Appeals did not hold" in passage(FISHER, match)
    assert match.confidence == 0.90
    # A bracketed insertion (nothing replaced) is an alteration too.
    # ... that adds words naming the actor is `altered`: the verifier cannot vouch for them.
    added = verify(FISHER, "the Court of Appeals did not hold the University [of Texas] to the demanding")
    assert added is not None
    assert added.method == ALTERED
    assert added.confidence <= ALTERED_MAX_CONFIDENCE
    # Brackets attached to a word: `impose[d]` (a letter), `impos[ing]` (a word part).
    source = "the statute imposes numerous restrictions"
    assert_tolerant(verify_quote("the statute impose[d] numerous restrictions", source))
    assert_tolerant(verify_quote("the statute impose[s] numerous restrictions", source))
    assert_tolerant(verify_quote("the statute impos[ing] numerous restrictions", source))


def test_bracketed_phrase_covers_at_most_a_few_words() -> None:
    source = (
        "The Court concludes that alpha beta gamma delta epsilon zeta eta theta iota kappa did not hold the University"
    )
    source = source.replace("did not hold the University", "did not hold it")
    assert verify_quote("The Court concludes that [they] did not hold it", source) is None
    short = "The Court concludes that alpha beta gamma did not hold the University"
    assert_tolerant(verify_quote("The Court concludes that [they] did not hold the University", short))


def test_brackets_in_the_source_are_text() -> None:
    # The source itself quotes with alterations: `nudge[ ] the[ ] claims`, `[t]hreadbare`.
    match = assert_tolerant(
        verify(DEMOCRACY, "\u201cnudge[ ] the[ ] claims across the line from conceivable to plausible.\u201d")
    )
    assert passage(DEMOCRACY, match) == '"nudge[ ] the[ ] claims across the line from conceivable to plausible."'
    assert verify(DEMOCRACY, "nudge the claims across the line from conceivable to plausible") is None


@pytest.mark.parametrize("ellipsis", ["...", "\u2026", ". . .", " . . . ", "[...]", " \u2026 "])
def test_each_ellipsis_form(ellipsis: str) -> None:
    quote = f"The University of Texas at Austin considers race as one{ellipsis}in its undergraduate admissions process"
    match = assert_tolerant(verify(FISHER, quote))
    assert passage(FISHER, match) == (
        "The University of Texas at Austin considers race as one of various fac-\n"
        "  tors in its undergraduate admissions process"
    )
    assert match.confidence == 0.87


def test_ellipsis_segments_must_be_in_order_and_close() -> None:
    text = corpus()[FISHER]
    assert verify(FISHER, "in its undergraduate admissions process ... The University of Texas at Austin") is None
    first = "Petitioner, who is Caucasian, was rejected for admission"
    far = "For the reasons stated, I would affirm the judgment"
    assert text.index(far) - text.index(first) > MAX_ELLIPSIS_GAP
    assert verify(FISHER, f"{first} ... {far}") is None
    near = "the University's 2008 entering class. She sued the University and school"
    assert_tolerant(verify(FISHER, f"{first} ... {near}"))


def test_ellipsis_segments_must_be_whole_words_and_unchanged() -> None:
    assert (
        verify(FISHER, "The University of Texas at Austin considers race ... undergraduate admissions processes")
        is None
    )
    assert verify(FISHER, "The University of Texas at Austin considers race ... dergraduate admissions") is None
    assert verify(FISHER, "The University of Texas at Austin considers gender ... undergraduate admissions") is None


def test_leading_and_trailing_alterations() -> None:
    match = assert_tolerant(verify(FISHER, "... considers race as one of various factors in its undergraduate"))
    assert passage(FISHER, match).startswith("considers race")
    # A bracket that shortens "The University of Texas at Austin" drops what names the actor: `altered`, and the
    # passage includes the words it stands for.
    shortened = verify(FISHER, "[The University] considers race as one of various factors ...")
    assert shortened is not None
    assert shortened.method == ALTERED
    assert passage(FISHER, shortened).startswith("The University of Texas at Austin considers race")


# --- Case ----------------------------------------------------------------------------------------------------------


def test_case_only_difference_has_clearly_lower_confidence() -> None:
    match = assert_tolerant(verify(FISHER, "THE FIFTH CIRCUIT DID NOT HOLD THE UNIVERSITY"))
    assert passage(FISHER, match) == "the Fifth Circuit did not hold the University"
    assert match.confidence <= 0.8


# --- Words and numbers are never tolerated -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "quote",
    [
        "the Fifth Circuit did hold the University",  # dropped "not"
        "the Fifth Circuit did not hold the State University",  # added word
        "the Fifth Circuit did not hold University",  # dropped word
        "the Fifth Circuit did not hold the Universities",  # changed word
        "the Fifth Circuit did not bind the University",  # changed word
        "the Fifth Circuit did not hold the University.",  # added punctuation that is not there
        "the Fifth Circuit didn't hold the University",
    ],
)
def test_changed_words_never_verify(quote: str) -> None:
    assert verify(FISHER, quote) is None


def test_changed_numbers_never_verify() -> None:
    source = "The University enrolled 29,051 students in 2008; the class was 4.5% African-American."
    assert verify_quote("enrolled 29,051 students", source) is not None
    assert verify_quote("enrolled 29,501 students", source) is None
    assert verify_quote("enrolled 29051 students", source) is None
    assert verify_quote("enrolled 29,051 students in 2009", source) is None
    assert verify(FISHER, "the entering class was 4.6% African-American and 16.9% Hispanic") is None


# --- Confidence ----------------------------------------------------------------------------------------------------


def test_confidence_ordering() -> None:
    exact = verify(FISHER, "the Fifth Circuit did not hold the University")
    whitespace = verify(FISHER, "the Fifth  Circuit did not\nhold the University")
    bracket = verify(FISHER, "[t]he Fifth Circuit did not hold the University")
    # The ellipsis omits words that carry no meaning of their own (dropping "did not" never verifies: see
    # test_an_ellipsis_never_drops_a_negation).
    ellipsis = verify(FISHER, "the Fifth Circuit did not hold the University to the ... burden of strict scrutiny")
    case = verify(FISHER, "the fifth circuit did not hold the university")
    assert exact is not None
    assert whitespace is not None
    assert bracket is not None
    assert ellipsis is not None
    assert case is not None
    assert exact.confidence == 1.0
    assert exact.confidence > whitespace.confidence > bracket.confidence > case.confidence
    assert whitespace.confidence > ellipsis.confidence > case.confidence
    assert 0.98 <= whitespace.confidence < 1
    assert case.confidence <= 0.8
    # Every tolerance at once still yields a positive confidence.
    combined = verify(FISHER, "[T]HE FIFTH CIRCUIT DID NOT HOLD THE UNIVERSITY TO THE ... BURDEN")
    assert combined is not None
    assert 0.5 <= combined.confidence < case.confidence


# --- Cost ----------------------------------------------------------------------------------------------------------


def test_pathological_inputs_stay_fast() -> None:
    source = "a " * 200_000
    normalized_source = NormalizedSource.build(source)
    t0 = time.perf_counter()
    assert normalized_source.verify("a ... a ... a ... a ... b") is None
    assert normalized_source.verify("a [x] a [y] a [z] a b") is None
    assert normalized_source.verify("A A A A A A A A B") is None
    assert time.perf_counter() - t0 < 5
