"""The verification cascade: exact, then tolerant tiers; the match with its alterations, or the reason it failed."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator
from dataclasses import replace

from lqai_verify.verification import omissions, policy, referents
from lqai_verify.verification.normalization import (
    _Canon,
    _normalize,
    after_layout,
    before_layout,
    find_layout,
    is_token_boundary,
)
from lqai_verify.verification.policy import ALTERED_MAX_CONFIDENCE, CURRENT_RULES, SUBSTITUTION_MAX_CONFIDENCE
from lqai_verify.verification.results import (
    ALTERED,
    BRACKET,
    CASE,
    ELLIPSIS,
    EMPHASIS,
    EXACT_MATCH,
    LETTER,
    LIMITED_AFTER,
    PARENTHETICAL,
    QUOTE_MARK,
    REASON_BOUNDARY,
    REASON_EMPTY,
    REASON_NO_WORDS,
    REASON_NOT_FOUND,
    REASON_TOO_COMPLEX,
    SIC,
    SUBSTITUTION,
    TOLERANT_MATCH,
    Alteration,
    ContextFlag,
    QuoteMatch,
)
from lqai_verify.verification.search import (
    GAP_ELLIPSIS,
    GAP_SIC,
    Pattern,
    Refused,
    Search,
    plain_pattern,
    structured_patterns,
)

# --- Confidence scale (see the package docstring) ---------------------------------------------------------------------
_CONF_TOLERANT = 0.98
_PENALTY_QUOTE_MARKS = 0.02
_PENALTY_LAYOUT = 0.03
_PENALTY_BRACKETS = 0.08
_PENALTY_ELLIPSIS = 0.11
_PENALTY_CASE = 0.20
_CONF_FLOOR = 0.50

# Occurrences of an exact quote examined for token boundaries before leaving it to the tolerant tier (which has its
# own search budget): a short quote such as "a" can occur at almost every position of a source.
_EXACT_OCCURRENCES = 10_000

_INVISIBLE_JOINERS = frozenset("\u00ad\u200b\u200c\u200d\u2060\ufeff")
_HYPHEN_CHARS = frozenset("-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63\uff0d")
_GAP_KINDS = {GAP_ELLIPSIS: ELLIPSIS, GAP_SIC: SIC}
_LETTER_RUN = re.compile(r"[^\W\d_]{2,}")

# Bluebook parentheticals a quote may end with (Rule 5.2): they say how it was quoted, and stand for no source text.
_TRAILING_PARENTHETICAL = re.compile(
    r"\s*\((?:[^()]{0,120}?\b(?:omitted|added|supplied|in original))\)\s*[.;,]?\s*$", re.IGNORECASE
)
# Emphasis markup a model adds to a quote (`**must**`, `__must__`, `*must*`, `_must_`).
_EMPHASIS_MARKUP = re.compile(
    r"\*\*(?=\S)(?P<b>[^*\n]+?)(?<=\S)\*\*|__(?=\S)(?P<u>[^_\n]+?)(?<=\S)__"
    r"|(?<![\w*])\*(?=[^\s\d*])(?P<i>[^*\n]+?)(?<=\S)\*(?![\w*])|(?<![\w_])_(?=\S)(?P<j>[^_\n]+?)(?<=\S)_(?![\w_])"
)
# A sentence's end in original text: `.`, `?` or `!` after a word of two letters or more (not `v.`, `U.S.`), a
# digit or a parenthesis, with its closing marks, before whitespace.
_SENTENCE_BOUNDARY = re.compile(r"""(?:[^\W\d_]{2}|[\d)])[.?!]['"\u201d\u2019)\]]*(?=\s|$)""")
_SENTENCE_WINDOW = 1500


def _strip_markup(needle: str) -> tuple[str, list[tuple[str, str, int, int]]]:
    """``needle`` without trailing Bluebook parentheticals and emphasis markup, and what was taken out: ``(kind,
    quote_text, start, end)`` with ``start:end`` the span of the cleaned needle it applies to."""
    markup: list[tuple[str, str, int, int]] = []
    parentheticals: list[str] = []
    while (m := _TRAILING_PARENTHETICAL.search(needle)) is not None and m.start() > 0:
        parentheticals.insert(0, m.group().strip())
        needle = needle[: m.start()].rstrip()
    if "*" in needle or "_" in needle:
        parts: list[str] = []
        last = 0
        length = 0
        for m in _EMPHASIS_MARKUP.finditer(needle):
            inner = next(g for g in m.groups() if g is not None)
            parts.append(needle[last : m.start()])
            length += m.start() - last
            markup.append((EMPHASIS, m.group(), length, length + len(inner)))
            parts.append(inner)
            length += len(inner)
            last = m.end()
        parts.append(needle[last:])
        needle = "".join(parts)
    markup.extend((PARENTHETICAL, text, len(needle), len(needle)) for text in parentheticals)
    return needle, markup


def _sentence_end(source: str, pos: int) -> int:
    m = _SENTENCE_BOUNDARY.search(source, pos, min(len(source), pos + _SENTENCE_WINDOW))
    return m.end() if m is not None else min(len(source), pos + _SENTENCE_WINDOW)


def _sentence_start(source: str, pos: int) -> int:
    lo = max(0, pos - _SENTENCE_WINDOW)
    last = None
    for last in _SENTENCE_BOUNDARY.finditer(source, lo, pos):  # noqa: B007 - the last boundary is the one wanted
        pass
    start = last.end() if last is not None else lo
    while start < pos and source[start].isspace():
        start += 1
    return start


def _judged(source: str, match: QuoteMatch, layout: list[tuple[int, int]], rules: int) -> QuoteMatch:
    """``match`` with its context flags and its edge omissions' source text, ``altered`` (confidence capped at
    ``ALTERED_MAX_CONFIDENCE``) if an alteration, an omission or an edge may change what the source says.
    ``layout``: the source's layout (:func:`find_layout`); a page break between a passage and what limits it
    hides nothing. ``rules``: the version of the rules to apply (:data:`policy.CURRENT_RULES` or an earlier one)."""
    flags: list[ContextFlag] = []
    after = policy.limits_after(source, match.end, after_layout(source, match.end, layout), rules=rules)
    if after is not None:
        flags.append(ContextFlag(LIMITED_AFTER, *after))
    resume = before_layout(source, match.start, layout)
    opening = omissions.opening_condition if rules >= 4 else policy.limits_opening
    before = policy.limits_before(source, resume) or opening(source, resume)
    if before is not None:
        flags.append(ContextFlag(*before))
    if not match.alterations:  # a verbatim quote: no omission at its edges to fill in
        if not flags:
            return match
        return replace(
            match, method=ALTERED, confidence=min(match.confidence, ALTERED_MAX_CONFIDENCE), flags=tuple(flags)
        )
    alterations = list(match.alterations)
    for i, a in enumerate(alterations):
        if a.kind != ELLIPSIS or a.source_start != a.source_end:
            continue
        # An ellipsis at the quote's start or end: the omitted text is the rest of the sentence (or, where the quote
        # ends its sentence, the next one), never nothing.
        if a.source_start >= match.end:
            end = _sentence_end(source, match.end)
            if source[match.end : end].strip(" \t\n.") == "":
                end = _sentence_end(source, end)
            why = "a trailing omission drops a limiting continuation" if after is not None else ""
            begin = match.end
            while begin < end and source[begin].isspace():
                begin += 1
            alterations[i] = replace(a, source_start=begin, source_end=end, alters=why)
        elif a.source_start <= match.start:
            why = "a leading omission drops a negation or a limiting word" if before is not None else ""
            begin = _sentence_start(source, match.start)
            if rules >= 4:
                begin = omissions.sentence_start(source, match.start)
                why = omissions.leading_alters(source[begin : match.start]) or why
            alterations[i] = replace(a, source_start=begin, alters=why)
    if not flags and not any(a.alters for a in alterations):
        return match if alterations == list(match.alterations) else replace(match, alterations=tuple(alterations))
    return replace(
        match,
        method=ALTERED,
        confidence=min(match.confidence, ALTERED_MAX_CONFIDENCE),
        alterations=tuple(alterations),
        flags=tuple(flags),
    )


def _soft_joined(source: str, i: int) -> bool:
    """Whether ``i`` is inside a word broken by a soft hyphen or a zero-width character (`Hop\u00ad\nwood`)."""
    j = i
    while j > 0 and source[j - 1].isspace():
        j -= 1
    if j > 0 and source[j - 1] in _INVISIBLE_JOINERS:
        return True
    return i < len(source) and source[i] in _INVISIBLE_JOINERS


def _exact(source: str, needle: str) -> tuple[QuoteMatch | None, bool]:
    """The first occurrence of ``needle`` in ``source`` from token boundary to token boundary, and whether an
    occurrence cut a word or number of the source."""
    cut = False
    start = source.find(needle)
    for _ in range(_EXACT_OCCURRENCES):
        if start == -1:
            break
        end = start + len(needle)
        if (
            is_token_boundary(source, start)
            and is_token_boundary(source, end)
            and not _soft_joined(source, start)
            and not _soft_joined(source, end)
        ):
            return QuoteMatch(EXACT_MATCH, 1.0, start, end), cut
        cut = True
        start = source.find(needle, start + 1)
    return None, cut


def _pick_reason(reasons: list[str], cut: bool) -> str:
    """The most specific of the reasons the searches gave."""
    for reason in reasons:
        if reason not in (REASON_BOUNDARY, REASON_TOO_COMPLEX):
            return reason
    if cut or REASON_BOUNDARY in reasons:
        return REASON_BOUNDARY
    if REASON_TOO_COMPLEX in reasons:
        return REASON_TOO_COMPLEX
    return REASON_NOT_FOUND


class NormalizedSource:
    """A source normalized once, to verify many quotes against it.

    Build with :meth:`build`; :meth:`verify` is then cheap per quote (``str.find`` over the canonical text).
    """

    __slots__ = ("_fallback", "_layout", "_parties", "_primary", "source")

    def __init__(self, source: str, primary: _Canon, layout: list[tuple[int, int]]) -> None:
        self.source = source
        self._primary = primary
        self._layout = layout
        self._parties: dict[str, frozenset[str]] | None = None
        # A quote may include running-head text itself (it was copied with the passage, or detection took a short
        # repeated heading for a running head): the same source with nothing skipped is the fallback, built only
        # when needed. Quotes are never stripped of lines themselves: that could silently drop a quoted number
        # that happened to sit on a line of its own.
        self._fallback: _Canon | None = None if layout else primary

    @classmethod
    def build(cls, source: str) -> NormalizedSource:
        skipped = find_layout(source)
        return cls(source, _normalize(source, skipped), skipped)

    @property
    def parties(self) -> dict[str, frozenset[str]]:
        """The parties the source's caption names, by role (empty if it has none): they settle role brackets."""
        if self._parties is None:
            self._parties = policy.caption_parties(self.source)
        return self._parties

    def _variants(self) -> Iterator[_Canon]:
        yield self._primary
        if self._fallback is None:
            self._fallback = _normalize(self.source, [])
        if self._fallback is not self._primary:
            yield self._fallback

    def verify(self, quote: str, *, rules: int = CURRENT_RULES) -> QuoteMatch | None:
        """Find ``quote`` in the source: exact first, then tolerant tiers; ``None`` if it is not there."""
        return self.verify_detailed(quote, rules=rules)[0]

    def verify_detailed(self, quote: str, *, rules: int = CURRENT_RULES) -> tuple[QuoteMatch | None, str]:
        """``(match, "")`` if ``quote`` verifies, else ``(None, reason)`` with a short human reason, e.g. "not found
        in the source" or "an omission drops a negation". ``rules``: the version of the rules (one of
        :data:`policy.RULES`), so that a quote verified under earlier rules can be checked under them."""
        if rules not in policy.RULES:
            raise ValueError(f"unknown verification rules {rules!r}: this verifier has {policy.RULES}")
        needle = quote.strip()
        if not needle:
            return None, REASON_EMPTY
        match, cut = _exact(self.source, needle)
        if match is not None:
            return _judged(self.source, match, self._layout, rules), ""
        if not any(ch.isalnum() for ch in needle):
            return None, REASON_NO_WORDS  # `...` or `" "` would match punctuation anywhere
        cleaned, markup = _strip_markup(needle)
        if markup:
            if not any(ch.isalnum() for ch in cleaned):
                return None, REASON_NO_WORDS
            match, _ = _exact(self.source, cleaned)
            if match is not None:
                marks = tuple(Alteration(kind, text, match.start + s, match.start + e) for kind, text, s, e in markup)
                found = QuoteMatch(TOLERANT_MATCH, _CONF_TOLERANT, match.start, match.end, marks)
                return _judged(self.source, found, self._layout, rules), ""
            needle = cleaned
        match, reason = self._tolerant(needle, rules)
        if match is None:
            return None, _pick_reason([reason] if reason else [], cut)
        if markup:
            marks = tuple(
                Alteration(kind, text, match.end if kind == PARENTHETICAL else match.start, match.end)
                for kind, text, _, _ in markup
            )
            match = replace(match, alterations=tuple(sorted(match.alterations + marks, key=_by_source)))
        return _judged(self.source, match, self._layout, rules), ""

    def _tolerant(self, needle: str, rules: int) -> tuple[QuoteMatch | None, str]:
        """The tolerant tiers: ``(match, "")`` or ``(None, reason)`` (the most specific reason, "" for none)."""
        q = _normalize(needle, [])
        plain = plain_pattern(q)
        structured: list[Pattern] | None = None  # built only if the plain tier fails
        reasons: list[str] = []
        # Tiers in decreasing confidence: plain before structured, case-sensitive before case-insensitive.
        for fold in (False, True):
            if plain is not None and (match := self._search_variants([plain], fold, reasons, rules)) is not None:
                return match, ""
            if structured is None:
                try:
                    structured = structured_patterns(needle, q, reasons)
                except Refused as refused:
                    structured = []
                    reasons.append(str(refused))
            if structured and (match := self._search_variants(structured, fold, reasons, rules)) is not None:
                return match, ""
        return None, _pick_reason(reasons, False) if reasons else ""

    def _search_variants(
        self, patterns: list[Pattern], fold: bool, reasons: list[str], rules: int
    ) -> QuoteMatch | None:
        for canon in self._variants():
            for pattern in patterns:
                match = self._search(canon, pattern, fold, reasons, rules)
                if match is not None:
                    return match
        return None

    def _search(self, canon: _Canon, pattern: Pattern, fold: bool, reasons: list[str], rules: int) -> QuoteMatch | None:
        search = Search(canon, pattern, fold, self.parties if pattern.brackets else None, rules=rules)
        starts = search.run()
        if starts is None:
            if search.reason is not None:
                reasons.append(search.reason)
            return None
        swapped = search.quote_marks_swapped(starts)
        confidence = _CONF_TOLERANT
        if search.layout_used(starts):
            confidence -= _PENALTY_LAYOUT
        if swapped:
            confidence -= _PENALTY_QUOTE_MARKS
        if pattern.brackets:
            confidence -= _PENALTY_BRACKETS
        if pattern.ellipsis:
            confidence -= _PENALTY_ELLIPSIS
        if fold:
            confidence -= _PENALTY_CASE
        confidence = max(confidence, _CONF_FLOOR)
        if any(finding.detail == SUBSTITUTION for finding in search.findings):
            confidence = min(confidence, SUBSTITUTION_MAX_CONFIDENCE)

        last_piece = pattern.pieces[-1]
        start = canon.orig_start(starts[0])
        end = canon.orig_end(starts[-1] + len(last_piece.text) - 1)
        if last_piece.hyphen_after:
            # Include the hyphen the quote ended with (the canonical text may not contain it).
            probe = end
            while probe < len(self.source) and self.source[probe].isspace():
                probe += 1
            if probe < len(self.source) and self.source[probe] in _HYPHEN_CHARS:
                end = probe + 1

        alterations: list[Alteration] = []
        for finding in search.findings:
            kind = _GAP_KINDS.get(finding.gap.kind, BRACKET)
            s, e = self._orig_span(canon, finding.start, finding.end)
            alterations.append(
                self._reread(Alteration(kind, finding.gap.marker, s, e, finding.detail, finding.alters), rules)
            )
            if finding.attached_edge and s < e:
                # `provide[d]` at the quote's end: the word it alters is part of the passage.
                start, end = min(start, s), max(end, e)
        for piece, a in zip(pattern.pieces, starts, strict=True):
            for f in piece.free:
                s, e = self._orig_span(canon, a + f, a + f + 1)
                alterations.append(Alteration(LETTER, f"[{piece.text[f]}]", s, e))
        for pos, mark in swapped:
            s, e = self._orig_span(canon, pos, pos + 1)
            alterations.append(Alteration(QUOTE_MARK, mark, s, e))
        if fold:
            alterations.append(Alteration(CASE, "", start, end, alters=_case_changes_a_word(canon, pattern, starts)))
        alterations.sort(key=_by_source)
        return QuoteMatch(TOLERANT_MATCH, round(confidence, 2), start, end, tuple(alterations))

    def _reread(self, alteration: Alteration, rules: int) -> Alteration:
        """``alteration`` as rules version 4 reads it on the original text (earlier rules: unchanged): an omission
        by what it omits (:func:`omissions.inner_alters`), a bracket for a pronoun or a role noun by the referent
        the paragraph gives it (:func:`referents.resolve`)."""
        if rules < 4:
            return alteration
        if alteration.kind == ELLIPSIS and alteration.source_start < alteration.source_end:
            why = omissions.inner_alters(self.source, alteration.source_start, alteration.source_end, alteration.alters)
            return replace(alteration, alters=why)
        if alteration.kind == BRACKET and alteration.alters == policy.REASON_UNSETTLED_REFERENT:
            why, note = referents.resolve(
                self.source, alteration.source_start, alteration.source_end, alteration.quote_text
            )
            return replace(alteration, alters=why, note=note)
        return alteration

    def _orig_span(self, canon: _Canon, s: int, e: int) -> tuple[int, int]:
        """Original offsets of canonical ``[s, e)`` without its surrounding spaces; an empty span stays empty, next to
        the text before it (`neglects [sic] or`) unless it is the start of a word (an insertion before a passage)."""
        text = canon.text
        if (s == e or text[s:e].isspace()) and s > 0 and (s >= len(text) or text[s] == " "):
            pos = canon.orig_end(s - 1)
            return pos, pos
        while s < e and text[s] == " ":
            s += 1
        while e > s and text[e - 1] == " ":
            e -= 1
        if s < e:
            return canon.orig_start(s), canon.orig_end(e - 1)
        if s < len(text):
            return canon.orig_start(s), canon.orig_start(s)
        pos = canon.orig_end(len(text) - 1) if text else 0
        return pos, pos


class NormalizedSources:
    """Sources normalized once each, kept by a key of the caller's (a document's or an opinion's id), to verify
    many quotes against many sources: each text is normalized the first time a quote is verified against it."""

    __slots__ = ("_built",)

    def __init__(self) -> None:
        self._built: dict[Hashable, NormalizedSource] = {}

    def verify_detailed(self, key: Hashable, text: str, quote: str) -> tuple[QuoteMatch | None, str]:
        """``quote`` verified against ``text``, the source ``key`` (:meth:`NormalizedSource.verify_detailed`)."""
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = NormalizedSource.build(text)
        return built.verify_detailed(quote)


def _case_changes_a_word(canon: _Canon, pattern: Pattern, starts: list[int]) -> str:
    """Why a case-insensitive match may change a word, or "": a word the one side writes in capitals is in lower
    case on the other (`US` for "us", `us` for "US"), unless that side is in capitals throughout (a heading set in
    capitals says nothing by its case). A change of capitals to title case (`Section` for "SECTION") is none."""
    source_side = "\n".join(
        canon.text[a : a + len(piece.text)] for piece, a in zip(pattern.pieces, starts, strict=True)
    )
    quote_side = "\n".join(piece.text for piece in pattern.pieces)  # the same length: only case and marks differ
    for side, other in ((source_side, quote_side), (quote_side, source_side)):
        if not any(ch.islower() for ch in side):
            continue
        for m in _LETTER_RUN.finditer(side):
            word, counterpart = m.group(), other[m.start() : m.end()]
            if word.isupper() and counterpart.islower():
                return f"a case change makes another word of one in capitals ({word} and {counterpart})"
    return ""


def _by_source(alteration: Alteration) -> tuple[int, int]:
    return alteration.source_start, alteration.source_end


def verify_quote(quote: str, source: str | NormalizedSource, *, rules: int = CURRENT_RULES) -> QuoteMatch | None:
    """Verify ``quote`` against ``source`` (a string, or a :class:`NormalizedSource` reused across quotes)."""
    return verify_quote_detailed(quote, source, rules=rules)[0]


def verify_quote_detailed(
    quote: str, source: str | NormalizedSource, *, rules: int = CURRENT_RULES
) -> tuple[QuoteMatch | None, str]:
    """Like :func:`verify_quote`, with the reason a quote does not verify: ``(match, "")`` or ``(None, reason)``."""
    if isinstance(source, NormalizedSource):
        return source.verify_detailed(quote, rules=rules)
    needle = quote.strip()
    if needle and rules in policy.RULES:
        # Exact matches need no normalization: don't pay for it.
        match, _ = _exact(source, needle)
        if match is not None:
            return _judged(source, match, find_layout(source), rules), ""
    return NormalizedSource.build(source).verify_detailed(quote, rules=rules)
