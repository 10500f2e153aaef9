"""Rules version 4: an omission judged by what it omits, read on the source's original text.

Formatting (the omission is shown, the quote is not ``altered`` for it): citation sentences only (`Smith v. Jones,
1 A.2d 1 (1999).`, `Id. at 5.`, `See ...`, whatever their parentheticals quote), a whole parenthetical, a list's
items. Altered, with the omitted words shown: who says the kept words (`argues that`, `contends`), the court's
rejection of an argument (`This point is unavailing.`), the words a limiting word governs (`Only residents . . .
may vote` for "Only residents residing in the district may vote"), a condition or a reporting verb a leading
ellipsis drops, and everything version 3 flags (:func:`policy.omission_alters`).
"""

from __future__ import annotations

import re

from lqai_verify.verification import policy
from lqai_verify.verification.results import LIMITED_BEFORE


def _words_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# A party's words reported: the kept words after one of these are the party's, not the court's. In lower case: a
# verb inside its sentence (`Argued October 10, 2012` heads a slip opinion).
_REPORTING = re.compile(
    r"(?<![^\W\d_])(?:argu(?:es|ed|ing)|argue|contend(?:s|ed|ing)?|assert(?:s|ed|ing)?|maintain(?:s|ed|ing)?"
    r"|urg(?:es|ed|ing)|urge|insist(?:s|ed|ing)?|alleg(?:es|ed|ing)|allege|posit(?:s|ed|ing)?"
    # Words that are nouns as often as verbs report only before `that` (`claims that`, not `All claims`).
    r"|(?:claim(?:s|ed)?|suggest(?:s|ed)?|submit(?:s|ted)?|counter(?:s|ed)?|reason(?:s|ed)?|complain(?:s|ed)?"
    r"|respond(?:s|ed)?|repl(?:y|ies|ied)) that"
    r"|takes? the position|according to)(?![^\W\d_])"
)
# The court's rejection of an argument (with version 3's negations, disagreements and holdings).
_REJECTION = re.compile(
    r"(?<![^\W\d_])(?:fails?|failed|unavailing|unpersuasive|unpersuaded|misplaced|meritless|without merit"
    r"|lacks? merit|incorrect|mistaken|wrong|erroneous|flawed|untenable|disagrees?|disagreed|reject(?:s|ed)?"
    r"|not persuaded|cannot accept|decline)(?![^\W\d_])",
    re.IGNORECASE,
)
# Words that limit what follows them in their noun phrase (`Only residents`, `All claims`, `No person`).
_SCOPE_WORDS = _words_set("only solely exclusively merely all every each any no")
_PREDICATE_STARTS = policy.MODALS | _words_set("is are was were has have had be been do does did")
_SCOPE_REACH = 3  # words between the limiting word and the omission that it still governs
# Citation signals (Bluebook Rule 1.2) that open a citation sentence.
_SIGNAL = re.compile(
    r"""^['"\u201c(]*(?:see(?:,? e\.g\.,| also| generally)?|but see|but cf\.|cf\.|accord|compare|contra|e\.g\.,"""
    r"""|id\.|ibid\.)(?![^\W\d_])""",
    re.IGNORECASE,
)
# A case citation opening a sentence: `Smith v. Jones, 1 A.2d 1 (1999)`.
_CASE_CITE = re.compile(r"^[A-Z][^.;]{0,120}? v\. [^;]{1,160}?\d+ [A-Z][\w. ]{0,20}\d* ?\d+")
_CITE_MARK = re.compile(r"\d|\bid\.|\bsupra\b|\bpost\b|\bante\b|\u00a7", re.IGNORECASE)
_PARENTHETICAL = re.compile(r"\([^()]*\)")
_SPACES = re.compile(r"\s+")
# A sentence end in original text: `.`, `?`, `!` and closing marks, whitespace, then what may start a sentence.
_BOUNDARY = re.compile(r"""[.?!]['"\u201d\u2019)\]]*\s+(?=['"\u201c\u2018(\[]*[A-Z])""")
# Words a period ends without ending the sentence.
_ABBREVIATIONS = _words_set(
    """v vs no nos stat gen ann co inc corp ltd mr mrs ms dr st ct app supp cir rev comm'n dep't ed eds e.g i.e cf
    art ch cl pt p pp para sec seq et al jr sr u.s u.s.c n.c f.2d f.3d f.4th s.w.2d s.w.3d a.2d a.3d l.ed s.ct
    reg fed civ crim proc evid r j jj c.j"""
)
_ENUMERATION = re.compile(r"""\s*(?:\(\w{1,4}\)|\w{1,4}[.)])\s+""")
_OPENING = re.compile(
    r"""['"(\[\u201c\u2018]*(?P<words>except|unless|if|only\s+if|notwithstanding|subject\s+to|provided|absent"""
    r"""|to\s+the\s+extent|so\s+long\s+as|as\s+long\s+as|save|other\s+than|barring)(?![^\W\d_])""",
    re.IGNORECASE,
)
_LOOKBACK = 1500
_CLOSING = re.compile(r"""[.?!]['"\u201d\u2019)\]]*\s+""")
_CLOSED = re.compile(r"""[.?!]['"\u201d\u2019)\]]*$""")


def sentence_start(source: str, pos: int) -> int:
    """Where the sentence of ``source`` holding ``pos`` starts: after the last sentence end before it that is not
    an abbreviation's or a citation's period (`v.`, `Stat.]`, `U.S.`, an initial), within a window; a paragraph
    break ends a sentence too."""
    lo = max(0, pos - _LOOKBACK)
    begin = lo
    # The lookahead of a boundary reads past ``pos`` (a search that ended there could not see what follows).
    for m in _BOUNDARY.finditer(source, lo, min(len(source), pos + 8)):
        if m.end() <= pos and not _abbreviation(source, m.start()):
            begin = m.end()
    paragraph = source.rfind("\n\n", lo, pos)
    if paragraph != -1 and paragraph + 2 > begin:
        begin = paragraph + 2
    while begin < pos and source[begin].isspace():
        begin += 1
    return begin


def _abbreviation(source: str, period: int) -> bool:
    word_start = period
    while word_start > 0 and not source[word_start - 1].isspace() and source[word_start - 1] not in "([":
        word_start -= 1
    word = source[word_start:period].lower().strip("\u201c\"'")
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()) or "." in word


def sentences(text: str) -> list[str]:
    """``text`` (original) cut at sentence ends that are not an abbreviation's (see :func:`sentence_start`), nor
    inside a parenthetical (a citation's parenthetical may quote whole sentences)."""
    parts: list[str] = []
    at = 0
    for m in _BOUNDARY.finditer(text):
        inside = text[at : m.start()]
        if inside.count("(") <= inside.count(")") and not _abbreviation(text, m.start()):
            parts.append(text[at : m.end()].strip())
            at = m.end()
    parts.append(text[at:].strip())
    return [p for p in parts if p]


def citation_sentence(sentence: str) -> bool:
    """Whether ``sentence`` is only a citation: it opens with a signal, `Id.` or a case name and reporter, and
    what is left once its parentheticals are taken out is short and holds a page, `id.`, `supra` or a section."""
    flat = _SPACES.sub(" ", sentence).strip()
    residue = flat
    for _ in range(4):  # parentheticals inside parentheticals
        residue = _PARENTHETICAL.sub("", residue)
    if len(residue) > 240 or not _CITE_MARK.search(residue):
        return False
    return bool(_SIGNAL.match(flat) or _CASE_CITE.match(flat))


def inner_alters(source: str, start: int, end: int, earlier: str) -> str:
    """Why omitting ``source[start:end]`` (an ellipsis inside the quote) may change what the kept words say, or "";
    ``earlier``: what version 3 said (kept unless the omission is only citations, a parenthetical or a list's
    items, which are formatting)."""
    omitted = source[start:end].strip()
    if not omitted:
        return earlier
    before = source[sentence_start(source, start) : start]
    closing = _CLOSING.match(omitted)  # `consideration. . . . We`: the kept sentence's own period is in the gap
    if closing is not None:
        omitted, before = omitted[closing.end() :], ""
    whole = not before.strip() and _CLOSED.search(omitted) is not None
    parts = sentences(omitted)
    if whole and parts and all(citation_sentence(p) for p in parts):
        return ""
    bare = omitted.strip(" ,;")
    if not whole and bare.startswith("(") and bare.endswith(")") and _one_parenthetical(bare):
        return ""
    if earlier:
        return earlier
    voice = _voice(omitted, source[end : _sentence_end(source, end)])
    if voice:
        return voice
    rejection = _REJECTION.search(omitted)
    if whole and rejection is not None:
        return f"an omission drops the court's rejection of an argument ({rejection.group()})"
    scope = "" if whole else _scope(before)
    restrictive = not before.rstrip().endswith((",", ";")) and not omitted.startswith((",", ";"))
    if scope and restrictive and _predicate_follows(source[end : end + 40]):
        return f"an omission drops words that {scope!r} governs: it widens or narrows what {scope!r} limits"
    return ""


def _one_parenthetical(text: str) -> bool:
    """Whether ``text`` (from `(` to `)`) is one parenthetical, not `(a) and (b)`."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and i < len(text) - 1:
            return False
    return depth == 0


def _sentence_end(source: str, pos: int) -> int:
    for m in _BOUNDARY.finditer(source, pos, min(len(source), pos + _LOOKBACK)):
        if not _abbreviation(source, m.start()):
            return m.start()
    return min(len(source), pos + _LOOKBACK)


def _voice(omitted: str, kept_after: str) -> str:
    """Why the omission drops who says the kept words after it: it holds a reporting verb (`asserts that`) whose
    clause the kept words go on with (no sentence end after the verb in the omitted text), or ""."""
    last = None
    for last in _REPORTING.finditer(omitted):  # noqa: B007 - the last one is the one the kept words continue
        pass
    if last is None or not kept_after.strip():
        return ""
    rest = omitted[last.end() :]
    if sentences(rest + " A")[:-1] or re.search(r"[.?!;]['\"\u201d\u2019)\]]*\s*$", rest):
        return ""  # the reported clause ends inside the omission: the kept words are not what was reported
    return f"an omission drops who says the kept words ({last.group()}): they are a party's, not the court's"


def _predicate_follows(kept_after: str) -> bool:
    """Whether the kept words after an omission go on with their clause's verb (`. . . may vote`, `. . . shall
    have`): the omission then sits between a limited noun phrase and what is said of it."""
    following = policy.words(kept_after)
    return bool(following) and following[0] in _PREDICATE_STARTS


def _scope(before: str) -> str:
    """The limiting word among the last few words before an omission (`Only residents`), or ""."""
    tail = re.split(r"[,;:()\u2014]", before)[-1]
    ws = policy.words(tail)
    for w in reversed(ws[-(_SCOPE_REACH + 1) :]):
        if w in _SCOPE_WORDS:
            return w
    return ""


def leading_alters(omitted_opening: str) -> str:
    """Why a leading ellipsis that omits ``omitted_opening`` (the sentence's start) may change what the kept words
    say: a condition or exception that opens the sentence (`Except as otherwise provided,`), or a reporting verb
    whose clause the kept words continue (`Freeman asserts that`); "" otherwise."""
    text = omitted_opening.strip()
    if not text:
        return ""
    enumeration = _ENUMERATION.match(text)
    body = text[enumeration.end() :] if enumeration else text
    opening = _OPENING.match(body)
    if opening is not None:
        return f"a leading omission drops the condition or exception ({opening.group()}) that governs the kept words"
    voice = _voice(text, "kept")
    return voice.replace("an omission", "a leading omission") if voice else ""


def opening_condition(source: str, start: int) -> tuple[str, int, int] | None:
    """``(limited_before, start, end)`` of a condition or exception that opens the sentence a passage starting at
    ``start`` continues, found past citations and enumerations (rules version 4; the earlier rules read it with
    :func:`policy.limits_opening`)."""
    begin = sentence_start(source, start)
    lo = max(0, start - _LOOKBACK)
    if begin >= start or "," not in source[begin:start] or (lo > 0 and not source[lo:begin].strip()):
        return None  # the passage starts its sentence, or the sentence's start is out of reach
    enumeration = _ENUMERATION.match(source, begin, start)
    at = enumeration.end() if enumeration else begin
    m = _OPENING.match(source, at, start)
    return None if m is None else (LIMITED_BEFORE, m.start("words"), m.end("words"))
