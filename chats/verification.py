"""Character-verifiable quote verification against cited source text.

An assistant's quote only counts if it can be found in the text of the source it cites. This module decides
whether a quote occurs in a source and, if it does, returns the offsets ``start``/``end`` into the ORIGINAL
source so that ``source[start:end]`` is the passage the quote came from (a reviewer can highlight it).

Matching is a cascade; the first tier that finds the quote wins:

``exact_match`` (confidence 1.0)
    The (whitespace-stripped) quote occurs verbatim in the source, found with ``str.find``. Offsets a model
    claimed are never trusted or sliced.

``tolerant_match`` (0 < confidence < 1)
    The quote occurs once *formatting-only* differences are ignored. Both source and quote are reduced to a
    canonical form: NFKC; curly/straight quotes, primes and backticks unified; dash variants unified; runs of
    whitespace (including line breaks) collapsed, and dropped next to punctuation; soft hyphens and zero-width
    characters dropped; words hyphenated across a line break joined (``admis-\\nsions`` matches both
    ``admissions`` and ``admis-sions``, so ``African-\\nAmerican`` still matches ``African-American``); running
    heads of slip opinions and reporters skipped (``Cite as: ...`` lines, ``(Slip Opinion)`` lines, bare page
    numbers, star-paging lines such as ``[590 F.Supp.3d 861]``, and short lines that repeat several times next to
    blank lines, e.g. ``Opinion of the Court``). On top of that the quote may use Bluebook alterations:
    ``[t]he`` (a bracketed single letter matches that letter in either case) and ``[the Court]`` (a bracketed
    phrase stands for up to :data:`MAX_BRACKET_WORDS` source words), and ellipses (``...``, ``…``, ``. . .``)
    marking omissions: the segments must occur in order, each within :data:`MAX_ELLIPSIS_GAP` canonical
    characters of the previous one. Finally a case-insensitive pass is tried.

Anything else is ``None``. Tolerance is for formatting, never for words: an added, dropped or changed word or
number does not verify, however similar; there are no fuzzy similarity scores.

Confidence scale (tolerant tiers start at 0.98 and lose a fixed amount per kind of tolerance used)::

    1.00  exact_match
    0.98  tolerant: formatting only (whitespace, quotes, dashes, NFKC, soft hyphens, zero-width characters)
    0.95  ... plus a line-break hyphenation joined or a running head skipped inside the passage   (-0.03)
    0.90  ... bracketed alterations used                                                           (-0.08)
    0.87  ... ellipsis omissions used                                                              (-0.11)
    <=0.78 case-insensitive match (a case-only difference)                                         (-0.20)
    0.50  floor: combinations never go below it

A quote that itself contains running-head text (copied along with the passage) is matched against the source
with nothing skipped. Quotes are never stripped of lines: that could silently drop a quoted number that happened to
sit on a line of its own. (The source side cannot avoid that trade-off: a bare number on a line of its own between
blank lines is taken for a page number.)

Cost is linear in the source size: the source is normalized once (:meth:`NormalizedSource.build`: one regex
tokenizer pass building the canonical string and a piecewise map back to original offsets), and every search is
``str.find``/``str.rfind`` over the canonical string. The structured tiers (brackets, ellipses) anchor on the longest
literal piece of the quote and look for the others in bounded windows; a per-quote search budget keeps pathological
inputs bounded (they then fail closed: ``None``).
"""

from __future__ import annotations

import re
import string
import unicodedata
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "EXACT_MATCH",
    "MAX_BRACKET_WORDS",
    "MAX_ELLIPSIS_GAP",
    "TOLERANT_MATCH",
    "NormalizedSource",
    "QuoteMatch",
    "verify_quote",
]

EXACT_MATCH = "exact_match"
TOLERANT_MATCH = "tolerant_match"

# --- Confidence scale (see module docstring) --------------------------------------------------------------------------
_CONF_TOLERANT = 0.98
_PENALTY_LAYOUT = 0.03
_PENALTY_BRACKETS = 0.08
_PENALTY_ELLIPSIS = 0.11
_PENALTY_CASE = 0.20
_CONF_FLOOR = 0.50

# --- Search bounds ----------------------------------------------------------------------------------------------------
#: Maximum canonical characters omitted by one ellipsis: omissions are short in real quoting, and the bound keeps a
#: quote from being stitched together from words scattered over the whole document.
MAX_ELLIPSIS_GAP = 1500
#: Maximum source words a bracketed phrase (``[the Court]``) may stand for.
MAX_BRACKET_WORDS = 8
# Characters a bracketed phrase may stand for: MAX_BRACKET_WORDS long words with their separators.
_MAX_BRACKET_CHARS = 200
# Candidate positions examined per structured search: enough for any real quote, and a hard stop for adversarial
# input (e.g. "a ... a ... a" against a source made of "a"s), which then fails closed.
_SEARCH_BUDGET = 20_000
# More pieces than this (brackets + ellipses) is not a quote but a collage; refuse rather than recurse deeply.
_MAX_PIECES = 100
# Lines longer than this are body text, never running heads.
_MAX_HEAD_LINE = 120
# A short line must repeat this often (next to blank lines) to count as a running head.
_HEAD_MIN_REPEATS = 3

# --- Character classes ------------------------------------------------------------------------------------------------
_QUOTE_MAP: dict[str, str] = {
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u2035`\u00b4\u02bc\u02b9\uff07", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb\u301d\u301e\uff02", '"'),
}
# Real hyphens: at the end of a line they may be typesetting hyphenation (``admis-\nsions``).
_HYPHENS = frozenset("-\u2010\u2011")
# Dashes: unified with the hyphen, but never treated as line-end hyphenation.
_DASHES = frozenset("\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63\uff0d")
_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u180e")
_SOFT_HYPHEN = "\u00ad"
# Whitespace next to these is dropped, so `U. S.` == `U.S.` and `\u201c \u2018purpose` == `"'purpose`. Brackets are
# not in the set on purpose: whether a Bluebook bracket is attached to a word (`impose[d]`) or not (`the [Court]`)
# matters.
_PUNCT = frozenset(".,;:!?'\"()-")
# ...except between digits, where `3. 5` and `3.5` (or `1, 000` and `1,000`) may mean different things.
_NUM_SEPARATORS = frozenset(".,:")
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")

# Hyphen flags in the canonical "skeleton": a hyphen between two letters is removed from the canonical text and
# remembered here, so that one str.find serves `admissions`, `admis-sions` and `African-American` alike; candidate
# hits are then checked for compatible flags.
_NO_HYPHEN = 0
_HYPHEN = 1  # a hyphen/dash the text really has: must be matched by a hyphen
_LINE_HYPHEN = 2  # a hyphen at a line end inside a word: may be matched with or without the hyphen

# Ordinary ASCII (not whitespace, not punctuation that affects spacing, not hyphens or quote-like characters) is
# copied in bulk: a run of such characters, possibly with single spaces inside, needs no per-character work.
_PLAIN_CHARS = re.escape(string.ascii_letters + string.digits + "#$%&*+/<=>@[]^_{|}~\\")
_TOKEN = re.compile(rf"(?P<plain>[{_PLAIN_CHARS}]+(?: [{_PLAIN_CHARS}]+)*)|(?P<ws>\s+)|(?P<other>.)", re.DOTALL)

_PATTERN_HEAD = re.compile(
    r"""^\s*(?:
        Cite\ as:\s.{0,100}                                   # Cite as: 570 U. S. ____ (2013)   3
      | \(Slip\ Opinion\).{0,100}                             # (Slip Opinion)   OCTOBER TERM, 2012   1
      | [-\u2013\u2014]?\ ?\d{1,4}\ ?[-\u2013\u2014]?         # bare page number, optionally - 12 -
      | Page\ \d{1,4}(?:\ of\ \d{1,4})?                       # Page 3 of 10
      | \[\*?\d{1,4}\ [A-Za-z][^\[\]\n]{0,30}?\ \*?\d{1,6}\]  # star paging: [590 F.Supp.3d 861]
    )\s*$""",
    re.VERBOSE,
)
_EDGE_PAGE_NUMBER = re.compile(r"^\d{1,4} +| +\d{1,4}$")
_SINGLE_LETTER_BRACKET = re.compile(r"\[([^\W\d_])\]")
_ELLIPSIS = re.compile(r"\.{3,}")
_ELLIPSIS_OR_BRACKET = re.compile(r"\.{3,}|\[[^\[\]]{0,200}\]")


@dataclass(frozen=True, slots=True)
class QuoteMatch:
    """Where and how a quote was found.

    ``source[start:end]`` (offsets into the original source) spans the passage from its first matched character to
    its last, including anything skipped inside it (running heads, omitted text).
    """

    method: str  # EXACT_MATCH | TOLERANT_MATCH
    confidence: float  # 1.0 for exact; 0 < c < 1 for tolerant, lower the more tolerance was needed
    start: int
    end: int


def _fold(text: str) -> str:
    """Lower-case without changing the length, so folded indices equal canonical indices."""
    folded = text.lower()
    if len(folded) == len(text):  # lower() never shrinks a string, so equal length means 1:1
        return folded
    # Rare characters (e.g. U+0130) lower-case to two characters: keep those as they are.
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


class _Canon:
    """A canonical form of a text plus the mapping of each canonical character back to the original text."""

    __slots__ = ("_folded", "cuts", "hyph", "hyph_pos", "seg_canon", "seg_end", "seg_linear", "seg_orig", "text")

    def __init__(
        self,
        text: str,
        segments: tuple[array[int], array[int], array[int], bytearray],
        hyph: dict[int, int],
        hyph_pos: list[int],
        cuts: list[int],
    ) -> None:
        self.text = text
        # The offset map is piecewise: segment k starts at canonical index seg_canon[k] and came from
        # original[seg_orig[k]:seg_end[k]]; a linear segment is a verbatim copy (char i <-> seg_orig + i - seg_canon),
        # any other (collapsed whitespace, NFKC expansion) maps each of its characters to the whole original range.
        # One entry per emitted piece instead of two integers per character keeps building fast and small.
        self.seg_canon, self.seg_orig, self.seg_end, self.seg_linear = segments
        self.hyph = hyph  # canonical position p -> flag of a hyphen removed between text[p-1] and text[p]
        self.hyph_pos = hyph_pos  # sorted keys of hyph
        self.cuts = cuts  # canonical positions where layout was skipped: running-head lines, soft-hyphen line breaks
        self._folded: str | None = None

    @property
    def folded(self) -> str:
        if self._folded is None:
            self._folded = _fold(self.text)
        return self._folded

    def orig_start(self, i: int) -> int:
        """Original offset where canonical character ``i`` begins."""
        k = bisect_right(self.seg_canon, i) - 1
        if self.seg_linear[k]:
            return self.seg_orig[k] + i - self.seg_canon[k]
        return self.seg_orig[k]

    def orig_end(self, i: int) -> int:
        """Original offset just past canonical character ``i``."""
        k = bisect_right(self.seg_canon, i) - 1
        if self.seg_linear[k]:
            return self.seg_orig[k] + i - self.seg_canon[k] + 1
        return self.seg_end[k]


class _Normalizer:
    """Streaming builder of a :class:`_Canon`.

    Whitespace and hyphens are held back ("pending") until the next visible character is known, because whether a
    space survives and whether a hyphen joins two halves of a word depends on both neighbours.
    """

    __slots__ = (
        "cuts",
        "hy_end",
        "hy_newline",
        "hy_prev_alpha",
        "hy_real",
        "hy_start",
        "hyph",
        "hyph_pos",
        "last",
        "last2",
        "n_out",
        "out",
        "seg_canon",
        "seg_end",
        "seg_linear",
        "seg_orig",
        "shy",
        "ws_end",
        "ws_start",
    )

    def __init__(self) -> None:
        self.out: list[str] = []
        self.seg_canon: array[int] = array("q")
        self.seg_orig: array[int] = array("q")
        self.seg_end: array[int] = array("q")
        self.seg_linear = bytearray()
        self.hyph: dict[int, int] = {}
        self.hyph_pos: list[int] = []
        self.cuts: list[int] = []
        self.n_out = 0
        self.last = ""  # last canonical character emitted
        self.last2 = ""  # the one before it
        self.ws_start = -1  # pending whitespace run (original offsets), -1 if none
        self.ws_end = -1
        self.hy_start = -1  # pending hyphen/dash run, -1 if none
        self.hy_end = -1
        self.hy_real = False  # only real hyphens (not dashes) in the run
        self.hy_newline = False  # a line break followed the hyphen
        self.hy_prev_alpha = False  # a letter preceded the hyphen
        self.shy = False  # a soft hyphen was just seen: following whitespace joins the word

    # -- input events ------------------------------------------------------------------------------------------------
    def whitespace(self, o_start: int, o_end: int, newline: bool) -> None:
        if self.hy_start >= 0:
            # Whitespace after a hyphen is always dropped (the hyphen is punctuation); remember a line break for
            # hyphenation.
            self.hy_newline = self.hy_newline or newline
            return
        if self.shy:
            # `Hop\u00ad\nwood`: the soft hyphen marks a hyphenation point, the line break (or the space a re-typed
            # quote put in its place) is not a space.
            self.cuts.append(self.n_out)
            return
        if self.ws_start < 0:
            self.ws_start = o_start
        self.ws_end = o_end

    def skip_line(self, o_start: int, o_end: int) -> None:
        """A running-head line: behaves as a line break, and is remembered for the layout penalty."""
        self.cuts.append(self.n_out)
        self.whitespace(o_start, o_end, True)

    def soft_hyphen(self) -> None:
        self.shy = True

    def hyphen(self, o_start: int, o_end: int, real: bool) -> None:
        self.shy = False
        if self.hy_start >= 0:  # `--`, `— —`: one dash
            self.hy_end = o_end
            self.hy_real = self.hy_real and real
            return
        self.ws_start = -1  # whitespace before a hyphen is dropped
        self.hy_start = o_start
        self.hy_end = o_end
        self.hy_real = real
        self.hy_newline = False
        self.hy_prev_alpha = self.last.isalpha()

    def visible(self, s: str, o_start: int, o_end: int, linear: bool) -> None:
        """Emit canonical text ``s``; ``linear`` if it is a verbatim copy of ``original[o_start:o_end]``."""
        self.shy = False
        first = s[0]
        if self.hy_start >= 0:
            if self.hy_prev_alpha and first.isalpha():
                # Hyphen inside a word: removed from the canonical text, flag kept for the candidate check.
                flag = _LINE_HYPHEN if self.hy_real and self.hy_newline else _HYPHEN
                self.hyph[self.n_out] = flag
                self.hyph_pos.append(self.n_out)
            else:
                self._emit("-", self.hy_start, self.hy_end, False)
            self.hy_start = -1
        elif self.ws_start >= 0:
            if self._keep_space(first):
                self._emit(" ", self.ws_start, self.ws_end, False)
            self.ws_start = -1
        self._emit(s, o_start, o_end, linear)

    def combining(self, marks: str, o_start: int, o_end: int) -> None:
        """Combining marks after an already emitted base character: compose them with it (NFKC)."""
        if self.n_out == 0 or self.ws_start >= 0 or self.hy_start >= 0:
            self.normalized(unicodedata.normalize("NFKC", marks), o_start, o_end)
            return
        base_start = self.seg_orig[-1] if not self.seg_linear[-1] else self.seg_end[-1] - 1
        base = self._pop_last()
        self.normalized(unicodedata.normalize("NFKC", base + marks), base_start, o_end)

    def normalized(self, nf: str, o_start: int, o_end: int) -> None:
        """Emit the NFKC expansion of ``original[o_start:o_end]``, classifying each resulting character."""
        for ch in nf:
            if ch.isspace():
                self.whitespace(o_start, o_end, ch in _LINE_BREAKS)
            elif ch in _QUOTE_MAP:
                self.visible(_QUOTE_MAP[ch], o_start, o_end, False)
            elif ch in _HYPHENS or ch in _DASHES:
                self.hyphen(o_start, o_end, ch in _HYPHENS)
            elif ch in _ZERO_WIDTH or ch == _SOFT_HYPHEN:
                continue
            else:
                self.visible(ch, o_start, o_end, False)

    def finish(self) -> _Canon:
        if self.hy_start >= 0:  # a trailing hyphen stays; trailing whitespace goes
            self._emit("-", self.hy_start, self.hy_end, False)
        segments = (self.seg_canon, self.seg_orig, self.seg_end, self.seg_linear)
        return _Canon("".join(self.out), segments, self.hyph, self.hyph_pos, self.cuts)

    # -- internals -------------------------------------------------------------------------------------------------
    def _keep_space(self, nxt: str) -> bool:
        last = self.last
        if not last:
            return False  # leading whitespace
        if last in _PUNCT or nxt in _PUNCT:
            return last in _NUM_SEPARATORS and self.last2.isdigit() and nxt.isdigit()
        return True

    def _emit(self, s: str, o_start: int, o_end: int, linear: bool) -> None:
        k = len(s)
        self.out.append(s)
        self.seg_canon.append(self.n_out)
        self.seg_orig.append(o_start)
        self.seg_end.append(o_end)
        self.seg_linear.append(linear)
        self.n_out += k
        self.last2 = s[-2] if k >= 2 else self.last
        self.last = s[-1]

    def _pop_last(self) -> str:
        piece = self.out.pop()
        ch = piece[-1]
        if len(piece) > 1:
            self.out.append(piece[:-1])
        if self.seg_canon[-1] == self.n_out - 1:  # the character was a segment of its own
            self.seg_canon.pop()
            self.seg_orig.pop()
            self.seg_end.pop()
            self.seg_linear.pop()
        elif self.seg_linear[-1]:
            self.seg_end[-1] -= 1
        self.n_out -= 1
        tail = "".join(self.out[-2:])[-2:]  # the pieces are non-empty, so two pieces hold the last two chars
        self.last = tail[-1:] if tail else ""
        self.last2 = tail[-2:-1] if len(tail) >= 2 else ""
        return ch


def _normalize(text: str, skipped: list[tuple[int, int]]) -> _Canon:
    """Canonical form of ``text``; ``skipped`` are (start, end) original ranges of running-head lines, sorted."""
    nz = _Normalizer()
    n = len(text)
    pos = 0
    drops = iter(skipped)
    next_drop = next(drops, (n, n))
    match = _TOKEN.match
    combining = unicodedata.combining
    while pos < n:
        if pos >= next_drop[0]:
            nz.skip_line(next_drop[0], next_drop[1])
            pos = max(pos, next_drop[1])
            next_drop = next(drops, (n, n))
            continue
        m = match(text, pos, next_drop[0])
        if m is None:  # pragma: no cover - the `other` alternative matches any character
            break
        end = m.end()
        kind = m.lastgroup
        if kind == "plain":
            nz.visible(m.group(), pos, end, True)
        elif kind == "ws":
            run = m.group()
            nz.whitespace(pos, end, not _LINE_BREAKS.isdisjoint(run))
        else:
            ch = text[pos]
            if ch in _QUOTE_MAP:
                nz.visible(_QUOTE_MAP[ch], pos, end, True)
            elif ch in _HYPHENS:
                nz.hyphen(pos, end, True)
            elif ch in _DASHES:
                nz.hyphen(pos, end, False)
            elif ch in _ZERO_WIDTH:
                pass
            elif ch == _SOFT_HYPHEN:
                nz.soft_hyphen()
            elif ch < "\x80":
                nz.visible(ch, pos, end, True)
            else:
                # Non-ASCII: normalize the character together with its combining marks (NFKC composes them).
                limit = next_drop[0]
                while end < limit and combining(text[end]):
                    end += 1
                if combining(ch):
                    nz.combining(text[pos:end], pos, end)
                else:
                    nz.normalized(unicodedata.normalize("NFKC", text[pos:end]), pos, end)
        pos = end
    return nz.finish()


def _line_key(line: str) -> str:
    """What a running head looks like without layout: collapsed whitespace, no leading/trailing page number."""
    return _EDGE_PAGE_NUMBER.sub("", " ".join(line.split()))


def _is_head_key(key: str) -> bool:
    # At least a short word's worth of letters: `A`, `II`, `* * *` and rule lines are section marks, not heads.
    return 5 <= len(key) <= 80 and sum(ch.isalpha() for ch in key) >= 3


def _lines(text: str) -> Iterator[tuple[int, str]]:
    pos = 0
    for line in text.splitlines(keepends=True):
        yield pos, line
        pos += len(line)


def _find_running_heads(text: str) -> list[tuple[int, int]]:
    """Original (start, end) ranges of the running-head lines of a source, sorted."""
    lines = list(_lines(text))
    blank = [not line.strip() for _, line in lines]
    skipped: dict[int, tuple[int, int]] = {}
    repeated: list[tuple[int, str]] = []
    counts: Counter[str] = Counter()
    for i, (start, line) in enumerate(lines):
        if blank[i] or len(line) > _MAX_HEAD_LINE:
            continue
        if _PATTERN_HEAD.match(line):
            skipped[i] = (start, start + len(line))
            continue
        # Running heads are set off by blank lines; a short line ending a paragraph (`Id., at 315.`) is not.
        if (i > 0 and blank[i - 1]) or (i + 1 < len(lines) and blank[i + 1]) or i in (0, len(lines) - 1):
            key = _line_key(line)
            if _is_head_key(key):
                counts[key] += 1
                repeated.append((i, key))
    head_keys = frozenset(key for key, count in counts.items() if count >= _HEAD_MIN_REPEATS)
    for i, key in repeated:
        if key in head_keys:
            start, line = lines[i]
            skipped[i] = (start, start + len(line))
    return [skipped[i] for i in sorted(skipped)]


# --- Patterns: a quote as literal pieces separated by gaps ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Gap:
    max_chars: int
    max_words: int | None  # None: any content (ellipsis); else a word budget (bracketed phrase)
    ellipsis: bool
    attached_left: bool  # the marker touches the preceding word (`impose[d]`)
    attached_right: bool


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str
    folded: str
    hyph: dict[int, int]  # relative position -> hyphen flag of the quote
    free: tuple[int, ...]  # relative positions of bracketed single letters: either case matches
    bound_left: bool  # must start at a word boundary of the source
    bound_right: bool
    hyphen_after: bool  # the quote ended the piece with a hyphen (`edu-`), stripped: the source must have one there


@dataclass(frozen=True, slots=True)
class _Pattern:
    pieces: tuple[_Piece, ...]
    gaps: tuple[_Gap, ...]  # gaps[i] separates pieces[i] and pieces[i + 1]
    brackets: bool
    ellipsis: bool


def _merge_gaps(a: _Gap, b: _Gap) -> _Gap:
    ellipsis = a.ellipsis or b.ellipsis
    return _Gap(
        max_chars=MAX_ELLIPSIS_GAP if ellipsis else a.max_chars + b.max_chars,
        max_words=None if ellipsis or a.max_words is None or b.max_words is None else a.max_words + b.max_words,
        ellipsis=ellipsis,
        attached_left=a.attached_left,
        attached_right=b.attached_right,
    )


def _make_piece(q: _Canon, ps: int, pe: int, free: set[int], left: _Gap | None, right: _Gap | None) -> _Piece:
    # A quote cut right after a line-end hyphen (`... about its edu-`) or a dash (`a nominee -`): the source skeleton
    # has no hyphen character there when a letter follows, so the hyphen becomes a requirement instead of text.
    hyphen_after = pe - ps >= 2 and q.text[pe - 1] == "-" and q.text[pe - 2].isalpha()
    if hyphen_after:
        pe -= 1
    text = q.text[ps:pe]
    return _Piece(
        text=text,
        folded=_fold(text),
        hyph={p - ps: q.hyph[p] for p in q.hyph_pos if ps < p < pe},
        free=tuple(sorted(p - ps for p in free if ps <= p < pe)),
        bound_left=left is not None and (left.ellipsis or not left.attached_right),
        bound_right=right is not None and (right.ellipsis or not right.attached_left),
        hyphen_after=hyphen_after,
    )


def _plain_pattern(q: _Canon) -> _Pattern | None:
    if not q.text:
        return None
    return _Pattern((_make_piece(q, 0, len(q.text), set(), None, None),), (), brackets=False, ellipsis=False)


def _structured_pattern(q: _Canon, free: set[int], interpret_brackets: bool) -> _Pattern | None:
    """Split a canonical quote at ellipses (and bracketed phrases) into pieces and gaps."""
    text = q.text
    marker = _ELLIPSIS_OR_BRACKET if interpret_brackets else _ELLIPSIS
    items: list[tuple[int, int] | _Gap] = []
    pos = 0
    for m in marker.finditer(text):
        items.append((pos, m.start()))
        # `...`, and `[...]` as modern style writes it, are omissions; any other bracket is an alteration.
        content = m.group().strip("[]").replace(" ", "")
        is_ellipsis = len(content) >= 3 and content == "." * len(content)
        items.append(
            _Gap(
                max_chars=MAX_ELLIPSIS_GAP if is_ellipsis else _MAX_BRACKET_CHARS,
                max_words=None if is_ellipsis else MAX_BRACKET_WORDS,
                ellipsis=is_ellipsis,
                attached_left=m.start() > 0 and text[m.start() - 1] != " ",
                attached_right=m.end() < len(text) and text[m.end()] != " ",
            )
        )
        pos = m.end()
    items.append((pos, len(text)))

    # Strip pieces; empty pieces disappear and the gaps around them merge.
    spans: list[tuple[int, int]] = []
    gaps: list[_Gap | None] = [None]  # gaps[i] precedes spans[i]; a final entry follows the last span
    for item in items:
        if isinstance(item, _Gap):
            gaps[-1] = item if gaps[-1] is None else _merge_gaps(gaps[-1], item)
            continue
        ps, pe = item
        while ps < pe and text[ps] == " ":
            ps += 1
        while pe > ps and text[pe - 1] == " ":
            pe -= 1
        if ps < pe:
            spans.append((ps, pe))
            gaps.append(None)
    if not spans or len(spans) > _MAX_PIECES or not any(ch.isalnum() for ch in text):
        return None
    inner = gaps[1:-1]
    pieces = tuple(_make_piece(q, ps, pe, free, gaps[i], gaps[i + 1]) for i, (ps, pe) in enumerate(spans))
    all_gaps = [g for g in gaps if g is not None]
    return _Pattern(
        pieces=pieces,
        gaps=tuple(g for g in inner if g is not None),
        brackets=bool(free) or any(not g.ellipsis for g in all_gaps),
        ellipsis=any(g.ellipsis for g in all_gaps),
    )


# --- Searching --------------------------------------------------------------------------------------------------------


class _BudgetExhausted(Exception):
    pass


class _Search:
    """One pattern against one canonical source, case-sensitive or not."""

    __slots__ = ("budget", "fold", "pattern", "src")

    def __init__(self, src: _Canon, pattern: _Pattern, fold: bool) -> None:
        self.src = src
        self.pattern = pattern
        self.fold = fold
        self.budget = _SEARCH_BUDGET

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
                return [*left, a, *right]
        except _BudgetExhausted:
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
            if not self._gap_ok(gap, prev_end, a):
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
            if not self._gap_ok(gap, a + k, next_start):
                continue
            rest = self._extend_left(i - 1, a)
            if rest is not None:
                return [*rest, a]
        return None

    def _gap_ok(self, gap: _Gap, start: int, end: int) -> bool:
        return gap.max_words is None or len(self.src.text[start:end].split()) <= gap.max_words

    def _occurrences(self, piece: _Piece, lo: int, hi: int, reverse: bool) -> Iterator[int]:
        """Accepted start positions ``lo <= a <= hi`` of ``piece``, in order (or reverse order)."""
        use_fold = self.fold or bool(piece.free)
        hay = self.src.folded if use_fold else self.src.text
        needle = piece.folded if use_fold else piece.text
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

    def _accept(self, piece: _Piece, a: int) -> bool:
        src = self.src
        text = src.text
        ptext = piece.text
        b = a + len(ptext)
        if piece.free and not self.fold:
            # Found case-insensitively because of the bracketed letters; everything else must match exactly.
            prev = 0
            for f in piece.free:
                if text[a + prev : a + f] != ptext[prev:f]:
                    return False
                prev = f + 1
            if text[a + prev : b] != ptext[prev:]:
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
        # Next to an omission the piece must begin/end a word: `... are` must not match `(sh)are`.
        if (
            piece.bound_left
            and a > 0
            and ptext[0].isalnum()
            and text[a - 1].isalnum()
            and a not in hyph  # a removed hyphen is a word boundary
        ):
            return False
        return not (piece.bound_right and b < len(text) and ptext[-1].isalnum() and text[b].isalnum() and b not in hyph)

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


# --- Public API -------------------------------------------------------------------------------------------------------


class NormalizedSource:
    """A source normalized once, to verify many quotes against it.

    Build with :meth:`build`; :meth:`verify` is then cheap per quote (``str.find`` over the canonical text).
    """

    __slots__ = ("_fallback", "_primary", "source")

    def __init__(self, source: str, primary: _Canon, has_heads: bool) -> None:
        self.source = source
        self._primary = primary
        # A quote may include running-head text itself (it was copied with the passage, or detection took a short
        # repeated heading for a running head): the same source with nothing skipped is the fallback, built only
        # when needed. Quotes are never stripped of lines themselves: that could silently drop a quoted number
        # that happened to sit on a line of its own.
        self._fallback: _Canon | None = None if has_heads else primary

    @classmethod
    def build(cls, source: str) -> NormalizedSource:
        skipped = _find_running_heads(source)
        return cls(source, _normalize(source, skipped), has_heads=bool(skipped))

    def _variants(self) -> Iterator[_Canon]:
        yield self._primary
        if self._fallback is None:
            self._fallback = _normalize(self.source, [])
        if self._fallback is not self._primary:
            yield self._fallback

    def verify(self, quote: str) -> QuoteMatch | None:
        """Find ``quote`` in the source: exact first, then tolerant tiers; ``None`` if it is not there."""
        needle = quote.strip()
        if not needle:
            return None
        found = self.source.find(needle)
        if found != -1:
            return QuoteMatch(EXACT_MATCH, 1.0, found, found + len(needle))
        if not any(ch.isalnum() for ch in needle):
            return None  # no words to verify: `...` or `" "` would match punctuation anywhere

        q = _normalize(needle, [])
        plain = _plain_pattern(q)
        structured: list[_Pattern] | None = None  # built only if the plain tier fails
        # Tiers in decreasing confidence: plain before structured, case-sensitive before case-insensitive.
        for fold in (False, True):
            if plain is not None and (match := self._search_variants([plain], fold)) is not None:
                return match
            if structured is None:
                structured = _structured_patterns(needle, q)
            if structured and (match := self._search_variants(structured, fold)) is not None:
                return match
        return None

    def _search_variants(self, patterns: list[_Pattern], fold: bool) -> QuoteMatch | None:
        for canon in self._variants():
            for pattern in patterns:
                match = self._search(canon, pattern, fold)
                if match is not None:
                    return match
        return None

    def _search(self, canon: _Canon, pattern: _Pattern, fold: bool) -> QuoteMatch | None:
        search = _Search(canon, pattern, fold)
        starts = search.run()
        if starts is None:
            return None
        confidence = _CONF_TOLERANT
        if search.layout_used(starts):
            confidence -= _PENALTY_LAYOUT
        if pattern.brackets:
            confidence -= _PENALTY_BRACKETS
        if pattern.ellipsis:
            confidence -= _PENALTY_ELLIPSIS
        if fold:
            confidence -= _PENALTY_CASE
        last_piece = pattern.pieces[-1]
        start = canon.orig_start(starts[0])
        end = canon.orig_end(starts[-1] + len(last_piece.text) - 1)
        if last_piece.hyphen_after:
            # Include the hyphen the quote ended with (the canonical text may not contain it).
            probe = end
            while probe < len(self.source) and self.source[probe].isspace():
                probe += 1
            if probe < len(self.source) and (self.source[probe] in _HYPHENS or self.source[probe] in _DASHES):
                end = probe + 1
        return QuoteMatch(TOLERANT_MATCH, round(max(confidence, _CONF_FLOOR), 2), start, end)


def _canonical_positions(q: _Canon, raw_positions: list[int]) -> set[int]:
    """Canonical indices of the characters at ``raw_positions`` of the normalized text (if they survived)."""
    if not raw_positions:
        return set()
    wanted = set(raw_positions)
    return {i for i in range(len(q.text)) if q.text[i].isalpha() and q.orig_start(i) in wanted}


def _structured_patterns(needle: str, q: _Canon) -> list[_Pattern]:
    """Patterns for a quote with ellipses and/or Bluebook brackets (``q`` is its canonical form, brackets literal)."""
    patterns: list[_Pattern] = []
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
        if (pattern := _structured_pattern(q_altered, free, interpret_brackets=True)) is not None:
            patterns.append(pattern)
    return patterns


def verify_quote(quote: str, source: str | NormalizedSource) -> QuoteMatch | None:
    """Verify ``quote`` against ``source`` (a string, or a :class:`NormalizedSource` reused across quotes)."""
    if isinstance(source, NormalizedSource):
        return source.verify(quote)
    needle = quote.strip()
    if not needle:
        return None
    # Exact matches need no normalization: don't pay for it.
    found = source.find(needle)
    if found != -1:
        return QuoteMatch(EXACT_MATCH, 1.0, found, found + len(needle))
    return NormalizedSource.build(source).verify(quote)
