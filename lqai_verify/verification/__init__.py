"""Character-verifiable quote verification against cited source text.

:func:`verify_quote` (and :func:`verify_quote_detailed`, which adds why a quote failed) decides whether a quote
occurs in the text of the source it cites and, if it does, returns the offsets into the ORIGINAL source
(``source[start:end]`` is the passage), the tier (``exact_match``, ``tolerant_match``, ``altered``), its
confidence, and every alteration and omission with the source text it stands for; anything else is ``None``.
A match runs from a token boundary to a token boundary of the source; tolerance is for formatting and the
Bluebook alterations :mod:`.policy` allows, never for words; a per-quote search budget bounds pathological
inputs (they fail closed). Pure Python (no Django): the server and the offline verifier import it alike.
The tiers, the confidence scale and what each status promises: docs/verification.md.
Each rule belongs to a version (``RULES``; version 4 adds :mod:`.omissions` and :mod:`.referents`), and
``verify_quote(..., rules=3)`` still applies an earlier one.
"""

from lqai_verify.verification.engine import NormalizedSource, NormalizedSources, verify_quote, verify_quote_detailed
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
    "NormalizedSources",
    "QuoteMatch",
    "alterations_record",
    "context_flags_record",
    "verify_quote",
    "verify_quote_detailed",
]
