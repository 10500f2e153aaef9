"""Normalization: a text's canonical form, with a map from every canonical character back to the original text.

Both the source and the quote are reduced to the same canonical form, so that formatting-only differences disappear:
NFKC; curly/straight quotes, primes and backticks unified (each to its single or double straight form); dash variants
unified; superscript and subscript digits read as footnote calls (layout, like a line break: ``30\u00b3 days`` is
``30 days``, never ``303 days``); vulgar fractions as ASCII (``1\u00bd`` is ``1-1/2``, one number, never ``11/2``);
runs of whitespace (including line breaks) collapsed, and dropped next to punctuation and next to ``§`` and ``¶`` (so
``§ 1983`` equals ``§1983``); soft hyphens, zero-width characters and other invisible format characters (direction
marks, isolates) dropped; a hyphen inside a word removed from the text and remembered as a flag (``admis-\\nsions``
matches both ``admissions`` and ``admis-sions``, ``African-\\nAmerican`` still matches ``African-American``); running
heads of slip opinions and reporters skipped (``Cite as: ...`` lines, ``(Slip Opinion)`` lines, bare page numbers,
star-paging lines such as ``[590 F.Supp.3d 861]``, and short lines without digits that repeat several times next to
blank lines, e.g. ``Opinion of the Court``; a repeated short line with digits, such as a caption date, is text).

Cost is linear in the text size: one regex tokenizer pass builds the canonical string and a piecewise offset map.
"""

from __future__ import annotations

import re
import string
import unicodedata
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator
from collections.abc import Set as AbstractSet

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
# Superscript and subscript digits are footnote calls (`30\u00b3 days`): NFKC would make `30\u00b3` the number 303.
_FOOTNOTE_DIGITS = frozenset("\u00b9\u00b2\u00b3\u2070\u2074\u2075\u2076\u2077\u2078\u2079") | frozenset(
    chr(c) for c in range(0x2080, 0x208A)
)
_SOFT_HYPHEN = "\u00ad"
_FRACTION_SLASH = "\u2044"
# Whitespace next to these is dropped, so `U. S.` == `U.S.`, `\u201c \u2018purpose` == `"'purpose` and
# `\u00a7 1983` == `\u00a71983`. Brackets are not in the set on purpose: whether a Bluebook bracket is attached to a
# word (`impose[d]`) or not (`the [Court]`) matters.
_PUNCT = frozenset(".,;:!?'\"()-\u00a7\u00b6")
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
# Layout inside a line: star paging as case law converted from HTML gives it (`*1047the`, `[*1047]`, `*861`) and
# footnote calls (`(FN3)`, `[FN3]`). A `*` after a letter or a digit is no star page (`5*3`), nor is a pin cite's
# `at *3` to an unpaged database.
# (Lookbehinds are checked in Python, on the few matches: in the pattern they would run at every position.)
_INLINE_LAYOUT = re.compile(r"\[\*\d{2,5}\]|\*\d{2,5}(?![\d.,*])|\(FN\d{1,3}\)|\[FN\d{1,3}\]")
_PIN_BEFORE = re.compile(r"(?:^|\W)at $")


def _fold(text: str) -> str:
    """Lower-case without changing the length, so folded indices equal canonical indices."""
    folded = text.lower()
    if len(folded) == len(text):  # lower() never shrinks a string, so equal length means 1:1
        return folded
    # Rare characters (e.g. U+0130) lower-case to two characters: keep those as they are.
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


class _Canon:
    """A canonical form of a text plus the mapping of each canonical character back to the original text."""

    __slots__ = (
        "_hay",
        "compound",
        "cuts",
        "hyph",
        "hyph_pos",
        "seg_canon",
        "seg_end",
        "seg_linear",
        "seg_orig",
        "spaced",
        "text",
    )

    def __init__(
        self,
        text: str,
        segments: tuple[array[int], array[int], array[int], bytearray],
        hyph: dict[int, int],
        hyph_pos: list[int],
        cuts: list[int],
        spaced: set[int],
        compound: set[int],
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
        # Canonical positions p where the original had whitespace between text[p-1] and text[p] (dropped next to
        # punctuation): `any 'litmus` is `any'litmus`, and that quotation mark is no apostrophe.
        self.spaced = spaced
        # The positions of ``hyph`` where a hyphenated word was joined (`race-neutral`, `edu-\ncational`): a real
        # hyphen between two letters, with no whitespace before it and none after it but a line break. Inside a
        # word: no quote starts or ends there (a dash between two words, `Court \u2014 Middle`, is no such place).
        self.compound = compound
        self._hay: dict[bool, str] = {}

    def haystack(self, fold: bool) -> str:
        """The text the search runs ``str.find`` over: double quotation marks written as single ones (a candidate is
        then checked mark by mark, so that an apostrophe never stands for a quotation mark), lower-cased if
        ``fold``. Same length and indices as :attr:`text`; built once per source and kind."""
        hay = self._hay.get(fold)
        if hay is None:
            hay = self.text.replace('"', "'")
            if fold:
                hay = _fold(hay)
            self._hay[fold] = hay
        return hay

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
        "compound",
        "cuts",
        "hy_end",
        "hy_newline",
        "hy_prev_alpha",
        "hy_real",
        "hy_start",
        "hy_ws_after",
        "hy_ws_before",
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
        "spaced",
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
        self.hy_ws_after = False  # whitespace followed the hyphen
        self.hy_ws_before = False  # whitespace preceded the hyphen
        self.compound: set[int] = set()  # canonical positions of hyphens that joined a hyphenated word
        self.spaced: set[int] = set()  # canonical positions p where whitespace between p-1 and p was dropped
        self.shy = False  # a soft hyphen was just seen: following whitespace joins the word

    # -- input events ------------------------------------------------------------------------------------------------
    def whitespace(self, o_start: int, o_end: int, newline: bool) -> None:
        if self.hy_start >= 0:
            # Whitespace after a hyphen is always dropped (the hyphen is punctuation); remember a line break for
            # hyphenation.
            self.hy_newline = self.hy_newline or newline
            self.hy_ws_after = True
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
        self.hy_ws_before = self.ws_start >= 0
        if self.ws_start >= 0:
            self.ws_start = -1  # whitespace before a hyphen is dropped
            if self.last:
                self.spaced.add(self.n_out)
        self.hy_ws_after = False
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
                if self.hy_real and not self.hy_ws_before and (self.hy_newline or not self.hy_ws_after):
                    self.compound.add(self.n_out)
            else:
                self._emit("-", self.hy_start, self.hy_end, False)
                if self.hy_ws_after:
                    self.spaced.add(self.n_out)
            self.hy_start = -1
        elif self.ws_start >= 0:
            if self._keep_space(first):
                self._emit(" ", self.ws_start, self.ws_end, False)
            elif self.last:
                self.spaced.add(self.n_out)
            self.ws_start = -1
        self._emit(s, o_start, o_end, linear)

    def footnote_call(self, o_start: int, o_end: int) -> None:
        """A superscript or subscript digit: layout that separates what is on either side, like a line break."""
        self.cuts.append(self.n_out)
        self.whitespace(o_start, o_end, False)

    def fraction(self, nf: str, o_start: int, o_end: int) -> None:
        """A vulgar fraction (`\u00bd`, NFKC `1\u20442`), with an ASCII slash: right after a digit it is joined to
        it by a hyphen, so that the whole number and the fraction stay one number (`1\u00bd` is `1-1/2`, never
        `11/2`, and no quote starts or ends inside it)."""
        if self.last.isdigit() and self.ws_start < 0 and self.hy_start < 0:
            self._emit("-", o_start, o_start, False)
        self.normalized(nf.replace("\u2044", "/"), o_start, o_end)

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
            elif ch in _ZERO_WIDTH or ch == _SOFT_HYPHEN or unicodedata.category(ch) == "Cf":
                continue
            else:
                self.visible(ch, o_start, o_end, False)

    def finish(self) -> _Canon:
        if self.hy_start >= 0:  # a trailing hyphen stays; trailing whitespace goes
            self._emit("-", self.hy_start, self.hy_end, False)
        segments = (self.seg_canon, self.seg_orig, self.seg_end, self.seg_linear)
        return _Canon("".join(self.out), segments, self.hyph, self.hyph_pos, self.cuts, self.spaced, self.compound)

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
            elif ch >= "\x80" and unicodedata.category(ch) == "Cf":
                pass  # an invisible format character (a direction mark, an isolate): dropped like a zero-width one
            elif ch in _FOOTNOTE_DIGITS:
                nz.footnote_call(pos, end)
            elif ch < "\x80":
                nz.visible(ch, pos, end, True)
            else:
                # Non-ASCII: normalize the character together with its combining marks (NFKC composes them).
                limit = next_drop[0]
                while end < limit and combining(text[end]):
                    end += 1
                if combining(ch):
                    nz.combining(text[pos:end], pos, end)
                elif ch == _FRACTION_SLASH or unicodedata.decomposition(ch).startswith("<fraction>"):
                    nz.fraction(unicodedata.normalize("NFKC", text[pos:end]), pos, end)
                else:
                    nz.normalized(unicodedata.normalize("NFKC", text[pos:end]), pos, end)
        pos = end
    return nz.finish()


def _line_key(line: str) -> str:
    """What a running head looks like without layout: collapsed whitespace, no leading/trailing page number."""
    return _EDGE_PAGE_NUMBER.sub("", " ".join(line.split()))


def _is_head_key(key: str) -> bool:
    # At least a short word's worth of letters: `A`, `II`, `* * *` and rule lines are section marks, not heads. A line
    # with digits left once its page number is stripped (a caption date `[June 24, 2013]`, `Section 3`) is text: only
    # the page-head patterns may skip those.
    return 5 <= len(key) <= 80 and sum(ch.isalpha() for ch in key) >= 3 and not any(ch.isdigit() for ch in key)


def _lines(text: str) -> Iterator[tuple[int, str]]:
    pos = 0
    for line in text.splitlines(keepends=True):
        yield pos, line
        pos += len(line)


def _is_layout(text: str, start: int) -> bool:
    """Whether the inline-layout match at ``start`` is layout: a bare star page only after a space or a line's
    start, and not as a pin cite (`at *3`)."""
    if text[start] != "*":
        return True
    before = text[start - 1] if start else ""
    return not (before.isalnum() or before in "_*") and _PIN_BEFORE.search(text, max(0, start - 4), start) is None


def find_layout(text: str) -> list[tuple[int, int]]:
    """Original (start, end) ranges of a source's layout, sorted: running-head lines, and star paging and footnote
    calls inside lines (skipped like a line break, so `of *1047the` reads `of the`)."""
    heads = _find_running_heads(text)
    if "*" not in text and "FN" not in text:
        return heads
    inline = [m.span() for m in _INLINE_LAYOUT.finditer(text) if _is_layout(text, m.start())]
    if not inline:
        return heads
    starts = [start for start, _ in heads]
    kept = [span for span in inline if not ((k := bisect_right(starts, span[0]) - 1) >= 0 and heads[k][1] > span[0])]
    return sorted(heads + kept)


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


def after_layout(text: str, pos: int, layout: list[tuple[int, int]]) -> int:
    """Where ``text`` goes on after the layout that follows ``pos`` (running heads, star paging, footnote calls,
    superscript footnote digits, and the whitespace around them): ``pos`` itself when no layout follows."""
    n = len(text)
    resume = p = pos
    while True:
        while p < n and text[p].isspace():
            p += 1
        if p < n and text[p] in _FOOTNOTE_DIGITS:
            while p < n and text[p] in _FOOTNOTE_DIGITS:
                p += 1
        else:
            k = bisect_right(layout, (p, n + 1)) - 1
            if k < 0 or not layout[k][0] <= p < layout[k][1]:
                return resume
            p = layout[k][1]
        resume = p


def before_layout(text: str, pos: int, layout: list[tuple[int, int]]) -> int:
    """Where ``text`` ends before the layout that precedes ``pos`` (see :func:`after_layout`), past the whitespace
    before that layout: ``pos`` itself when no layout precedes it."""
    resume = p = pos
    while True:
        while p > 0 and text[p - 1].isspace():
            p -= 1
        if p > 0 and text[p - 1] in _FOOTNOTE_DIGITS:
            while p > 0 and text[p - 1] in _FOOTNOTE_DIGITS:
                p -= 1
        else:
            k = bisect_right(layout, (p - 1, len(text) + 1)) - 1
            if k < 0 or not layout[k][0] < p <= layout[k][1]:
                return resume
            p = layout[k][0]
        while p > 0 and text[p - 1].isspace():
            p -= 1
        resume = p


# --- Token boundaries -------------------------------------------------------------------------------------------------

# Inside a number these join digits into one token: `4.5`, `10,000`, `42-1983.1`, `12-3-45`, `1/2/2024`, `10:30`.
_NUMBER_JOINERS = frozenset(".,:/-\u2010\u2011\u2012\u2013")
# Inside a word an apostrophe joins letters (`didn't`), except before a possessive `'s`.
_APOSTROPHES = frozenset("'\u2019\u02bc")
# Before a digit, and after anything but a letter or digit, these are minus signs (`-500`, `\u2212500`).
_MINUS_SIGNS = frozenset("-\u2012\u2013\u2212")
# After a hyphen, the rest of a hyphenated word: a letter, directly or on the next line.
_WORD_GOES_ON = re.compile(r"(?:[ \t]*\r?\n[ \t]*)?[^\W\d_]")
# A number goes on across whitespace into its magnitude word: `$1 million` is one number, never `$1`.
_MAGNITUDE = re.compile(r"\s+(?:hundred|thousand|million|billion|trillion)(?![^\W\d_])", re.IGNORECASE)
_MAGNITUDE_WORD = re.compile(r"(?:hundred|thousand|million|billion|trillion)(?![^\W\d_])", re.IGNORECASE)


def is_token_boundary(text: str, i: int, spaced: AbstractSet[int] = frozenset()) -> bool:
    """Whether ``i`` (0 <= i <= len(text)) lies between two tokens of ``text`` rather than inside a word or number.

    ``spaced`` are positions p where whitespace stood between ``text[p-1]`` and ``text[p]`` (a canonical text drops
    it next to punctuation).
    """
    if i <= 0 or i >= len(text):
        return True
    left = text[i - 1]
    right = text[i]
    if (left.isdigit() and right.isspace() and _MAGNITUDE.match(text, i)) or (
        left.isspace() and right in "hHtTmMbB" and _MAGNITUDE_WORD.match(text, i) and _digit_before_space(text, i - 1)
    ):
        return False  # between a number and its magnitude word
    if i in spaced:
        return True
    if left.isalnum():
        if right.isalnum():
            return False
        if right in _HYPHENS and left.isalpha() and _WORD_GOES_ON.match(text, i + 1):
            return False  # inside a hyphenated word: `race` of "race-neutral", `edu` of "edu-\ncational"
        nxt = text[i + 1 : i + 2]
        if right in _NUMBER_JOINERS:
            return not (left.isdigit() and nxt.isdigit() and i + 1 not in spaced)
        if right in _APOSTROPHES:
            if left.isalpha() and nxt.isalpha() and i + 1 not in spaced:
                # A possessive `'s` is a token of its own (`the Court` in "the Court's"); `n't` and other
                # contractions are not (`did` in "didn't" would drop the negation).
                return nxt in "sS" and not text[i + 2 : i + 3].isalpha()
            return True
        return True
    if right.isalpha() and _after_word_hyphen(text, i, spaced):
        return False  # `neutral` of "race-neutral"
    if right.isalnum():
        prev = text[i - 2] if i >= 2 else ""
        if left in _MINUS_SIGNS and right.isdigit() and not (prev.isalnum() and i - 1 not in spaced):
            return False  # a minus sign: `500` of "-500"
        if left in _NUMBER_JOINERS:
            return not (right.isdigit() and prev.isdigit() and i - 1 not in spaced)
        if left in _APOSTROPHES:
            return not (right.isalpha() and prev.isalpha() and i - 1 not in spaced)
    return True


def _after_word_hyphen(text: str, i: int, spaced: AbstractSet[int]) -> bool:
    """Whether ``text[i]`` follows a hyphen that follows a letter, directly or across a line break."""
    j = i
    if text[j - 1].isspace():
        while j > 0 and text[j - 1] in " \t":
            j -= 1
        if j == 0 or text[j - 1] not in _LINE_BREAKS:
            return False
        j -= 1
        while j > 0 and text[j - 1] in " \t\r":
            j -= 1
    elif j in spaced:
        return False
    return j >= 2 and text[j - 1] in _HYPHENS and text[j - 2].isalpha()


def _digit_before_space(text: str, i: int) -> bool:
    """Whether the whitespace run that ends at ``text[i]`` follows a digit."""
    while i > 0 and text[i - 1].isspace():
        i -= 1
    return i > 0 and text[i - 1].isdigit()


def is_apostrophe(text: str, i: int, spaced: AbstractSet[int] = frozenset()) -> bool:
    """Whether ``text[i]`` is an apostrophe: a single quotation mark between two letters (`didn't`)."""
    return (
        text[i] in _APOSTROPHES
        and 0 < i < len(text) - 1
        and text[i - 1].isalpha()
        and text[i + 1].isalpha()
        and i not in spaced
        and i + 1 not in spaced
    )
