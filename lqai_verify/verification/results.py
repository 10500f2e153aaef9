"""What verification returns: the match, its alterations and omissions, and the reasons a quote fails."""

from __future__ import annotations

from dataclasses import dataclass

EXACT_MATCH = "exact_match"
TOLERANT_MATCH = "tolerant_match"
ALTERED = "altered"  # found, but an alteration, an omission or an edge may change what the source says

# Kinds of Alteration.
BRACKET = "bracket"  # `[the Court]`, `impos[ing]`, `[ ]`: bracketed words or letters standing for source text
LETTER = "letter"  # `[t]he`: a bracketed letter of the source, case changed
SIC = "sic"  # `[sic]`: stands for nothing
ELLIPSIS = "ellipsis"  # `...`, `. . .`, `…`, `[...]`: an omission
QUOTE_MARK = "quote_mark"  # a double quotation mark for a single one or back
CASE = "case"  # the passage matched only case-insensitively
PARENTHETICAL = "parenthetical"  # a trailing `(emphasis added)`, `(citations omitted)`: stands for nothing
EMPHASIS = "emphasis"  # `**must**`, `*must*`, `_must_`: emphasis markup the quote added

# Context flags: what the source says right next to a passage that may limit what it asserts.
LIMITED_AFTER = "limited_after"  # the source goes on with a limiting continuation (`unless`, `in part`, `but` ...)
NEGATED_BEFORE = "negated_before"  # the quote starts after a negation of its own clause (`No person shall`)
LIMITED_BEFORE = "limited_before"  # the quote starts after a limiting word of its own clause (`only`, `except`)
CONTEXT_FLAGS = (LIMITED_AFTER, NEGATED_BEFORE, LIMITED_BEFORE)

# Details of a BRACKET alteration: what the bracket stands for, compared word for word.
SAME = "same"  # the same words (`[The]` for "the")
FORM = "form"  # another form of the same word (`impos[ing]` for "imposes", `provide[d]` for "provides")
REFERENCE = "reference"  # replaces a pronoun, an article or a role noun (`[the Court]` for "we")
SHORTENED = "shortened"  # some of the words it stands for (`[the Court]` for "the Court of Appeals")
INSERTION = "insertion"  # stands for no source words, and adds only a pronoun, an article or a role noun
LETTERS = "letters"  # `[ ]`: letters omitted inside a word
SUBSTITUTION = "substitution"  # different (or added) words: shown, and the match's confidence is capped

# Why a quote did not verify, most specific first (see verify_quote_detailed).
REASON_EMPTY = "the quote is empty"
REASON_NO_WORDS = "the quote has no words to verify"
REASON_NOT_FOUND = "not found in the source"
REASON_BOUNDARY = "the quote starts or ends inside a word or number of the source"
REASON_TOO_COMPLEX = "too many alterations and omissions to check"
REASON_ADJACENT_MARKERS = "a bracket next to an ellipsis cannot be checked"


@dataclass(frozen=True, slots=True)
class Alteration:
    """One alteration or omission in a quote, and the source text it stands for.

    ``source[source_start:source_end]`` (offsets into the original source) is the text the alteration replaces or
    omits; an insertion (and ``[sic]``) has ``source_start == source_end`` at the place it applies to.
    """

    kind: str  # BRACKET | LETTER | SIC | ELLIPSIS | QUOTE_MARK | CASE
    quote_text: str  # as the quote wrote it, e.g. "[the Court]", ". . .", "[t]"
    source_start: int
    source_end: int
    detail: str = ""  # for BRACKET: SAME | FORM | REFERENCE | SHORTENED | INSERTION | LETTERS | SUBSTITUTION
    # Why this alteration may change what the source says (it makes the match ALTERED); empty when it cannot.
    alters: str = ""
    # What the reader is shown of how the verifier read it (rules version 4: a bracket's resolved referent, "[The
    # Board] stands for 'It'; the sentence before names the Board"); empty for most alterations.
    note: str = ""


@dataclass(frozen=True, slots=True)
class ContextFlag:
    """Source text right next to a passage that may limit what the passage asserts: ``source[source_start:
    source_end]`` (offsets into the original source) is that text, e.g. the `in part and denied in part` after
    `The motion is granted`."""

    flag: str  # LIMITED_AFTER | NEGATED_BEFORE | LIMITED_BEFORE
    source_start: int
    source_end: int


@dataclass(frozen=True, slots=True)
class QuoteMatch:
    """Where and how a quote was found.

    ``source[start:end]`` (offsets into the original source) spans the passage from its first matched character to
    its last, including anything skipped inside it (running heads, omitted text). ``alterations`` lists every
    alteration and omission the quote made, in quote order; an exact match has none.
    """

    method: str  # EXACT_MATCH | TOLERANT_MATCH | ALTERED
    # 1.0 for exact; 0 < c < 1 for tolerant, lower the more tolerance was needed; <= ALTERED_MAX_CONFIDENCE for
    # altered
    confidence: float
    start: int
    end: int
    alterations: tuple[Alteration, ...] = ()
    flags: tuple[ContextFlag, ...] = ()


def alterations_record(match: QuoteMatch, *, offset: int = 0) -> list[dict[str, str | int]]:
    """What a quote row stores of a match's alterations and omissions (its ``alterations`` column): one
    ``{"kind", "detail", "quote_text", "source_start", "source_end", "alters"}`` per alteration, in quote
    order (``alters``: why it may change what the source says, "" if it cannot), with ``"note"`` where the
    verifier says how it read it (a resolved referent); none for an exact match. ``offset`` is added to the
    source offsets (a match made against an excerpt that starts there)."""
    return [
        {
            "kind": a.kind,
            "detail": a.detail,
            "quote_text": a.quote_text,
            "source_start": a.source_start + offset,
            "source_end": a.source_end + offset,
            "alters": a.alters,
            **({"note": a.note} if a.note else {}),
        }
        for a in match.alterations
    ]


def context_flags_record(match: QuoteMatch, *, offset: int = 0) -> list[dict[str, str | int]]:
    """What a quote row stores of the limiting context next to its passage (its ``context_flags`` column): one
    ``{"flag", "source_start", "source_end"}`` per flag; none unless the match is ``altered``."""
    return [
        {"flag": f.flag, "source_start": f.source_start + offset, "source_end": f.source_end + offset}
        for f in match.flags
    ]
