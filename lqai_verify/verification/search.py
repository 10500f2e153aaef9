"""Search: a canonical quote as literal pieces separated by gaps (ellipses, brackets), found in a canonical source.

The search anchors on the longest piece (``str.find`` over the source's canonical text), then looks for the other
pieces in bounded windows on either side. Every candidate is checked: hyphens compatible, token boundaries at the
quote's ends and next to every omission or unattached bracket, and every gap allowed by the alteration policy
(:mod:`.policy`). A per-quote search budget keeps pathological inputs bounded (they fail closed).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from lqai_verify.verification import policy
from lqai_verify.verification.normalization import (
    _HYPHEN,
    _LINE_HYPHEN,
    _NO_HYPHEN,
    _Canon,
    _fold,
    _normalize,
    is_apostrophe,
    is_token_boundary,
)
from lqai_verify.verification.results import (
    FORM,
    LETTERS,
    REASON_ADJACENT_MARKERS,
    REASON_BOUNDARY,
    REASON_TOO_COMPLEX,
    SAME,
)

#: Maximum canonical characters omitted by one ellipsis: omissions are short in real quoting, and the bound keeps a
#: quote from being stitched together from words scattered over the whole document.
MAX_ELLIPSIS_GAP = 1500
# Characters a bracketed phrase may stand for: MAX_BRACKET_WORDS long words with their separators.
_MAX_BRACKET_CHARS = 200
# Candidate positions examined per structured search: enough for any real quote, and a hard stop for adversarial
# input (e.g. "a ... a ... a" against a source made of "a"s), which then fails closed.
_SEARCH_BUDGET = 20_000
# More pieces than this (brackets + ellipses) is not a quote but a collage; refuse rather than recurse deeply.
_MAX_PIECES = 100

# `[t]he`: a bracketed letter that starts a word stands for that letter in either case. A bracketed letter after a
# letter (`provide[d]`) is a change of the word's form, and `[a] person` is a bracketed word: both are word brackets.
_SINGLE_LETTER_BRACKET = re.compile(r"(?<![^\W\d_])\[([^\W\d_])\](?=[^\W\d_])")
_ELLIPSIS = re.compile(r"\.{3,}")
_ELLIPSIS_OR_BRACKET = re.compile(r"\.{3,}|\[[^\[\]]{0,200}\]")

# Kinds of gap.
GAP_ELLIPSIS = "ellipsis"
GAP_BRACKET = "bracket"  # bracketed words, or letters attached to a word
GAP_SIC = "sic"  # `[sic]`: stands for nothing
GAP_LETTERS = "letters"  # `[ ]`: letters omitted inside a word

_QUOTE_MARKS = frozenset("'\"")


class Refused(Exception):
    """The quote's alterations cannot be checked; the message is the reason."""


@dataclass(frozen=True, slots=True)
class Gap:
    kind: str
    content: str  # a bracket's content (canonical), "" for an ellipsis
    marker: str  # the marker as the canonical quote writes it: "[the Court]", "...", "[sic]"
    max_chars: int
    max_words: int | None  # None: any content (ellipsis); else a word budget
    attached_left: bool  # the marker touches the preceding word (`impose[d]`)
    attached_right: bool


@dataclass(frozen=True, slots=True)
class Piece:
    text: str
    hay_needle: str  # text as searched for in the source's haystack (double quotation marks as single ones)
    folded_needle: str  # the same, lower-cased
    hyph: dict[int, int]  # relative position -> hyphen flag of the quote
    spaced: frozenset[int]  # relative positions where the quote had whitespace dropped from the canonical text
    free: tuple[int, ...]  # relative positions of bracketed single letters: either case matches
    bound_left: bool  # must start at a token boundary of the source
    bound_right: bool
    hyphen_after: bool  # the quote ended the piece with a hyphen (`edu-`), stripped: the source must have one there


@dataclass(frozen=True, slots=True)
class Pattern:
    pieces: tuple[Piece, ...]
    gaps: tuple[Gap, ...]  # gaps[i] separates pieces[i] and pieces[i + 1]
    lead: Gap | None  # a marker before the first piece
    trail: Gap | None  # a marker after the last piece
    brackets: bool
    ellipsis: bool


@dataclass(frozen=True, slots=True)
class GapFinding:
    """What a gap of a found pattern stands for: its canonical source span and, for a bracket, the detail."""

    gap: Gap
    start: int
    end: int
    detail: str
    # An edge marker standing for the passage's first or last words (`provide[d]`, `[a] party`): part of the passage.
    attached_edge: bool = False
    alters: str = ""  # why this gap may change what the source says (the match is then ALTERED); "" if it cannot


def _merge_gaps(a: Gap, b: Gap) -> Gap:
    if a.kind == GAP_ELLIPSIS and b.kind == GAP_ELLIPSIS:
        return Gap(
            GAP_ELLIPSIS, "", a.marker + " " + b.marker, MAX_ELLIPSIS_GAP, None, a.attached_left, b.attached_right
        )
    if a.kind == GAP_BRACKET and b.kind == GAP_BRACKET:
        return Gap(
            GAP_BRACKET,
            f"{a.content} {b.content}",
            f"{a.marker} {b.marker}",
            a.max_chars + b.max_chars,
            None if a.max_words is None or b.max_words is None else a.max_words + b.max_words,
            a.attached_left,
            b.attached_right,
        )
    # An ellipsis next to a bracket, or `[sic]` next to another marker: what stands for what cannot be told apart.
    raise Refused(REASON_ADJACENT_MARKERS)


def _marker_gap(text: str, start: int, end: int) -> Gap:
    marker = text[start:end]
    # Attached: touching a letter or digit (`impose[d]`, `[un]constitutional`), or a clitic (`[the Court]'s`).
    attached_left = start > 0 and text[start - 1].isalnum()
    attached_right = end < len(text) and (text[end].isalnum() or text[end : end + 2] in ("'s", "'t"))
    content = marker[1:-1].strip() if marker.startswith("[") else ""
    squeezed = content.replace(" ", "")
    # `...`, and `[...]` as modern style writes it, are omissions; any other bracket is an alteration.
    if not marker.startswith("[") or (len(squeezed) >= 3 and squeezed == "." * len(squeezed)):
        return Gap(GAP_ELLIPSIS, "", marker, MAX_ELLIPSIS_GAP, None, attached_left, attached_right)
    if content.lower() == "sic":
        return Gap(GAP_SIC, content, marker, 2, 0, attached_left, attached_right)
    if not content:
        if not attached_left:
            raise Refused("[ ] stands only for letters omitted inside a word")
        return Gap(GAP_LETTERS, "", marker, policy.MAX_OMITTED_LETTERS + 1, 0, True, attached_right)
    return Gap(
        GAP_BRACKET, content, marker, _MAX_BRACKET_CHARS, policy.MAX_BRACKET_WORDS, attached_left, attached_right
    )


def _make_piece(q: _Canon, ps: int, pe: int, free: set[int], left: Gap | None, right: Gap | None) -> Piece:
    # A quote cut right after a line-end hyphen (`... about its edu-`) or a dash (`a nominee -`): the source skeleton
    # has no hyphen character there when a letter follows, so the hyphen becomes a requirement instead of text.
    hyphen_after = pe - ps >= 2 and q.text[pe - 1] == "-" and q.text[pe - 2].isalpha()
    if hyphen_after:
        pe -= 1
    text = q.text[ps:pe]
    hay_needle = text.replace('"', "'")
    return Piece(
        text=text,
        hay_needle=hay_needle,
        folded_needle=_fold(hay_needle),
        hyph={p - ps: q.hyph[p] for p in q.hyph_pos if ps < p < pe},
        spaced=frozenset(p - ps for p in q.spaced if ps < p < pe),
        free=tuple(sorted(p - ps for p in free if ps <= p < pe)),
        # The quote's own ends, and the sides of omissions and unattached brackets, are token boundaries.
        bound_left=left is None or left.kind == GAP_ELLIPSIS or not left.attached_right,
        bound_right=right is None or right.kind == GAP_ELLIPSIS or not right.attached_left,
        hyphen_after=hyphen_after,
    )


def plain_pattern(q: _Canon) -> Pattern | None:
    if not q.text:
        return None
    return Pattern((_make_piece(q, 0, len(q.text), set(), None, None),), (), None, None, brackets=False, ellipsis=False)


def _structured_pattern(q: _Canon, free: set[int], interpret_brackets: bool) -> Pattern | None:
    """Split a canonical quote at ellipses (and bracketed phrases) into pieces and gaps."""
    text = q.text
    marker = _ELLIPSIS_OR_BRACKET if interpret_brackets else _ELLIPSIS
    items: list[tuple[int, int] | Gap] = []
    pos = 0
    for m in marker.finditer(text):
        items.append((pos, m.start()))
        items.append(_marker_gap(text, m.start(), m.end()))
        pos = m.end()
    items.append((pos, len(text)))

    # Strip pieces; empty pieces disappear and the markers around them form one gap.
    spans: list[tuple[int, int]] = []
    groups: list[list[Gap]] = [[]]  # groups[i] precedes spans[i]; a final group follows the last span
    for item in items:
        if isinstance(item, Gap):
            groups[-1].append(item)
            continue
        ps, pe = item
        while ps < pe and text[ps] == " ":
            ps += 1
        while pe > ps and text[pe - 1] == " ":
            pe -= 1
        if ps < pe:
            spans.append((ps, pe))
            groups.append([])
    gaps: list[Gap | None] = []
    for i, group in enumerate(groups):
        if (i == 0 or i == len(groups) - 1) and any(g.kind != GAP_ELLIPSIS for g in group):
            # `. . . [the Court] held`: at the quote's start or end an ellipsis only says the sentence goes on; the
            # bracket next to it is what stands for source words.
            group = [g for g in group if g.kind != GAP_ELLIPSIS]
        merged: Gap | None = None
        for g in group:
            merged = g if merged is None else _merge_gaps(merged, g)
        gaps.append(merged)
    if not spans or not any(ch.isalnum() for ch in text):
        return None
    if len(spans) > _MAX_PIECES:
        raise Refused(REASON_TOO_COMPLEX)
    lead, trail = gaps[0], gaps[-1]
    if lead is not None and lead.kind == GAP_LETTERS:
        raise Refused("[ ] stands only for letters omitted inside a word")
    inner = gaps[1:-1]
    pieces = tuple(_make_piece(q, ps, pe, free, gaps[i], gaps[i + 1]) for i, (ps, pe) in enumerate(spans))
    all_gaps = [g for g in gaps if g is not None]
    return Pattern(
        pieces=pieces,
        gaps=tuple(g for g in inner if g is not None),
        lead=lead,
        trail=trail,
        brackets=bool(free) or any(g.kind != GAP_ELLIPSIS for g in all_gaps),
        ellipsis=any(g.kind == GAP_ELLIPSIS for g in all_gaps),
    )


def _canonical_positions(q: _Canon, raw_positions: list[int]) -> set[int]:
    """Canonical indices of the characters at ``raw_positions`` of the normalized text (if they survived)."""
    if not raw_positions:
        return set()
    wanted = set(raw_positions)
    return {i for i in range(len(q.text)) if q.text[i].isalpha() and q.orig_start(i) in wanted}


def structured_patterns(needle: str, q: _Canon, reasons: list[str] | None = None) -> list[Pattern]:
    """Patterns for a quote with ellipses and/or Bluebook brackets (``q`` is its canonical form, brackets literal).

    Raises :class:`Refused` if the quote's alterations cannot be checked; where the brackets cannot be read as
    alterations but may be the source's own, the reason is added to ``reasons`` and the literal pattern returned.
    """
    patterns: list[Pattern] = []
    has_ellipsis = "..." in needle or "\u2026" in needle or ". ." in needle
    # Brackets taken literally first: the source may itself quote with alterations (`nudge[ ] the[ ] claims`).
    if has_ellipsis and (pattern := _structured_pattern(q, set(), interpret_brackets=False)) is not None:
        patterns.append(pattern)
    if "[" in needle and "]" in needle:
        # Bracketed single letters become plain letters whose case is free; their positions are tracked through
        # normalization via their offsets in the altered quote.
        parts: list[str] = []
        free_raw: list[int] = []
        last = 0
        length = 0
        for m in _SINGLE_LETTER_BRACKET.finditer(needle):
            parts.append(needle[last : m.start()])
            length += m.start() - last
            free_raw.append(length)
            parts.append(m.group(1))
            length += 1
            last = m.end()
        parts.append(needle[last:])
        q_altered = _normalize("".join(parts), [])
        free = _canonical_positions(q_altered, free_raw)
        try:
            pattern = _structured_pattern(q_altered, free, interpret_brackets=True)
        except Refused as refused:
            # The brackets cannot be read as alterations next to an omission; they may still be the source's own
            # (`[defendant's] conduct . . . was`), which the literal pattern above tries.
            if not patterns:
                raise
            if reasons is not None:
                reasons.append(str(refused))
            pattern = None
        if pattern is not None:
            patterns.append(pattern)
    return patterns


class _BudgetExhausted(Exception):
    pass


class Search:
    """One pattern against one canonical source, case-sensitive or not.

    After :meth:`run`, ``reason`` holds why the most promising candidate was refused (a policy reason rather than a
    boundary), and ``findings`` what each gap and edge marker of the found match stands for.
    """

    __slots__ = ("budget", "findings", "fold", "parties", "pattern", "reason", "rules", "src")

    def __init__(
        self,
        src: _Canon,
        pattern: Pattern,
        fold: bool,
        parties: dict[str, frozenset[str]] | None = None,
        *,
        rules: int = policy.CURRENT_RULES,
    ) -> None:
        self.src = src
        self.rules = rules
        self.pattern = pattern
        self.fold = fold
        self.parties = parties or {}
        self.budget = _SEARCH_BUDGET
        self.reason: str | None = None
        self.findings: list[GapFinding] = []

    def _refuse(self, reason: str) -> None:
        if self.reason is None or self.reason == REASON_BOUNDARY:
            self.reason = reason

    def run(self) -> list[int] | None:
        """Canonical start of every piece, or None."""
        pieces = self.pattern.pieces
        k = max(range(len(pieces)), key=lambda i: len(pieces[i].text))  # anchor on the most selective piece
        try:
            for a in self._occurrences(pieces[k], 0, len(self.src.text), reverse=False):
                right = self._extend_right(k + 1, a + len(pieces[k].text))
                if right is None:
                    continue
                left = self._extend_left(k - 1, a)
                if left is None:
                    continue
                starts = [*left, a, *right]
                edges = self._edges(starts)
                if edges is None:
                    continue
                self.findings = self._inner_findings(starts) + edges
                return starts
        except _BudgetExhausted:
            self._refuse(REASON_TOO_COMPLEX)
            return None
        return None

    def _spend(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise _BudgetExhausted

    def _extend_right(self, i: int, prev_end: int) -> list[int] | None:
        pieces = self.pattern.pieces
        if i == len(pieces):
            return []
        gap = self.pattern.gaps[i - 1]
        for a in self._occurrences(pieces[i], prev_end, prev_end + gap.max_chars, reverse=False):
            if self._check_gap(gap, prev_end, a) is None:
                continue
            rest = self._extend_right(i + 1, a + len(pieces[i].text))
            if rest is not None:
                return [a, *rest]
        return None

    def _extend_left(self, i: int, next_start: int) -> list[int] | None:
        if i < 0:
            return []
        piece = self.pattern.pieces[i]
        gap = self.pattern.gaps[i]
        k = len(piece.text)
        # Closest candidates first: omissions are short.
        for a in self._occurrences(piece, next_start - gap.max_chars - k, next_start - k, reverse=True):
            if self._check_gap(gap, a + k, next_start) is None:
                continue
            rest = self._extend_left(i - 1, a)
            if rest is not None:
                return [*rest, a]
        return None

    # -- the policy at each gap ----------------------------------------------------------------------------------------
    def _word_start(self, i: int) -> int:
        text, hyph = self.src.text, self.src.hyph
        while i > 0 and text[i - 1].isalnum() and i not in hyph:
            i -= 1
        return i

    def _word_end(self, i: int) -> int:
        text, hyph = self.src.text, self.src.hyph
        j = i
        while j < len(text) and text[j].isalnum() and (j == i or j not in hyph):
            j += 1
        return j

    def _check_gap(self, gap: Gap, start: int, end: int, final: bool = False) -> GapFinding | None:
        """What the source text ``[start, end)`` between two pieces stands for, or None (reason recorded) if the
        gap may not stand for it. ``final``: for the match found, with why an omission may change what the source
        says (not computed for every candidate: the search may try many omissions per quote)."""
        text = self.src.text
        omitted = text[start:end]
        if gap.max_words is not None and len(omitted.split()) > max(gap.max_words, 1):
            return None
        if gap.kind == GAP_ELLIPSIS:
            # Checking a long omission costs more than finding it: it counts against the budget by its length.
            self.budget -= len(omitted) // 256
            before, after = text[max(0, start - 40) : start], text[end : end + 40]
            reason = policy.omission_change(before, omitted, after, rules=self.rules)
            if reason is not None:
                self._refuse(reason)
                return None
            return GapFinding(
                gap, start, end, "", alters=policy.omission_alters(before, omitted, after) if final else ""
            )
        if gap.kind == GAP_SIC:
            if omitted.strip():
                self._refuse("[sic] stands for source words")
                return None
            return GapFinding(gap, start, end, "")
        if gap.kind == GAP_LETTERS:
            letters = omitted.rstrip()
            if (letters and not letters.isalpha()) or len(letters) > policy.MAX_OMITTED_LETTERS or " " in letters:
                self._refuse("[ ] stands only for letters omitted inside a word")
                return None
            if gap.attached_right and letters != omitted:
                return None
            if not policy.inflection(letters):
                self._refuse(policy.REASON_NOT_INFLECTION)
                return None
            return GapFinding(gap, start, start + len(letters), LETTERS)
        ws = self._word_start(start) if gap.attached_left else start
        we = self._word_end(end) if gap.attached_right else end
        # Letters attached to a word are compared as the whole words (`provide[d]` for "provides").
        quote_side = text[ws:start] + gap.content + text[end:we] if ws < start or we > end else gap.content
        reason, detail = policy.classify_bracket(quote_side, text[ws:we])
        if reason is None:
            reason, alters = policy.bracket_alters(quote_side, text[ws:we], detail, self.parties)
        if reason is not None:
            self._refuse(reason)
            return None
        return GapFinding(gap, start, end, detail, alters=alters)

    def _edges(self, starts: list[int]) -> list[GapFinding] | None:
        """Findings for the markers at the quote's start and end, checked against the adjacent source words."""
        pattern = self.pattern
        first = starts[0]
        last = starts[-1] + len(pattern.pieces[-1].text)
        findings: list[GapFinding] = []
        for gap, before in ((pattern.lead, True), (pattern.trail, False)):
            if gap is None:
                continue
            pos = first if before else last
            if gap.kind in (GAP_ELLIPSIS, GAP_SIC):
                findings.append(GapFinding(gap, pos, pos, ""))
                continue
            if gap.kind == GAP_LETTERS:
                end = self._word_end(pos)
                if end - pos > policy.MAX_OMITTED_LETTERS:
                    self._refuse("[ ] stands only for letters omitted inside a word")
                    return None
                if not policy.inflection(self.src.text[pos:end]):
                    self._refuse(policy.REASON_NOT_INFLECTION)
                    return None
                findings.append(GapFinding(gap, pos, end, LETTERS, attached_edge=True))
                continue
            finding = self._edge_bracket(gap, pos, before)
            if finding is None:
                return None
            findings.append(finding)
        return findings

    def _edge_bracket(self, gap: Gap, pos: int, before: bool) -> GapFinding | None:
        text = self.src.text
        attached = gap.attached_right if before else gap.attached_left
        if attached:
            ws = self._word_start(pos)
            we = self._word_end(pos)
            quote_side = gap.content + text[pos:we] if before else text[ws:pos] + gap.content
            source_side = text[ws:we]
            reason, detail = policy.classify_bracket(quote_side, source_side)
            if reason is None:
                reason, alters = policy.bracket_alters(quote_side, source_side, detail, self.parties)
            if reason is not None:
                self._refuse(reason)
                return None
            return GapFinding(
                gap, ws if before else pos, pos if before else we, detail, attached_edge=True, alters=alters
            )
        # The bracket stands for the adjacent words of the clause: read it the way that changes the least, among the
        # readings that leave nothing meaningful of the clause hidden next to it.
        spans = policy.clause_words_before(text, pos) if before else policy.clause_words_after(text, pos)
        if before:
            spans.reverse()  # nearest first
        content_words = policy.words(gap.content)
        best: GapFinding | None = None
        best_rank = 2 * len(policy.DETAIL_RANK)
        first_reason: str | None = None
        for k in range(0 if not spans else 1, min(len(spans), policy.MAX_BRACKET_WORDS) + 1):
            covered = spans[:k]
            beyond = spans[k : k + policy.MAX_BRACKET_WORDS]
            if covered:
                s, e = (covered[-1][0], pos) if before else (pos, covered[-1][1])
            else:
                s = e = pos
            reason, detail = policy.classify_bracket(gap.content, text[s:e])
            if reason is None and detail not in (SAME, FORM):
                # Words of the same source words (or another form of them) end the quote there like an exact quote
                # would; anything else claims to stand for what is next to it, which must not hide a negation.
                reason = policy.hidden_change(content_words, [text[a:b].lower() for a, b in beyond])
            alters = ""
            if reason is None:
                reason, alters = policy.bracket_alters(gap.content, text[s:e], detail, self.parties)
            if reason is not None:
                first_reason = first_reason or reason
                continue
            # A reading the verifier can vouch for beats one it cannot; then the one that changes the least.
            rank = policy.DETAIL_RANK[detail] + (len(policy.DETAIL_RANK) if alters else 0)
            if rank < best_rank:
                # The words the bracket stands for are part of the passage (`[a] party` for "A party").
                best, best_rank = GapFinding(gap, s, e, detail, attached_edge=True, alters=alters), rank
        if best is None:
            self._refuse(first_reason or "an alteration changes the meaning")
        return best

    def _inner_findings(self, starts: list[int]) -> list[GapFinding]:
        findings = []
        pieces = self.pattern.pieces
        for i, gap in enumerate(self.pattern.gaps):
            finding = self._check_gap(gap, starts[i] + len(pieces[i].text), starts[i + 1], final=True)
            if finding is not None:  # always: the search accepted this gap
                findings.append(finding)
        return findings

    # -- candidates ----------------------------------------------------------------------------------------------------
    def _occurrences(self, piece: Piece, lo: int, hi: int, reverse: bool) -> Iterator[int]:
        """Accepted start positions ``lo <= a <= hi`` of ``piece``, in order (or reverse order)."""
        use_fold = self.fold or bool(piece.free)
        hay = self.src.haystack(use_fold)
        needle = piece.folded_needle if use_fold else piece.hay_needle
        k = len(needle)
        lo = max(lo, 0)
        hi = min(hi, len(hay) - k)
        if hi < lo:
            return
        if reverse:
            a = hay.rfind(needle, lo, hi + k)
            while a != -1:
                self._spend()
                if self._accept(piece, a):
                    yield a
                a = hay.rfind(needle, lo, a + k - 1)
        else:
            a = hay.find(needle, lo, hi + k)
            while a != -1:
                self._spend()
                if self._accept(piece, a):
                    yield a
                a = hay.find(needle, a + 1, hi + k)

    def _accept(self, piece: Piece, a: int) -> bool:
        src = self.src
        text = src.text
        ptext = piece.text
        b = a + len(ptext)
        if text[a:b] != ptext and not self._differences_allowed(piece, a):
            return False
        # Hyphens removed from both skeletons must be compatible: a real hyphen needs a hyphen on the other side, a
        # line-end hyphenation accepts either.
        hyph = src.hyph
        hyph_pos = src.hyph_pos
        for idx in range(bisect_right(hyph_pos, a), bisect_left(hyph_pos, b)):
            p = hyph_pos[idx]
            if hyph[p] == _HYPHEN and piece.hyph.get(p - a, _NO_HYPHEN) == _NO_HYPHEN:
                return False
        for r, flag in piece.hyph.items():
            if flag == _HYPHEN and hyph.get(a + r, _NO_HYPHEN) == _NO_HYPHEN:
                return False
        if piece.hyphen_after and b not in hyph and text[b : b + 1] != "-":
            return False
        # A hyphen that joined a word is inside it (`race-neutral`, and the line-end `African-\nAmerican` or
        # `edu-\ncational`): no quote or omission starts or ends there. A removed dash between words is a boundary.
        spaced, compound = src.spaced, src.compound
        if (piece.bound_left and (a in compound or (a not in hyph and not is_token_boundary(text, a, spaced)))) or (
            piece.bound_right
            and not piece.hyphen_after
            and (b in compound or (b not in hyph and not is_token_boundary(text, b, spaced)))
        ):
            self._refuse(REASON_BOUNDARY)
            return False
        return True

    def _differences_allowed(self, piece: Piece, a: int) -> bool:
        """Whether the source's characters at ``a`` differ from the piece only where allowed: letters in case (case-
        insensitive tier, or a bracketed letter), and quotation marks double for single (never an apostrophe)."""
        text = self.src.text
        ptext = piece.text
        free = piece.free
        for i, (s, p) in enumerate(zip(text[a : a + len(ptext)], ptext, strict=True)):
            if s == p:
                continue
            if s in _QUOTE_MARKS and p in _QUOTE_MARKS:
                if is_apostrophe(text, a + i, self.src.spaced) or is_apostrophe(ptext, i, piece.spaced):
                    return False
                continue
            if (self.fold or i in free) and s.lower() == p.lower():
                continue
            return False
        return True

    def quote_marks_swapped(self, starts: list[int]) -> list[tuple[int, str]]:
        """Canonical positions where the quote wrote a double quotation mark for a single one or back."""
        swapped = []
        text = self.src.text
        for piece, a in zip(self.pattern.pieces, starts, strict=True):
            for i, (s, p) in enumerate(zip(text[a : a + len(piece.text)], piece.text, strict=True)):
                if s != p and s in _QUOTE_MARKS and p in _QUOTE_MARKS:
                    swapped.append((a + i, p))
        return swapped

    def layout_used(self, starts: list[int]) -> bool:
        """Whether a line-end hyphenation was joined or a running head skipped inside a matched piece."""
        src = self.src
        for piece, a in zip(self.pattern.pieces, starts, strict=True):
            b = a + len(piece.text)
            if bisect_left(src.cuts, b) > bisect_right(src.cuts, a):
                return True
            for idx in range(bisect_right(src.hyph_pos, a), bisect_left(src.hyph_pos, b)):
                p = src.hyph_pos[idx]
                if src.hyph[p] == _LINE_HYPHEN and piece.hyph.get(p - a, _NO_HYPHEN) == _NO_HYPHEN:
                    return True
        return False
