"""The verification policy (issue 13) on real text: court opinions and 42 U.S.C. §§ 1981-1988.

For each policy item: quotes that change the meaning never verify (with the reason), quotes that only alter or omit
what Bluebook Rules 5.1-5.3 allow verify, with the passage and every alteration located in the source by offsets.
Pure Python, no database.
"""

from __future__ import annotations

import pytest

from lqai_verify.verification import (
    EXACT_MATCH,
    SUBSTITUTION_MAX_CONFIDENCE,
    TOLERANT_MATCH,
    Alteration,
    QuoteMatch,
    verify_quote,
    verify_quote_detailed,
)
from lqai_verify.verification.normalization import is_token_boundary
from tests.conftest import DEMOCRACY, FISHER, HOGARTH, STATUTE, normalized
from tests.conftest import corpus_text as text
from tests.test_verification import assert_exact


def found(name: str, quote: str) -> QuoteMatch:
    match, reason = normalized(name).verify_detailed(quote)
    assert match is not None, reason
    # The same answer through every entry point.
    assert verify_quote(quote, text(name)) == match
    return match


def refused(name: str, quote: str) -> str:
    """The reason ``quote`` does not verify (asserting it does not, through every entry point)."""
    match, reason = normalized(name).verify_detailed(quote)
    assert match is None, (quote, passage(name, match) if match else None)
    assert verify_quote(quote, text(name)) is None
    assert reason
    return reason


def passage(name: str, match: QuoteMatch) -> str:
    return text(name)[match.start : match.end]


def altered(name: str, match: QuoteMatch) -> list[tuple[str, str, str, str]]:
    """Each alteration as (kind, quote text, the source text it stands for, detail)."""
    source = text(name)
    return [(a.kind, a.quote_text, source[a.source_start : a.source_end], a.detail) for a in match.alterations]


def test_the_statute_is_present() -> None:
    statute = text(STATUTE)
    assert "\u00a71983. Civil action for deprivation of rights" in statute
    assert "shall be liable to the party injured in an action at law" in statute
    assert "may recover not exceeding $5,000 damages therein" in statute


# --- 1. Boundaries --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "quote"),
    [
        (STATUTE, "000 damages therein"),  # inside `$5,000`
        (STATUTE, "may recover not exceeding $5"),  # `$5` of `$5,000`
        (STATUTE, "983, 1985, and 1986 of this title"),  # inside `1983`
        (STATUTE, "sections 1981, 1981a, 1982, 198"),
        (STATUTE, "Public Law 92"),  # `92\u2013318` is one number
        (STATUTE, "318 [20 U.S.C. 1681 et seq.]"),
        (STATUTE, "governmental discrimination and impairment"),  # inside `nongovernmental`
        (FISHER, "constitutional an admissions program"),  # inside `unconstitutional`
        (FISHER, "5% African-"),  # inside `4.5%`
        (HOGARTH, "24-CV-481-FL"),  # inside `5:24-CV-481-FL`
    ],
)
def test_a_quote_never_starts_or_ends_inside_a_word_or_number(name: str, quote: str) -> None:
    assert quote in text(name)  # the text is there, as a substring
    assert refused(name, quote) == "the quote starts or ends inside a word or number of the source"


def test_boundaries_hold_in_the_tolerant_tier_too() -> None:
    # Formatting differences (a line break, a curly apostrophe) send the quote to the tolerant tier: still refused.
    assert refused(STATUTE, "000\ndamages therein") == "the quote starts or ends inside a word or number of the source"
    assert refused(FISHER, "constitutional an\nadmissions program") is not None
    assert refused(STATUTE, "such officer\u2019s judicial capacity such officer shall not be held liab") is not None


def test_a_quote_from_token_boundary_to_token_boundary_verifies() -> None:
    source = text(STATUTE)
    for quote in ["5,000 damages therein", "$5,000 damages", "1983, 1985, and 1986 of this title", "92\u2013318"]:
        match = found(STATUTE, quote)
        assert_exact(match)
        assert source[match.start : match.end] == quote
        assert is_token_boundary(source, match.start)
        assert is_token_boundary(source, match.end)
    match = found(HOGARTH, "No. 5:24-CV-481-FL")
    assert passage(HOGARTH, match) == "No. 5:24-CV-481-FL"


def test_the_exact_tier_skips_an_occurrence_inside_a_word_for_a_later_one() -> None:
    source = "the nonexempt employer and the exempt employer"
    match = verify_quote("exempt employer", source)
    assert match is not None
    assert match.method == EXACT_MATCH
    assert (match.start, match.end) == (source.rindex("exempt employer"), len(source))


def test_a_possessive_is_a_token_of_its_own_but_a_contraction_is_not() -> None:
    # `the University's 2008 entering class`: quoting the noun without its possessive is a whole token.
    match = found(FISHER, "was rejected for admission to the\n  University")
    assert match.method == EXACT_MATCH
    assert text(FISHER)[match.end : match.end + 2] == "\u2019s"
    # `didn't`: a quote ending before `n't` would drop the negation.
    for source in ["the court didn\u2019t hold that", "the court didn't hold that"]:
        assert verify_quote_detailed("the court did", source) == (
            None,
            "the quote starts or ends inside a word or number of the source",
        )


@pytest.mark.parametrize(
    ("source", "quote"),
    [
        ("He paid 1,500 dollars.", "500 dollars"),
        ("under section 12-3-45 of the code", "section 12-3-4"),
        ("under section 12-3-45 of the code", "section 12-3"),
        ("the rate was 4.5 percent", "5 percent"),
        ("see 42-1983.1 here", "42-1983"),
        ("filed on 1/2/2024 late", "2/2024 late"),
        ("filed on 1/2/2024 late", "filed on 1/2"),
        ("the law is unconstitutional", "constitutional"),
    ],
)
def test_numbers_with_inner_separators_are_single_tokens(source: str, quote: str) -> None:
    match, reason = verify_quote_detailed(quote, source)
    assert match is None
    assert reason == "the quote starts or ends inside a word or number of the source"


# --- 2. Alterations never change polarity, numbers or modality ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "quote", "reason"),
    [
        # The source: `injunctive relief shall not be granted unless a declaratory decree was violated`.
        (STATUTE, "injunctive relief [shall] be granted unless", "an alteration changes a negation"),
        (STATUTE, "injunctive relief [may] not be granted unless", "an alteration changes a modal verb"),
        (STATUTE, "injunctive relief [must not] be granted unless", "an alteration changes a modal verb"),
        # `may recover not exceeding $5,000 damages therein`.
        (STATUTE, "may recover not exceeding [$10,000] damages therein", "an alteration changes a number"),
        (STATUTE, "may recover not exceeding [five thousand dollars in] damages", "an alteration changes a number"),
        (STATUTE, "which is not commenced within [two years] after the cause", "an alteration changes a number"),
        (STATUTE, "[could] recover not exceeding $5,000 damages", "an alteration changes a modal verb"),
        # Brackets at the quote's start or end stand for the adjacent words: `shall be liable to the party injured`.
        (STATUTE, "[is] liable to the party injured in an action at law", "an alteration changes a modal verb"),
        (STATUTE, "injunctive relief shall [be granted]", "an alteration changes a negation"),
        (FISHER, "the Fifth Circuit [held] the University to the demanding burden", "an alteration changes a negation"),
        (FISHER, "The Court concludes that the Court of Appeals [held]", "an alteration changes a negation"),
        # `the Court of Appeals did not hold`: an ordinal is a number word.
        (FISHER, "The Court concludes that [the Fifth Circuit] did not hold", "an alteration changes a number"),
        # A negating prefix is a negation: `the statute is unconstitutional`.
        (DEMOCRACY, "to establish that the statute is [constitutional]", "an alteration changes a negation"),
        # `[sic]` stands for nothing: `neglects or refuses so to do`.
        (STATUTE, "neglects [sic] refuses so to do", "not found in the source"),
        # `[ ]` only for letters inside a word.
        (STATUTE, "injunctive relief shall [ ] be granted", "[ ] stands only for letters omitted inside a word"),
        (STATUTE, "[ ] be granted unless a declaratory decree", "[ ] stands only for letters omitted inside a word"),
    ],
)
def test_an_alteration_that_changes_the_meaning_never_verifies(name: str, quote: str, reason: str) -> None:
    assert refused(name, quote) == reason


def test_issue_examples_of_alterations_that_changed_the_meaning() -> None:
    cases = [
        ("the Court [held]", "the Court did not hold that", "an alteration changes a negation"),
        ("[is] liable", "the defendant is not liable.", "an alteration changes a negation"),
        ("may [ ] issue", "the writ may not issue", "[ ] stands only for letters omitted inside a word"),
        ("[thirty] days", "within sixty days", "an alteration changes a number"),
    ]
    for quote, source, reason in cases:
        assert verify_quote_detailed(quote, source) == (None, reason)


def test_a_bracket_that_keeps_the_meaning_verifies_with_its_source_span() -> None:
    # `[T]he` for `the`, mid-sentence.
    match = found(STATUTE, "[T]he rights protected by this section are protected against impairment")
    assert passage(STATUTE, match).startswith("The rights protected")
    assert altered(STATUTE, match) == [("letter", "[T]", "T", "")]
    assert match.confidence == 0.90
    # The same negation and modal inside the bracket: `shall not` for `shall not`.
    match = found(STATUTE, "injunctive relief [shall not] be granted unless a declaratory decree was violated")
    assert altered(STATUTE, match) == [("bracket", "[shall not]", "shall not", "same")]
    # `[sic]` stands for nothing; its place is reported.
    match = found(STATUTE, "neglects [sic] or refuses so to do")
    assert passage(STATUTE, match) == "neglects or refuses so to do"
    ((kind, quote_text, spanned, _),) = altered(STATUTE, match)
    assert (kind, quote_text, spanned) == ("sic", "[sic]", "")
    assert match.alterations[0].source_start == text(STATUTE).index("neglects or refuses") + len("neglects")
    # `[ ]` for letters inside a word: `conspire[ ]` for `conspired`.
    match = found(STATUTE, "any of the wrongs conspire[ ] to be done")
    assert passage(STATUTE, match) == "any of the wrongs conspired to be done"
    assert altered(STATUTE, match) == [("bracket", "[ ]", "d", "letters")]
    # The source itself quotes with `[ ]` (brackets taken literally): exact.
    match = found(DEMOCRACY, "nudge[ ] the[ ] claims across the line from conceivable to plausible")
    assert match.method == EXACT_MATCH


@pytest.mark.parametrize(
    ("name", "quote", "source_passage", "alteration"),
    [
        # A bracketed letter attached to a word: another form of the word.
        (
            DEMOCRACY,
            "SB 683 impose[d] restrictions on who can assist voters",
            "SB 683 imposes restrictions on who can assist voters",
            ("bracket", "[d]", "s", "form"),
        ),
        (
            DEMOCRACY,
            "SB 683 impos[ing] restrictions on who can assist voters",
            "SB 683 imposes restrictions on who can assist voters",
            ("bracket", "[ing]", "es", "form"),
        ),
        (
            STATUTE,
            "The rights protect[ing] by this section",
            "The rights protected by this section",
            ("bracket", "[ing]", "ed", "form"),
        ),
        # At the quote's end: the altered word is part of the passage.
        (
            DEMOCRACY,
            "H.B. 1169 also provide[d]",
            "H.B. 1169 also provides",
            ("bracket", "[d]", "s", "form"),
        ),
    ],
)
def test_a_bracketed_letter_attached_to_a_word_verifies(
    name: str, quote: str, source_passage: str, alteration: tuple[str, str, str, str]
) -> None:
    match = found(name, quote)
    assert match.method == TOLERANT_MATCH
    assert passage(name, match) == source_passage
    assert altered(name, match) == [alteration]
    assert match.confidence == 0.90


# --- 3. Omissions never drop what carries the meaning ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "quote", "reason"),
    [
        (STATUTE, "injunctive relief shall . . . be granted unless", "an omission drops a negation"),
        (STATUTE, "may recover . . . damages therein", "an omission drops a negation"),
        (STATUTE, "may recover not exceeding . . . damages therein", "an omission drops a number"),
        (STATUTE, "which is . . . commenced within one year", "an omission drops a negation"),
        (STATUTE, "commenced within . . . year after the cause of action has accrued", "an omission drops a number"),
        (STATUTE, "the court, in its discretion, . . . allow the prevailing party", "an omission drops a modal verb"),
        (
            STATUTE,
            "any Act of Congress applicable . . . to the District of Columbia",
            "an omission drops a limiting word",
        ),
        (STATUTE, "Every person who, under color of . . . statute", "an omission drops a limiting word"),
        # `Every person who, under color of any statute, ..., subjects`: the clause that makes the statute.
        (STATUTE, "Every person who . . . subjects, or causes to be subjected", "an omission drops a limiting word"),
        (FISHER, "the Fifth Circuit . . . hold the University", "an omission drops a negation"),
        (FISHER, "the entering class was 4.5% . . . Hispanic", "an omission drops a number"),
    ],
)
def test_an_omission_of_what_carries_the_meaning_never_verifies(name: str, quote: str, reason: str) -> None:
    assert refused(name, quote) == reason


def test_issue_examples_of_omissions_that_changed_the_meaning() -> None:
    assert verify_quote_detailed("the statute . . . applies", "the statute never applies") == (
        None,
        "an omission drops a negation",
    )
    assert verify_quote_detailed("is . . . entitled to relief", "plaintiff is not entitled to relief") == (
        None,
        "an omission drops a negation",
    )


def test_omitting_words_inside_a_clause_that_carry_no_meaning_verifies() -> None:
    source = text(STATUTE)
    quote = "shall be liable to the party injured . . . except that in any action brought against a judicial officer"
    match = found(STATUTE, quote)
    assert passage(STATUTE, match).startswith("shall be liable to the party injured in an action at law")
    assert altered(STATUTE, match) == [
        ("ellipsis", "...", "in an action at law, suit in equity, or other proper proceeding for redress,", "")
    ]
    assert match.confidence == 0.87
    assert source[match.alterations[0].source_end :].startswith(" except that")


def test_omitting_list_items_with_numbers_verifies() -> None:
    match = found(STATUTE, "sections 1981, . . . and 1986 of this title")
    assert passage(STATUTE, match) == "sections 1981, 1981a, 1982, 1983, 1985, and 1986 of this title"
    assert altered(STATUTE, match) == [("ellipsis", "...", "1981a, 1982, 1983, 1985,", "")]


def test_a_phrase_between_commas_is_not_a_list_item() -> None:
    source = "The fee is $500, payable within 30 days, after filing."
    assert verify_quote_detailed("The fee is $500, . . . after filing.", source) == (
        None,
        "an omission drops a number",
    )
    source = "The fee is $500, payable in full, after filing."
    match = verify_quote("The fee is $500, . . . after filing.", source)
    assert match is not None
    assert [source[a.source_start : a.source_end] for a in match.alterations] == ["payable in full,"]


def test_omitting_a_citation_verifies() -> None:
    quote = "demanding burden of strict scrutiny articulated in Grutter . . . its decision affirming"
    match = found(FISHER, quote)
    ((kind, _, omitted, _),) = altered(FISHER, match)
    assert kind == "ellipsis"
    assert omitted == "and Regents\n of Univ. of Cal. v. Bakke, 438 U. S. 265,"


def test_omitting_whole_sentences_verifies_even_with_a_negation_inside() -> None:
    # The omitted sentence says what the statute does NOT allow; omitting it whole is legitimate (Rule 5.3(b)(iii)).
    source = "The statute applies. It does not apply to cats. The court agreed."
    match = verify_quote("The statute applies. . . . The court agreed.", source)
    assert match is not None
    assert source[match.start : match.end] == source
    assert [source[a.source_start : a.source_end] for a in match.alterations] == [". It does not apply to cats."]
    # Real text: a sentence of the syllabus omitted.
    match = found(
        FISHER,
        "Petitioner, who is Caucasian, was rejected for admission to the University's 2008 entering class. . . . "
        "The District Court granted summary judgment to the University.",
    )
    ((kind, _, omitted, _),) = altered(FISHER, match)
    assert kind == "ellipsis"
    assert omitted.startswith(". She sued the University")
    assert omitted.endswith("Equal Protection Clause.")


# --- 4. Substitutions are shown and cost confidence -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "quote", "replaced", "detail"),
    [
        (HOGARTH, "[Hogarth] seeks declaratory and injunctive relief", "plaintiff", "reference"),
        (STATUTE, "[the] rights protected by this section are protected", "The", "same"),
        (FISHER, "[the] Fourteenth Amendment provides that no State", "The", "same"),
    ],
)
def test_a_bracket_for_a_pronoun_article_or_role_noun_keeps_its_confidence(
    name: str, quote: str, replaced: str, detail: str
) -> None:
    match = found(name, quote)
    assert match.confidence == 0.90
    assert altered(name, match)[0][2:] == (replaced, detail)


def test_a_bracket_that_substitutes_different_words_is_shown_and_capped() -> None:
    # `the Court of Appeals did not hold the University`: a shortening keeps its confidence ...
    match = found(FISHER, "The Court concludes that [the appeals court] did not hold the University")
    assert altered(FISHER, match) == [("bracket", "[the appeals court]", "the Court of Appeals", "shortened")]
    assert match.confidence == 0.90
    # ... other words are a substitution: verified, shown, and capped.
    match = found(FISHER, "The Court concludes that [the lower court] did not hold the University")
    assert altered(FISHER, match) == [("bracket", "[the lower court]", "the Court of Appeals", "substitution")]
    assert match.confidence <= SUBSTITUTION_MAX_CONFIDENCE
    match = found(STATUTE, "injunctive relief shall not be [awarded] unless a declaratory decree was violated")
    assert altered(STATUTE, match) == [("bracket", "[awarded]", "granted", "substitution")]
    assert match.confidence <= SUBSTITUTION_MAX_CONFIDENCE
    # The issue's example: verified only as a substitution, never above 0.6.
    petition = verify_quote("the petition is [granted]", "the petition is denied.")
    assert petition is not None
    assert petition.confidence <= SUBSTITUTION_MAX_CONFIDENCE
    assert [(a.kind, a.detail) for a in petition.alterations] == [("bracket", "substitution")]


def test_a_form_change_keeps_its_confidence() -> None:
    match = found(DEMOCRACY, "SB 683 impos[ing] restrictions on who can assist voters")
    assert match.confidence == 0.90
    match = found(DEMOCRACY, "SB 683 [imposed] restrictions on who can assist voters")
    assert altered(DEMOCRACY, match) == [("bracket", "[imposed]", "imposes", "form")]
    assert match.confidence == 0.90


# --- 5. Every alteration and omission is returned -------------------------------------------------------------------


def test_several_alterations_are_returned_in_order_with_their_spans() -> None:
    source = text(STATUTE)
    quote = (
        "[E]very person who, under color of any statute, ordinance, regulation, custom, or usage, of any State or "
        "Territory or the District of Columbia, subjects, or causes to be subjected, any citizen of the United States "
        ". . . to the deprivation of any rights, . . . shall be liable to the [injured party]"
    )
    match = found(STATUTE, quote)
    assert passage(STATUTE, match).startswith("Every person who, under color")
    # The words an edge bracket stands for are part of the passage.
    assert passage(STATUTE, match).endswith("shall be liable to the party injured")
    assert altered(STATUTE, match) == [
        ("letter", "[E]", "E", ""),
        ("ellipsis", "...", "or other person within the jurisdiction thereof", ""),
        ("ellipsis", "...", "privileges, or immunities secured by the Constitution and laws,", ""),
        ("bracket", "[injured party]", "party injured", "shortened"),
    ]
    assert [a.source_start for a in match.alterations] == sorted(a.source_start for a in match.alterations)
    assert source[match.alterations[1].source_start - len("United States ") : match.alterations[1].source_start] == (
        "United States "
    )
    assert match.confidence == round(0.98 - 0.08 - 0.11, 2)


def test_alterations_are_frozen_and_exact_matches_have_none() -> None:
    match = found(STATUTE, "shall be liable to the party injured")
    assert match.method == EXACT_MATCH
    assert match.alterations == ()
    alteration = Alteration("bracket", "[x]", 1, 2, "same")
    with pytest.raises(AttributeError):
        alteration.kind = "sic"  # type: ignore[misc]


def test_a_case_only_difference_is_returned() -> None:
    match = found(STATUTE, "SHALL BE LIABLE TO THE PARTY INJURED")
    assert [(a.kind, text(STATUTE)[a.source_start : a.source_end]) for a in match.alterations] == [
        ("case", "shall be liable to the party injured")
    ]


# --- 6. Formatting that must verify ---------------------------------------------------------------------------------


def test_quotation_marks_interchanged_verify_at_a_small_cost() -> None:
    # Rule 5.1: a quotation inside a quotation takes single marks.
    match = found(FISHER, "upholding the use of race as one of many 'plus factors'")
    assert passage(FISHER, match).endswith("\u201cplus factors\u201d")
    assert match.confidence == 0.96
    assert altered(FISHER, match) == [("quote_mark", "'", "\u201c", ""), ("quote_mark", "'", "\u201d", "")]
    match = found(STATUTE, "the term 'make and enforce contracts' includes the making")
    assert passage(STATUTE, match) == 'the term "make and enforce contracts" includes the making'
    # ... and back.
    match = found(DEMOCRACY, 'cannot be resolved by any "litmus-paper test" that will separate')
    assert passage(DEMOCRACY, match) == "cannot be resolved by any \u2018litmus-paper test\u2019 that will separate"


def test_a_quotation_mark_never_stands_for_an_apostrophe() -> None:
    assert refused(FISHER, 'the University"s 2008 entering class') == "not found in the source"
    assert refused(STATUTE, 'such officer"s judicial capacity') == "not found in the source"


@pytest.mark.parametrize(
    ("name", "quote", "source_passage"),
    [
        (
            STATUTE,
            "\u00a7 1983. Civil action for deprivation of rights",
            "\u00a71983. Civil action for deprivation of rights",
        ),
        (HOGARTH, "under 42 U.S.C. \u00a71988", "under 42 U.S.C. \u00a7 1988"),
        (DEMOCRACY, "N.C. Gen. Stat. \u00a7163-230.2, violates", "N.C. Gen. Stat. \u00a7 163-230.2, violates"),
        (DEMOCRACY, "( Id. \u00b623.)", "( Id. \u00b6 23.)"),
    ],
)
def test_spaces_around_section_and_paragraph_signs(name: str, quote: str, source_passage: str) -> None:
    match = found(name, quote)
    assert passage(name, match) == source_passage
    assert match.confidence == 0.98


def test_a_section_sign_does_not_join_or_split_numbers() -> None:
    assert refused(STATUTE, "\u00a7 198") == "the quote starts or ends inside a word or number of the source"
    assert refused(HOGARTH, "42 U.S.C. \u00a7 19 88") == "not found in the source"


def test_a_caption_date_is_text_not_a_running_head() -> None:
    # `[June 24, 2013]` repeats four times in the slip opinion, each time on a short line between the caption and the
    # opinion: it is text, so a quote cannot skip it ...
    assert refused(FISHER, "APPEALS FOR THE FIFTH CIRCUIT JUSTICE KENNEDY delivered the opinion of the Court") in (
        "not found in the source",
    )
    # ... and a quote that includes it verifies.
    match = found(FISHER, "APPEALS FOR THE FIFTH CIRCUIT [June 24, 2013] JUSTICE KENNEDY delivered the opinion")
    assert "[June 24, 2013]" in passage(FISHER, match)
    assert match.alterations == ()


def test_running_heads_without_digits_are_still_skipped() -> None:
    match = found(FISHER, "circumstances that give insight into a student's background. These included")
    assert "Opinion of the Court" in passage(FISHER, match)
    assert match.confidence == 0.95


# --- Failure reasons ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quote", "reason"),
    [
        ("", "the quote is empty"),
        ("  \n ", "the quote is empty"),
        (". . .", "the quote has no words to verify"),
        ("the party injured shall recover treble damages", "not found in the source"),
        ("[the statute] . . . [applies]", "not found in the source"),
        ("shall be liable [to the party] . . . in an action at law", "a bracket next to an ellipsis cannot be checked"),
    ],
)
def test_failure_reasons(quote: str, reason: str) -> None:
    assert verify_quote_detailed(quote, normalized(STATUTE)) == (None, reason)


# --- Edge brackets and attached markers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quote", "source", "source_passage", "alterations"),
    [
        # A bracket that repeats the words it stands for ends the quote like an exact quote would.
        (
            "[The statute] provides",
            "Congress may well have decided that the statute provides a remedy",
            "the statute provides",
            [("bracket", "[The statute]", "the statute", "same")],
        ),
        # A prefix attached to the first word; `[ ]` at the quote's end; a possessive after a bracket.
        (
            "[un]constitutional as applied",
            "it is unconstitutional as applied",
            "unconstitutional as applied",
            [("bracket", "[un]", "un", "same")],
        ),
        ("the claims nudge[ ]", "the claims nudges across", "the claims nudges", [("bracket", "[ ]", "s", "letters")]),
        (
            "[the Court]'s view",
            "in this Court's view",
            "Court's view",
            [("bracket", "[the Court]", "Court", "reference")],
        ),
        # Adjacent brackets are one alteration.
        ("[the] [Court] held", "the Court held", "the Court held", [("bracket", "[the] [Court]", "the Court", "same")]),
    ],
)
def test_edge_brackets_and_attached_markers(
    quote: str, source: str, source_passage: str, alterations: list[tuple[str, str, str, str]]
) -> None:
    match = verify_quote(quote, source)
    assert match is not None
    assert source[match.start : match.end] == source_passage
    assert [(a.kind, a.quote_text, source[a.source_start : a.source_end], a.detail) for a in match.alterations] == (
        alterations
    )


@pytest.mark.parametrize(
    ("quote", "source", "reason"),
    [
        ("[The Court] held", "We have never held that", "an alteration changes a negation"),
        (
            "the rule applies [to employers]",
            "the rule applies to all employers unless exempt",
            "an alteration changes a negation",
        ),
        ("[un]constitutional as applied", "it is constitutional as applied", "an alteration changes a negation"),
        ("the party. [ ] of them", "the party. None of them", "[ ] stands only for letters omitted inside a word"),
        ("can be . . . vacancy", "there can be no 'vacancy in nomination'", "an omission drops a negation"),
        ("relief [can] be granted", "relief can't be granted", "an alteration changes a negation"),
        ("relief [cannot] be granted", "relief won't be granted", "an alteration changes a modal verb"),
    ],
)
def test_edge_brackets_never_hide_a_negation(quote: str, source: str, reason: str) -> None:
    assert verify_quote_detailed(quote, source) == (None, reason)


def test_a_collage_of_markers_fails_closed() -> None:
    source = "a " * 50_000
    assert verify_quote_detailed("a ... a ... a ... a ... b", source) == (
        None,
        "too many alterations and omissions to check",
    )
    pieces = " [x] ".join(["word"] * 120)
    assert verify_quote_detailed(pieces, "word " * 200) == (None, "too many alterations and omissions to check")


def test_an_ellipsis_next_to_an_edge_bracket_only_says_the_sentence_goes_on() -> None:
    match = found(HOGARTH, ". . . [Hogarth] seeks declaratory and injunctive relief")
    assert altered(HOGARTH, match) == [("bracket", "[Hogarth]", "plaintiff", "reference")]
    match = found(STATUTE, "shall be liable to the [injured party] . . .")
    assert altered(STATUTE, match) == [("bracket", "[injured party]", "party injured", "shortened")]
    # Inside the quote, a bracket next to an ellipsis cannot be checked: what stands for what?
    assert refused(STATUTE, "shall be liable [to the party] . . . in an action at law") == (
        "a bracket next to an ellipsis cannot be checked"
    )
