"""Quotes whose meaning differs from the source, which the verifier must not pass as exact or tolerant, and
formatting-only differences it must forgive. Snippets of real opinions are copied here (In re S.J.S., Democracy
N.C. v. N.C. Board of Elections); the others are written for the rule they test. Pure Python, no database.
"""

from __future__ import annotations

from pathlib import Path

from lqai_verify.verification import (
    ALTERED,
    ALTERED_MAX_CONFIDENCE,
    EXACT_MATCH,
    LIMITED_AFTER,
    LIMITED_BEFORE,
    NEGATED_BEFORE,
    TOLERANT_MATCH,
    NormalizedSource,
    QuoteMatch,
    verify_quote,
    verify_quote_detailed,
)
from lqai_verify.verification.results import REASON_BOUNDARY

OPINIONS = Path(__file__).resolve().parent.parent / "chats" / "data" / "opinions"

# In re S.J.S., 134 S.W.3d 673, 677 (Mo. Ct. App. 2004).
SJS = (
    "In stepparent adoptions, neglect frequently is shown by a failure to provide support, without just cause or "
    "excuse, whether ordered by judicial decree or not. Id. A non-custodial parent\u2019s failure to contribute to "
    "the financial support of his or her child, combined with other evidence of lack of contact, is sufficient to "
    "sustain a finding of willful neglect in failing to provide proper care and control."
)
# Democracy N.C. v. N.C. Board of Elections (M.D.N.C. 2022).
DEMOCRACY = (
    "The court distinguished those activities from \u201ccases involving the mere administrative process or the "
    "mechanics of the electoral process,\u201d and found \u201clittle difference between discussions of whether to "
    "register to vote and discussions of whether to vote absentee.\u201d Id."
)


def altered(match: QuoteMatch | None) -> QuoteMatch:
    assert match is not None
    assert match.method == ALTERED, match
    assert match.confidence <= ALTERED_MAX_CONFIDENCE
    return match


def tolerant(match: QuoteMatch | None) -> QuoteMatch:
    assert match is not None
    assert match.method == TOLERANT_MATCH, match
    return match


# --- A negating prefix joined by a hyphen ---------------------------------------------------------------------


def test_a_quote_that_starts_after_a_hyphenated_non_does_not_verify() -> None:
    # "A non-custodial parent's failure": the quote would say the opposite parent. It starts inside a word.
    quote = "custodial parent\u2019s failure to contribute to the financial support of his or her child"
    assert verify_quote_detailed(quote, SJS) == (None, REASON_BOUNDARY)
    assert verify_quote("final order is appealable", "A non-final order is appealable.") is None
    assert verify_quote("lawful search", "an un-\nlawful search") is None
    assert verify_quote("state tuition", "in-state tuition") is None


def test_an_ellipsis_may_not_omit_a_hyphenated_negating_prefix() -> None:
    assert verify_quote("A . . . custodial parent\u2019s failure to contribute", SJS) is None


# --- Superscript digits and fractions -------------------------------------------------------------------------


def test_a_superscript_footnote_call_never_joins_the_number_before_it() -> None:
    source = "The claim must be filed within 30\u00b3 days after notice under section 1983\u00b2 of the Act."
    # The source says 30 days (footnote 3) and section 1983 (footnote 2), not 303 days or section 19832.
    assert verify_quote("filed within 303 days", source) is None
    assert verify_quote("under section 19832 of the Act", source) is None
    # The footnote call is layout: the quote without it verifies, as does one that copies it.
    tolerant(verify_quote("filed within 30 days after notice", source))
    tolerant(verify_quote("under section 1983 of the Act", source))
    tolerant(verify_quote("within 30 days after", "filed within 30 days\u00b9\u2070 after notice"))


def test_a_vulgar_fraction_is_one_number_with_its_whole_number() -> None:
    source = "Each heir takes a 1\u00bd share, and the widow a \u00bd share."
    tolerant(verify_quote("takes a 1-1/2 share", source))
    tolerant(verify_quote("the widow a 1/2 share", source))
    # Eleven halves is not one and a half; half is not one and a half; one is not one and a half.
    assert verify_quote("takes a 11/2 share", source) is None
    assert verify_quote("takes a 11\u20442 share", source) is None
    assert verify_quote("1/2 share, and", source) is None
    assert verify_quote("takes a 1", source) is None


# --- Words that negate without "not" --------------------------------------------------------------------------


def test_an_ellipsis_may_not_omit_little_hardly_or_rarely() -> None:
    # "found little difference" is not "found ... difference".
    assert (
        verify_quote("found \u201c. . . difference between discussions of whether to register to vote", DEMOCRACY)
        is None
    )
    for word in ("hardly", "rarely", "seldom", "scarcely", "barely"):
        assert (
            verify_quote("the statute . . . applies to employers", f"the statute {word} applies to employers") is None
        )
    assert verify_quote("applies to . . . employers", "applies to few employers") is None


# --- Clauses joined across a semicolon ------------------------------------------------------------------------


def test_an_omission_across_a_semicolon_joins_two_clauses() -> None:
    # One clause's subject meets the other's predicate: the plaintiff did not prevail.
    match = altered(verify_quote("the plaintiff . . . prevailed", "the plaintiff lost; the defendant prevailed."))
    assert [a.alters for a in match.alterations] == ["an omission joins parts of different sentences or clauses"]


# --- Case folding ---------------------------------------------------------------------------------------------


def test_a_case_change_that_turns_a_word_in_capitals_into_another_word_is_altered() -> None:
    # "US" (the United States) is not "us".
    match = altered(verify_quote("the us attorney may appear", "The US Attorney may appear."))
    assert [a.kind for a in match.alterations if a.alters] == ["case"]
    altered(verify_quote("Let US consider", "Let us consider the claim."))


def test_a_heading_in_capitals_quoted_in_lower_case_is_formatting() -> None:
    tolerant(verify_quote("the court held that", "THE COURT HELD THAT the claim fails."))
    tolerant(verify_quote("THE COURT HELD THAT", "The court held that the claim fails."))


# --- A number and its magnitude word --------------------------------------------------------------------------


def test_a_quote_never_ends_between_a_number_and_its_magnitude_word() -> None:
    source = "The jury awarded damages of $1 million to the plaintiff, and costs of $2\nthousand."
    # "$1" is not "$1 million": the number goes on.
    assert verify_quote("awarded damages of $1", source) is None
    assert verify_quote("costs of $2", source) is None
    assert verify_quote("million to the plaintiff", source) is None
    assert verify_quote("awarded damages of $1 million", source) is not None


# --- A condition or an exception omitted inside a clause ------------------------------------------------------


def test_an_omission_of_a_condition_or_an_exception_inside_a_clause_is_altered() -> None:
    for quote, source in (
        ("The court may . . . enter judgment", "The court may, if the parties consent, enter judgment."),
        ("All claims . . . are barred", "All claims other than fraud claims are barred."),
        (
            "The agency may . . . revoke the license",
            "The agency may, subject to review by the board, revoke the license.",
        ),
        ("The employer is liable . . . for the injury", "The employer is liable in part for the injury."),
        ("The employer is . . . liable", "The employer is, absent a contract, liable."),
    ):
        match = altered(verify_quote(quote, source))
        [gap] = match.alterations
        assert gap.alters == "an omission drops a condition or an exception", quote
    # Words that limit nothing are still omitted as formatting.
    tolerant(
        verify_quote(
            "The agency may . . . revoke the license", "The agency may, after notice and a hearing, revoke the license."
        )
    )


# --- Page breaks and other layout between a passage and what limits it -----------------------------------------


def test_a_running_head_between_a_limiting_word_and_the_passage_does_not_hide_it() -> None:
    # Fisher, slip op., Syllabus 2-3: "the Fifth Circuit held petitioner could challenge only whether the
    # University's decision" [page break: "Cite as: 570 U. S. ____ (2013)  3", "Syllabus"] "to use race as an
    # admissions factor “was made in good faith.”" The passage is limited by "only" wherever the page breaks.
    fisher = (OPINIONS / "fisher-v-university-of-texas-2013-slip.txt").read_text(encoding="utf-8")
    source = NormalizedSource.build(fisher)
    match = altered(source.verify("to use race as an admissions factor"))
    assert [(f.flag, fisher[f.source_start : f.source_end]) for f in match.flags] == [(LIMITED_BEFORE, "only")]
    assert altered(source.verify("decision to use race as an admissions factor")).flags == match.flags


def test_page_numbers_star_paging_and_footnote_calls_do_not_hide_a_limiting_continuation() -> None:
    for layout in ("\n\n12\n\n", " *1047 ", " [*1047] ", " (FN3) ", "\u00b3 ", "\n\n- 12 -\n\n"):
        source = f"The motion is granted{layout}in part and denied in part."
        match = altered(verify_quote("The motion is granted", source))
        assert [(f.flag, source[f.source_start : f.source_end]) for f in match.flags] == [(LIMITED_AFTER, "in part")]
        source = f"No person shall{layout}be deprived of life, liberty, or property."
        match = altered(verify_quote("be deprived of life, liberty, or property", source))
        assert [(f.flag, source[f.source_start : f.source_end]) for f in match.flags] == [(NEGATED_BEFORE, "No")]
    # A sentence that ends before the page break is not limited by the next one.
    closed = verify_quote("The motion is granted.", "The motion is granted.\n\n12\n\nBut costs are denied.")
    assert closed is not None
    assert closed.method == EXACT_MATCH


# --- Invisible formatting characters --------------------------------------------------------------------------


def test_invisible_format_characters_are_formatting() -> None:
    # Direction marks, embeddings and isolates, invisible operators: text copied from web pages and PDFs has them.
    for ch in ("\u200e", "\u200f", "\u202a", "\u202c", "\u2066", "\u2069", "\u2063", "\u061c"):
        tolerant(verify_quote("the court held that", f"the court{ch} held that the claim fails."))
        tolerant(verify_quote(f"the court{ch} held that", "the court held that the claim fails."))
    # Dropping them never makes another word: a right-to-left override shows "ton" as "not", and it is still "ton".
    assert verify_quote("the employer is \u202eton\u202c liable", "the employer is not liable") is None


# --- Hyphenated compounds --------------------------------------------------------------------------------------


def test_a_quote_never_starts_or_ends_inside_a_hyphenated_word() -> None:
    # Fisher, slip op., at 10: "strict scrutiny does require a court to examine with care, and not defer to, a
    # university's \u201cserious, good faith consideration of workable race-neutral alternatives.\u201d"
    fisher = (OPINIONS / "fisher-v-university-of-texas-2013-slip.txt").read_text(encoding="utf-8")
    source = NormalizedSource.build(fisher)
    assert source.verify("good faith consideration of workable race") is None
    assert source.verify("neutral alternatives would produce the edu") is None
    assert source.verify("good faith consideration of workable race-neutral alternatives") is not None
    for quote in (
        "defendant is liable",
        "The court considered race",
        "neutral alternatives",
        "The court . . . neutral",
    ):
        for hyphen in ("-", "\u2010", "-\n"):
            assert (
                verify_quote(
                    quote, f"The co{hyphen}defendant is liable. The court considered race{hyphen}neutral alternatives."
                )
                is None
            ), (quote, hyphen)
    # An omission may not end or start inside one either.
    assert (
        verify_quote("The court considered race . . . alternatives", "The court considered race-neutral alternatives.")
        is None
    )


# --- A sentence that opens with a condition or an exception ------------------------------------------------------


def test_a_passage_governed_by_the_condition_its_sentence_opens_with_is_altered() -> None:
    for source, opening in (
        ("Except as provided in subsection (b), the tenant shall pay rent.", "Except"),
        ("Unless the lease provides otherwise, the tenant shall pay rent.", "Unless"),
        ("The rule is settled. If the lease so provides, the tenant shall pay rent.", "If"),
        ("Notwithstanding section 5, the tenant shall pay rent.", "Notwithstanding"),
        ("\u201cSubject to section 5, the tenant shall pay rent.\u201d", "Subject to"),
    ):
        match = altered(verify_quote("the tenant shall pay rent", source))
        assert [(f.flag, source[f.source_start : f.source_end]) for f in match.flags] == [(LIMITED_BEFORE, opening)]
    # An opening that sets the scene is no condition; nor is a condition of the sentence before.
    for source in (
        "When the case reached this Court, the tenant shall pay rent was the rule.",
        "Unless it settles, it goes to trial. The tenant shall pay rent.",
    ):
        found = verify_quote("the tenant shall pay rent", source)
        assert found is not None
        assert not found.flags, source


# --- A minus sign --------------------------------------------------------------------------------------------------


def test_a_quote_never_drops_the_minus_sign_of_a_number() -> None:
    for minus in ("-", "\u2212"):
        source = f"The account showed a balance of {minus}500 dollars, and the rule applies from 1983-1985."
        assert verify_quote("500 dollars", source) is None
        assert verify_quote(f"a balance of {minus}500 dollars", source) is not None
    # A dash before a number, with a space after it, is no minus sign.
    assert verify_quote("10 days", "The deadlines are:\n- 10 days for notice.") is not None


# --- One pronoun for another ---------------------------------------------------------------------------------------


def test_a_bracket_that_puts_another_pronoun_for_the_sources_is_altered() -> None:
    # "She" is not "he": the quote speaks of someone else.
    match = altered(verify_quote("[He] was present at the hearing", "She was present at the hearing."))
    assert [a.alters for a in match.alterations] == ["a bracket puts another pronoun for the source's"]
    altered(verify_quote("The court denied [his] motion", "The court denied their motion."))
    # A pronoun for the words it stands for names no one: formatting.
    tolerant(verify_quote("[It] applies to employers", "The statute applies to employers."))


# --- A negation right after the passage ----------------------------------------------------------------------------


def test_a_passage_the_source_goes_on_to_negate_with_no_or_nothing_is_altered() -> None:
    for source, word in (
        ("Under the agreement the employer must pay nothing to the employee.", "nothing"),
        ("Under the agreement the employer must pay no damages.", "no"),
        ("Under the agreement the employer must pay none of the costs.", "none"),
    ):
        match = altered(verify_quote("Under the agreement the employer must pay", source))
        assert [(f.flag, source[f.source_start : f.source_end]) for f in match.flags] == [(LIMITED_AFTER, word)]


# --- Letters omitted inside a word -------------------------------------------------------------------------------


def test_an_empty_bracket_stands_only_for_an_inflection() -> None:
    # `can[ ]` for "cannot", `harm[ ]` for "harmless": the letters omitted turn the word around.
    assert verify_quote("The court can[ ] act", "The court cannot act.") is None
    assert verify_quote("the error was harm[ ]", "the error was harmless.") is None
    assert verify_quote("the order was appeal[ ]", "the order was appealable.") is None
    # `judgment[ ]` for "judgments" (Bluebook 5.2(c)).
    tolerant(verify_quote("the judgment[ ] of the courts below", "the judgments of the courts below"))
    tolerant(verify_quote("the court award[ ] fees", "the court awarded fees"))

    # `No.` before a docket number is no negation.
    source = "Argued September 3, 1997      Decided November 7, 1997\n\n\n No. 96-7169"
    match = verify_quote("Argued September 3, 1997      Decided November 7, 1997", source)
    assert match is not None
    assert match.method == EXACT_MATCH
