"""Character-verifiable quote verification against cited source text.

An assistant's quote only counts if it can be found in the text of the source it cites. This package decides whether
a quote occurs in a source and, if it does, returns the offsets ``start``/``end`` into the ORIGINAL source so that
``source[start:end]`` is the passage the quote came from (a reviewer can highlight it), with every alteration and
omission the quote made and the source text each one stands for. A quote that does not verify gets a short reason
(:func:`verify_quote_detailed`).

Every tier matches only from a token boundary to a token boundary of the source: a quote never starts or ends inside
a word or a number (numbers with inner separators, ``4.5``, ``10,000``, ``42-1983.1``, ``1/2/2024``, are one token,
and so is a number with its magnitude word or its minus sign: ``$1 million`` is never ``$1``, ``-500`` never ``500``;
a hyphenated word is one token, also across a line break: ``race`` is not in "race-neutral", nor ``custodial`` in
"non-custodial").

``exact_match`` (confidence 1.0)
    The (whitespace-stripped) quote occurs verbatim in the source, found with ``str.find``, and nothing right
    next to the passage limits it (see ``altered``). Offsets a model claimed are never trusted or sliced.

``tolerant_match`` (0 < confidence < 1)
    The quote occurs once formatting-only differences are ignored (:mod:`.normalization`: Unicode forms, quotes,
    dashes, whitespace and line breaks, soft hyphens, hyphenation, running heads, spaces around ``§`` and ``¶``), and
    a double quotation mark may stand for a single one or back (never for an apostrophe). On top of that the quote
    may use Bluebook alterations and omissions (:mod:`.search` finds them, :mod:`.policy` decides which are allowed):
    ``[t]he`` (a bracketed letter that starts a word, either case), ``[the Court]`` (a bracketed phrase standing for
    up to :data:`MAX_BRACKET_WORDS` source words), ``provide[d]`` (letters attached to a word), ``[sic]`` (stands for
    nothing), ``[ ]`` (an inflectional ending omitted from a word) and ellipses (``...``, ``…``, ``. . .``,
    ``[...]``), each segment within :data:`MAX_ELLIPSIS_GAP` canonical characters of the previous one. Finally a
    case-insensitive pass is tried.

It also forgives star paging inside the source (``*1047the``, ``[*1047]``), footnote calls (``(FN3)``),
trailing Bluebook parentheticals (``(emphasis added)``, recorded as ``parenthetical``), emphasis markup in
the quote (``**must**``, recorded as ``emphasis``) and the source's own brackets next to an omission; an edge
bracket's source words are part of the passage (``[a] party`` for "A party").

``altered`` (confidence at most :data:`ALTERED_MAX_CONFIDENCE`)
    Found, but the verifier cannot vouch for the meaning: a bracket that names a party the source's words do
    not settle (a pronoun, a role noun the caption does not settle), drops words naming or qualifying the
    actor, adds a referent or substitutes words; an omission that joins parts of different sentences or
    clauses, omits whole sentences of negation, disagreement or holding, omits a condition or an exception
    inside a sentence, or drops a limiting continuation at the quote's edge; a case change that makes another
    word of one in capitals (`us` for "US"); or a passage the source limits right next to it (context flags
    ``limited_after``, ``negated_before``, ``limited_before``). Each such alteration says why
    (``Alteration.alters``), with the source text it stands for (never an empty omission).

Rules version 4 reads an omission by what it omits (:mod:`.omissions`: citation sentences, a parenthetical, a list's
items are formatting; who says the kept words, a rejection, what a limiting word governs are not) and resolves a
bracket's referent from the paragraph (:mod:`.referents`). Anything else is ``None``. Tolerance is for formatting,
never for words: an added, dropped or changed word or number does not verify, however similar; there are no fuzzy
similarity scores.

Confidence scale (tolerant tiers start at 0.98 and lose a fixed amount per kind of tolerance used)::

    1.00  exact_match
    0.98  tolerant: formatting only (whitespace, quotes, dashes, NFKC, soft hyphens, zero-width characters)
    0.96  ... a double quotation mark for a single one or back                                     (-0.02)
    0.95  ... plus a line-break hyphenation joined or a running head skipped inside the passage   (-0.03)
    0.90  ... bracketed alterations used                                                           (-0.08)
    0.87  ... ellipsis omissions used                                                              (-0.11)
    <=0.78 case-insensitive match (a case-only difference)                                         (-0.20)
    <=0.60 a bracket substitutes different words (policy.SUBSTITUTION_MAX_CONFIDENCE)
    0.50  floor: combinations never go below it

A quote that itself contains running-head text (copied along with the passage) is matched against the source
with nothing skipped. Quotes are never stripped of lines: that could silently drop a quoted number that happened to
sit on a line of its own.

Cost is linear in the source size: the source is normalized once (:meth:`NormalizedSource.build`), and every search
is ``str.find``/``str.rfind`` over the canonical string; a per-quote search budget keeps pathological inputs bounded
(they then fail closed: ``None``).
"""

from lqai_verify.verification.engine import NormalizedSource, verify_quote, verify_quote_detailed
from lqai_verify.verification.policy import (
    ALTERED_MAX_CONFIDENCE,
    CURRENT_RULES,
    MAX_BRACKET_WORDS,
    RULES,
    SUBSTITUTION_MAX_CONFIDENCE,
)
from lqai_verify.verification.results import (
    ALTERED,
    CONTEXT_FLAGS,
    EXACT_MATCH,
    LIMITED_AFTER,
    LIMITED_BEFORE,
    NEGATED_BEFORE,
    TOLERANT_MATCH,
    Alteration,
    ContextFlag,
    QuoteMatch,
    alterations_record,
    context_flags_record,
)
from lqai_verify.verification.search import MAX_ELLIPSIS_GAP

# The version of these rules, sealed with every turn's facts: a change of what verifies, or of the offsets,
# confidence or alterations a match reports, must change it, so that a seal says which rules it was made by. Every
# version in ``RULES`` can still be applied (``verify_detailed(quote, rules=3)``): the offline verifier checks a quote
# under the rules it was sealed by.
VERIFIER_VERSION = str(CURRENT_RULES)

__all__ = [
    "ALTERED",
    "ALTERED_MAX_CONFIDENCE",
    "CONTEXT_FLAGS",
    "CURRENT_RULES",
    "EXACT_MATCH",
    "LIMITED_AFTER",
    "LIMITED_BEFORE",
    "MAX_BRACKET_WORDS",
    "MAX_ELLIPSIS_GAP",
    "NEGATED_BEFORE",
    "RULES",
    "SUBSTITUTION_MAX_CONFIDENCE",
    "TOLERANT_MATCH",
    "VERIFIER_VERSION",
    "Alteration",
    "ContextFlag",
    "NormalizedSource",
    "QuoteMatch",
    "alterations_record",
    "context_flags_record",
    "verify_quote",
    "verify_quote_detailed",
]
