"""The alteration policy: which brackets and ellipses a quote may use (Bluebook Rules 5.2 and 5.3).

Alterations and omissions are allowed only where they cannot change what the source says: a bracket and the
words it stands for carry the same negations, numbers and modals; an ellipsis never omits a negation, a
number, a modal or a limiting word from inside a clause; a bracket substituting other words caps the match's
confidence at :data:`SUBSTITUTION_MAX_CONFIDENCE`. Works on canonical text
(:mod:`lqai_verify.verification.normalization`). The rules in full: docs/verification.md.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from lqai_verify.verification.results import (
    FORM,
    INSERTION,
    LIMITED_BEFORE,
    NEGATED_BEFORE,
    REFERENCE,
    SAME,
    SHORTENED,
    SUBSTITUTION,
)

#: The version of the rules the verifier applies unless told otherwise, and every version it can still apply: a quote
#: sealed under earlier rules is checked under them (each rule added since says which version it belongs to).
CURRENT_RULES = 4
RULES = (3, 4)

#: The highest confidence a match with a substitution (a bracket standing for different words) may have.
SUBSTITUTION_MAX_CONFIDENCE = 0.6
#: Maximum source words a bracketed phrase (``[the Court]``) may stand for.
MAX_BRACKET_WORDS = 8
# Most letters `[ ]` may stand for (the rest of a word: `nudge[ ]` for "nudges").
MAX_OMITTED_LETTERS = 12

# A word of canonical text: a number with its inner separators (`4.5`, `10,000`, `42-1983.1`, `1/2/2024`), or letters
# with a clitic (`didn't`, `university's`). Canonical text drops whitespace next to quotation marks (`not 'hold'` is
# `not'hold'`), so an apostrophe joins letters only in a clitic.
WORD = re.compile(r"\d+(?:[.,:/-]\d+)*|[^\W\d_]+(?:'(?:t|s|d|ll|re|ve|m)(?![^\W\d_]))?")


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# With the adverbs that negate without `not` ("courts rarely find", "hardly applies").
NEGATIONS = _set(
    "not no never neither nor none nothing nobody nowhere cannot without unless except hardly scarcely barely seldom "
    "rarely"
)
MODALS = _set("shall may must should will would can could might")
# With the quantifiers that all but deny what they qualify ("found little difference", "few employers").
LIMITING = _set("only solely exclusively all any every except unless few little")
NUMBER_WORDS = _set(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
    eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion trillion
    half twice thrice once double triple dozen first second third fourth fifth sixth seventh eighth ninth tenth
    eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth thirtieth
    fortieth fiftieth hundredth thousandth
    january february march april june july august september october november december"""
)
PRONOUNS = _set(
    """i me my mine we us our ours you your yours he him his she her hers it its they them their theirs this that these
    those who whom whose which one itself himself herself themselves ourselves"""
)
ARTICLES = _set("a an the")
ROLE_NOUNS = _set(
    """plaintiff plaintiffs defendant defendants petitioner petitioners respondent respondents appellant appellants
    appellee appellees court courts city cities state states board boards county counties agency commission
    government party parties movant movants claimant claimants applicant applicants intervenor intervenors
    complainant complainants employer employers employee employees legislature congress officer officers
    statute act section ordinance regulation rule"""
)
_REFERENCE_WORDS = PRONOUNS | ARTICLES | ROLE_NOUNS
# Endings that make another form of the same word (`impos[ing]` for "imposes"), and no ending at all.
INFLECTIONS = _set("s es ed d ing ion ions e er ers est ies ied y ly ment ments al ally 's ' ive") | {""}
REASON_NOT_INFLECTION = "[ ] stands only for an ending such as -s or -ed, not for letters that change the word"


def inflection(letters: str) -> bool:
    """Whether ``letters`` omitted from a word by ``[ ]`` are an inflectional ending (`judgment[ ]` for "judgments"),
    not letters that turn the word around (`can[ ]` for "cannot", `harm[ ]` for "harmless")."""
    return letters.lower() in INFLECTIONS


# Prefixes that negate a word (`[un]constitutional`).
NEGATING_PREFIXES = ("un", "non", "in", "im", "il", "ir", "dis")
_MIN_STEM = 3
# Modal verbs hidden in a negated contraction: `can't` -> can, `won't` -> will.
_CONTRACTED_MODALS = {"ca": "can", "wo": "will", "sha": "shall"}

# Words that carry the meaning an omission must keep, and a quick test for them.
_MEANINGFUL = NEGATIONS | MODALS | LIMITING | NUMBER_WORDS
_LETTER_RUNS = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")


def _carries_meaning(text: str) -> bool:
    lowered = text.lower()
    return (
        _DIGIT.search(lowered) is not None
        or "n't" in lowered
        or not _MEANINGFUL.isdisjoint(_LETTER_RUNS.findall(lowered))
    )


# A clause ends at these (a `.`, `,` or `:` between two digits is inside a number).
_CLAUSE_MARK = re.compile(r"""[;!?()"]|[.,:](?!\d)|(?<!\d)[.,:]""")
# Sentence ends: `.`, `?`, `!`, `;` or `:`, maybe followed by closing quotation marks or parentheses.
_SENTENCE_END = re.compile(r"""[.?!;:]['")\]]*$""")
_SENTENCE_START = re.compile(r"""^['"(\[]*[.?!;:]""")
_LIST_END = re.compile(r"""[,;]['")\]]*$""")
_LAST_ITEM = re.compile(r"(?:and|or|nor)\b", re.IGNORECASE)
# Text that is (part of) a citation: a case name, a reporter, a code section, `Id.`, `supra`, a pin cite.
_CITATION = re.compile(
    r"\bv\.|\bU\.S\.|\bU\.S\.C\.|\bF\.(?:\d|Supp)|\bS\.Ct\.|\bL\.Ed\.|\u00a7|\b[Ii]d\.|\bsupra\b|\binfra\b|\bat \d"
    r"|\bCir\.|\(\d{4}\)|\bNo\.\d"
)


def words(text: str) -> list[str]:
    """The words of canonical ``text``, lower-cased."""
    return WORD.findall(text.lower())


def _profile(ws: Iterable[str]) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Negations, numbers and modal verbs in ``ws`` (lower-cased words)."""
    negations: Counter[str] = Counter()
    numbers: Counter[str] = Counter()
    modals: Counter[str] = Counter()
    for w in ws:
        if w.endswith("n't"):
            negations["not"] += 1
            stem = w[:-3]
            stem = _CONTRACTED_MODALS.get(stem, stem)
            if stem in MODALS:
                modals[stem] += 1
        elif w == "cannot":
            negations["not"] += 1
            modals["can"] += 1
        elif w in NEGATIONS:
            negations[w] += 1
        if w in MODALS:
            modals[w] += 1
        if w[0].isdigit() or w in NUMBER_WORDS:
            numbers[w] += 1
    return negations, numbers, modals


def meaning_change(quote_words: list[str], source_words: list[str]) -> str | None:
    """Why replacing ``source_words`` with ``quote_words`` changes the meaning, or None if it does not."""
    q_neg, q_num, q_mod = _profile(quote_words)
    s_neg, s_num, s_mod = _profile(source_words)
    if q_neg != s_neg:
        return "an alteration changes a negation"
    if q_num != s_num:
        return "an alteration changes a number"
    if q_mod != s_mod:
        return "an alteration changes a modal verb"
    return None


def hidden_change(content_words: list[str], beyond_words: list[str]) -> str | None:
    """Why words next to an edge bracket, in its clause but not covered by it, carry meaning the bracket hides."""
    c_neg, _, c_mod = _profile(content_words)
    b_neg, _, b_mod = _profile(beyond_words)
    if b_neg - c_neg:
        return "an alteration changes a negation"
    if b_mod - c_mod:
        return "an alteration changes a modal verb"
    return None


def _is_form(q: str, s: str) -> bool:
    """Whether ``q`` and ``s`` are forms of one word: a common stem and inflectional endings."""
    n = 0
    limit = min(len(q), len(s))
    while n < limit and q[n] == s[n]:
        n += 1
    return n >= _MIN_STEM and q[n:] in INFLECTIONS and s[n:] in INFLECTIONS


def _negated(word: str, other: str) -> bool:
    """Whether ``word`` is ``other`` with a negating prefix (`unconstitutional`, `constitutional`)."""
    return any(word == prefix + other for prefix in NEGATING_PREFIXES) and len(other) >= _MIN_STEM


def classify_bracket(quote_side: str, source_side: str) -> tuple[str | None, str]:
    """``(reason, detail)`` for a bracket: ``quote_side`` is the bracket's content completed to whole words by the
    letters it is attached to, ``source_side`` the source words it stands for. ``reason`` is None if the bracket is
    allowed; ``detail`` then says what it does (``SAME``, ``FORM``, ``REFERENCE``, ``SHORTENED``, ``INSERTION`` or
    ``SUBSTITUTION``)."""
    q = words(quote_side)
    s = words(source_side)
    reason = meaning_change(q, s)
    if reason is not None:
        return reason, ""
    if any(_negated(a, b) or _negated(b, a) for a in q for b in s):
        return "an alteration changes a negation", ""
    if q == s:
        return None, SAME
    if not s:
        # Added words: a subject or an article supplied for the reader is an insertion; anything else adds to what
        # the source says, and is shown and capped like a substitution.
        return None, INSERTION if all(w in _REFERENCE_WORDS for w in q) else SUBSTITUTION
    if len(q) == len(s) and all(a == b or _is_form(a, b) for a, b in zip(q, s, strict=True)):
        return None, FORM
    if all(w in _REFERENCE_WORDS for w in s):
        return None, REFERENCE
    if q and set(q) <= set(s):
        return None, SHORTENED
    return None, SUBSTITUTION


# Preference among the ways an edge bracket can be read (lowest first; on a tie, the fewest words): the reading
# that covers the most of what the bracket says.
DETAIL_RANK = {SAME: 0, FORM: 1, SHORTENED: 2, REFERENCE: 3, INSERTION: 4, SUBSTITUTION: 5}


def clause_words_before(text: str, pos: int, window: int = 400) -> list[tuple[int, int]]:
    """Spans of the words of the clause that ends at ``pos`` of canonical ``text`` (nearest last)."""
    lo = max(0, pos - window)
    region = text[lo:pos]
    last = None
    for last in _CLAUSE_MARK.finditer(region):  # noqa: B007 - the last mark is the one wanted
        pass
    offset = lo + (last.end() if last is not None else 0)
    return [(m.start(), m.end()) for m in WORD.finditer(text, offset, pos)]


def clause_words_after(text: str, pos: int, window: int = 400) -> list[tuple[int, int]]:
    """Spans of the words of the clause that starts at ``pos`` of canonical ``text`` (nearest first)."""
    hi = min(len(text), pos + window)
    mark = _CLAUSE_MARK.search(text, pos, hi)
    end = mark.start() if mark is not None else hi
    return [(m.start(), m.end()) for m in WORD.finditer(text, pos, end)]


def omission_change(before: str, gap: str, after: str, *, rules: int = CURRENT_RULES) -> str | None:
    """Why omitting ``gap`` (canonical source text between ``before`` and ``after``) drops what carries the meaning,
    or None if the omission is allowed.

    Whole sentences (the omission starts after a sentence end and ends with one) may be omitted whatever they say;
    citations and list items (between commas or semicolons) may be omitted unless they hold a negation, a modal or
    a limiting word; anything else is inside a clause and may not hold a negation, a number, a modal or a limiting
    word. Rules version 4: a list's items (also before the list's `but`: "shall include A, B, . . . but shall not
    include Z") and a whole parenthetical may hold a modal, a number or a limiting word of their own (never a
    negation): they qualify the omitted item, not the kept words.
    """
    stripped = gap.strip()
    if not stripped:
        return None
    before = before.rstrip()
    after = after.lstrip()
    starts_clean = not before or bool(_SENTENCE_END.search(before)) or bool(_SENTENCE_START.match(stripped))
    if starts_clean and (_SENTENCE_END.search(stripped) or _SENTENCE_START.match(after)):
        return None  # whole sentences
    if not _carries_meaning(stripped):
        return None  # the common case, and a cheap one: the search may try many omissions per quote
    ws = words(stripped)
    negations, numbers, modals = _profile(ws)
    limiting = any(w in LIMITING for w in ws)
    # List items: between separators, and either several of them or before the list's last item (`A, . . . and D`);
    # a single phrase between commas (`$500, payable within 30 days, after filing`) is inside its clause.
    structural = bool(_CITATION.search(stripped)) or (
        (before.endswith((",", ";")) or stripped.startswith((",", ";")))
        and (bool(_LIST_END.search(stripped)) or after.startswith((",", ";")))
        and (bool(_LAST_ITEM.match(after)) or any(mark in stripped.strip(",; ") for mark in ",;"))
    )
    if negations:
        return "an omission drops a negation"
    if rules >= 4 and _items_or_parenthetical(before, stripped, after):
        return None
    if modals:
        return "an omission drops a modal verb"
    if limiting:
        return "an omission drops a limiting word"
    if numbers and not structural:
        return "an omission drops a number"
    return None


def _items_or_parenthetical(before: str, stripped: str, after: str) -> bool:
    """Whether the omitted ``stripped`` (canonical) is a list's items, or one whole parenthetical: items between
    separators, before the list's last `and`, `or`, `nor`, or the `but` that closes it (the list goes on, so what
    the omitted items qualify is theirs alone); a parenthetical from `(` to its own `)`."""
    bare = stripped.strip(",; ")
    if bare.startswith("(") and bare.endswith(")") and _balanced(bare):
        return True
    return (
        (before.endswith((",", ";")) or stripped.startswith((",", ";")))
        and (bool(_LIST_END.search(stripped)) or after.startswith((",", ";")))
        and bool(_LIST_CLOSE.match(after.lstrip(",; ")))
    )


def _balanced(text: str) -> bool:
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and i < len(text) - 1:
            return False  # `(a) and (b)`: two parentheticals and the text between them
    return depth == 0


_LIST_CLOSE = re.compile(r"(?:and|or|nor|but)\b", re.IGNORECASE)
#: ``alters`` of a bracket that names a party the source's words do not settle (rules version 4 tries to resolve it).
REASON_UNSETTLED_REFERENT = "a bracket names a party the source's words do not settle"


# --- What the verifier cannot vouch for (an ALTERED match) ------------------------------------------------------------

#: The highest confidence an ``altered`` match may have: what the verifier cannot vouch for never scores like what
#: it can. (A substitution was capped at the same level before ``altered`` existed.)
ALTERED_MAX_CONFIDENCE = SUBSTITUTION_MAX_CONFIDENCE

# Roles a caption gives its parties, by the singular the role nouns reduce to.
_ROLE_OF = {
    **{w: w for w in ("plaintiff", "defendant", "appellant", "appellee", "petitioner", "respondent")},
    **{w + "s": w for w in ("plaintiff", "defendant", "appellant", "appellee", "petitioner", "respondent")},
    "movant": "movant",
    "movants": "movant",
    "intervenor": "intervenor",
    "intervenors": "intervenor",
    "claimant": "claimant",
    "claimants": "claimant",
}
# Words whose omission from a bracket's source words names no one less (`[the appeals court]` for "the Court of
# Appeals").
_CONNECTIVES = ARTICLES | _set("of for in at on to by and")
_COURT_WORDS = _set("court courts this the supreme appeals appellate district circuit trial")
_FIRST_PERSON = _set("we us our ours ourselves this court the")
# Words of a bracket that refer without naming anyone: they cannot name the wrong party.
_NAMELESS = PRONOUNS | ARTICLES
# Words that make an omitted sentence part of what the passage asserts: a negation, a disagreement, a holding.
_HOLDING_WORDS = NEGATIONS | _set(
    """disagree disagrees disagreed reject rejects rejected overrule overrules overruled reverse reverses reversed
    vacate vacates vacated decline declines declined hold holds held holding conclude concludes concluded
    however nevertheless nonetheless but although"""
)
# A sentence end inside canonical text (whitespace after punctuation is dropped there): `alimony.The`,
# `S.J.S.At` (an initial before a capitalized word; `U.S.` before a number or `J.S` is none); and a semicolon
# between two clauses, whatever the case of the next word (`lost;the defendant`).
_INNER_SENTENCE_END = re.compile(r"""[^\W_][.?!;]['")\]]*(?=['"(]*[A-Z][a-z])|[^\W_];['")\]]*(?=['"(]*[^\W\d_])""")


def bracket_alters(
    quote_side: str, source_side: str, detail: str, parties: dict[str, frozenset[str]]
) -> tuple[str | None, str]:
    """``(refusal, alters)`` for an allowed bracket (``classify_bracket`` gave ``detail``): ``refusal`` if the
    source's caption shows that the bracket names the wrong party, else ``alters``, why the bracket may change what
    the source says ("" if it cannot).

    A bracket that replaces a pronoun or a role noun with a name or a role can only be vouched for where the
    caption (``parties``: role -> name words) settles who the source's words designate; a court written for an
    opinion's `we` is the court itself. A bracket that drops words other than articles (`[The] agency` for "The
    state agency"), adds a referent, or substitutes different words is never vouched for.
    """
    q = words(quote_side)
    s = words(source_side)
    named = [w for w in q if w not in _NAMELESS]
    if detail in (SAME, FORM):
        return None, ""
    if not named:
        if q and all(w in ARTICLES for w in q) and not set(s) <= ARTICLES:
            return None, "a bracket drops words that name or qualify the actor"
        if s and set(s) <= PRONOUNS and set(q) - ARTICLES != set(s):
            # `[He]` for "She", `[his]` for "their": another person is meant.
            return None, "a bracket puts another pronoun for the source's"
        return None, ""  # a pronoun for the words it stands for names no one: it cannot name the wrong party
    if detail == SHORTENED:
        dropped = set(s) - set(q)
        return None, "" if dropped <= _CONNECTIVES else "a bracket drops words that name or qualify the actor"
    if all(w in _COURT_WORDS for w in named) and s and all(w in _FIRST_PERSON for w in s):
        return None, ""  # `[the Court]` for an opinion's "we": the court speaking
    settled = _caption_settles(named, s, parties)
    if settled is not None:
        return settled
    if detail == INSERTION:
        return None, "a bracket adds a referent the source does not name there"
    if detail == SUBSTITUTION:
        return None, "a bracket substitutes different words"
    return None, REASON_UNSETTLED_REFERENT


def _caption_settles(
    named: list[str], source_words: list[str], parties: dict[str, frozenset[str]]
) -> tuple[str | None, str] | None:
    """Whether the caption shows a bracket right (``(None, "")``) or wrong (a refusal), or None if it cannot tell:
    one side a role noun, the other a name of the caption (or another role of the same party)."""
    if not parties:
        return None

    def roles_of(ws: list[str]) -> set[str]:
        found = {_ROLE_OF[w] for w in ws if w in _ROLE_OF}
        names = [w for w in ws if w not in _NAMELESS and w not in ROLE_NOUNS]
        if names:
            holders = {role for role, party in parties.items() if set(names) <= party}
            if len({parties[role] for role in holders}) != 1:
                return set()  # named by no party, or by several: the caption cannot tell
            found |= holders
        return found

    if not any(w in _ROLE_OF for w in (*named, *source_words)):
        return None  # a name for a name: only a role noun is what a caption settles
    quote_roles = roles_of(named)
    source_roles = roles_of(source_words)
    if not quote_roles or not source_roles:
        return None
    if any(role not in parties for role in quote_roles | source_roles):
        return None

    def party(role: str) -> frozenset[str]:
        return parties[role]

    if any(party(a) == party(b) for a in quote_roles for b in source_roles):
        return None, ""
    return "a bracket names another party than the source's words designate", ""


_CAPTION_ROLE = re.compile(
    r"^(?P<names>[^\n]{2,600}?),\s*(?P<role>Plaintiffs?|Defendants?|Petitioners?|Respondents?|Appellants?|Appellees?)"
    r"(?:\s*[-\u2010\u2011\u2013\u2014]\s*(?P<second>Appellants?|Appellees?|Petitioners?|Respondents?))?"
    r"[ \t]*[.,;]?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
# A Supreme Court caption on one line: `ABIGAIL NOEL FISHER, PETITIONER v. UNIVERSITY OF TEXAS AT AUSTIN ET AL.`
_CAPTION_LINE = re.compile(
    r"^\s*(?P<first>[^\n,]{2,200}?),\s*(?P<role>PETITIONERS?|APPELLANTS?)\s+v\.\s+"
    r"(?P<second>[^\n]{2,200}?(?:\n[ \t]*[A-Z][A-Z .,'&-]{1,100})?)[ \t]*$",
    re.MULTILINE,
)
_SECOND_ROLE = {"petitioner": "respondent", "appellant": "appellee"}
# Words of a caption that name no one in particular.
_CAPTION_NOISE = _set(
    """and et al the of at in his her their its official capacity as a an for on behalf all others similarly situated
    individually inc llc corp co ltd"""
)


def caption_parties(source: str, window: int = 20_000) -> dict[str, frozenset[str]]:
    """The parties an opinion's caption names, by role: ``{"plaintiff": {"hogarth", "susan", ...}, ...}`` (a party
    named as `Defendant-Appellee` holds both roles). Empty when the head of ``source`` has no caption."""
    parties: dict[str, set[str]] = {}
    for m in _CAPTION_ROLE.finditer(source[:window]):
        names = m.group("names")
        names = re.split(r"(?:^|\n)\s*v\.?\s*(?:\n|$)|\n\s*\n", names)[-1]
        name_words = {w for w in words(names) if w not in _CAPTION_NOISE and w not in ROLE_NOUNS and len(w) > 1}
        if not name_words:
            continue
        for role in (m.group("role"), m.group("second")):
            if role:
                parties.setdefault(_ROLE_OF[role.lower()], set()).update(name_words)
    for m in _CAPTION_LINE.finditer(source[:window]):
        role = _ROLE_OF[m.group("role").lower()]
        for side, name in ((role, m.group("first")), (_SECOND_ROLE[role], m.group("second"))):
            name_words = {w for w in words(name) if w not in _CAPTION_NOISE and len(w) > 1}
            if name_words:
                parties.setdefault(side, set()).update(name_words)
    return {role: frozenset(ws) for role, ws in parties.items()}


def omission_alters(before: str, gap: str, after: str) -> str:
    """Why an allowed omission (``omission_change`` is None) may change what the passage asserts, or "": it joins
    parts of different sentences or clauses (one's subject meets another's predicate), it omits whole
    sentences that hold a negation, a disagreement or a holding, or, inside a sentence, a condition or an
    exception (`if`, `other than`, `subject to`, `in part`: the limiting continuations of :func:`limits_after`)."""
    stripped = gap.strip()
    if not stripped:
        return ""
    before = before.rstrip()
    after = after.lstrip()
    starts_clean = not before or bool(_SENTENCE_END.search(before)) or bool(_SENTENCE_START.match(stripped))
    ends_clean = bool(_SENTENCE_END.search(stripped)) or bool(_SENTENCE_START.match(after))
    if starts_clean and ends_clean:
        if not _HOLDING_WORDS.isdisjoint(words(stripped)) or "n't" in stripped.lower():
            return "an omission of whole sentences drops a negation, a disagreement or a holding"
        return ""
    if _CITATION.search(stripped) is not None:
        return ""
    if _INNER_SENTENCE_END.search(stripped):
        return "an omission joins parts of different sentences or clauses"
    if _OMITTED_CONDITION.search(stripped):
        # `The court may . . . enter judgment` for "The court may, if the parties consent, enter judgment": the
        # same continuations that limit a passage at its edge (`limits_after`) limit it from inside.
        return "an omission drops a condition or an exception"
    return ""


# A limiting continuation right after a passage, in the same sentence (original text, case-insensitive).
_LIMITING_PHRASES = """unless|except|excepting|but|if|only|provided|in part|so long as|as long as|when|whenever|where
    |subject to|to the extent|until|absent|notwithstanding|save|however|not|never|other than|without|barring
    |no|nothing|none|neither|nor"""
_LIMITING_MARKS = r"""[\s,;\u2014\u2013-]*['"\u201d\u2019)\]]*[\s,;\u2014\u2013-]*"""
_LIMITING_AFTER = re.compile(
    _LIMITING_MARKS
    + r"(?P<words>"
    + "|".join(r"\s+".join(phrase.split()) for phrase in _LIMITING_PHRASES.split("|"))
    + r")\b",
    re.IGNORECASE,
)
# Rules version 4: a concession after a passage limits it as much (`It could be read to mean that the easement
# extended to the fence line itself, although this would contradict an express term in the deed`).
_CONCESSIVE_PHRASES = """although|though|even though|even if|despite|regardless"""
_LIMITING_AFTER_4 = re.compile(
    _LIMITING_MARKS
    + r"(?P<words>"
    + "|".join(r"\s+".join(phrase.split()) for phrase in (_LIMITING_PHRASES + "|" + _CONCESSIVE_PHRASES).split("|"))
    + r")\b",
    re.IGNORECASE,
)
_OMITTED_CONDITION = re.compile(
    r"(?<![^\W\d_])(?:"
    + "|".join(r"\s+".join(phrase.split()) for phrase in _LIMITING_PHRASES.split("|"))
    + r")(?![^\W\d_])",
    re.IGNORECASE,
)
# The word after those marks, and the first words of the phrases: most passages go on with some other word.
_LIMITING_AFTER_NEXT = re.compile(_LIMITING_MARKS + r"([^\W\d_]+)")
_LIMITING_AFTER_FIRST = frozenset(phrase.split()[0] for phrase in _LIMITING_PHRASES.split("|"))
_LIMITING_AFTER_FIRST_4 = _LIMITING_AFTER_FIRST | frozenset(p.split()[0] for p in _CONCESSIVE_PHRASES.split("|"))
_LIMITING_BEFORE = _set("only solely exclusively merely except unless")
# How many words of its clause before a passage may hold the negation or limiting word that governs it.
_WORDS_BEFORE = 5
# Those words as bytes, and a table that keeps the lower-case ASCII letters and makes every other byte a space:
# :func:`_may_limit_before`.
_LIMIT_WORDS = frozenset(w.encode() for w in NEGATIONS | _LIMITING_BEFORE | {"cannot"})
_LETTERS_ONLY = bytes(b if 0x61 <= b <= 0x7A else 0x20 for b in range(256))
_UP_TO_LAST_CLAUSE_MARK = re.compile(r""".*(?:[;!?()"\u201c\u201d]|[.,:](?!\d)|\n\s*\n)""", re.DOTALL)
_SENTENCE_CLOSE = re.compile(r"""[.?!]['"\u201d\u2019)\]]*\s*$""")


def limits_after(
    source: str, end: int, resume: int | None = None, *, rules: int = CURRENT_RULES
) -> tuple[int, int] | None:
    """The span of a limiting word with which ``source`` goes on right after ``end`` in the same sentence, or
    None. ``resume``: where the text goes on when layout (a page break, star paging) follows ``end``. Rules
    version 4 adds the concessions (`although`, `even if`, `despite`, `regardless`)."""
    v4 = rules >= 4
    at = end if resume is None else resume
    stop = min(len(source), at + 80)
    # The pattern's phrases are tried one by one, so first a look at the word that comes next. Only an ASCII word is
    # ruled out by its lower case: the pattern's case folding also matches `\u017f` to `s`.
    following = _LIMITING_AFTER_NEXT.match(source, at, stop)
    if following is None:
        return None
    word = following.group(1)
    if word.isascii() and word.lower() not in (_LIMITING_AFTER_FIRST_4 if v4 else _LIMITING_AFTER_FIRST):
        return None
    m = (_LIMITING_AFTER_4 if v4 else _LIMITING_AFTER).match(source, at, stop)
    if m is None or _SENTENCE_CLOSE.search(source[max(0, end - 4) : end]):
        return None
    if source[m.end("words") : m.end("words") + 1] == "." and m.group("words").lower() == "no":
        return None  # `No. 96-7169`: a number, not a negation
    return m.span("words")


# Openings of a sentence that make what follows them conditional or excepted, read case-insensitively: `Except as
# provided in subsection (b), the tenant shall pay rent`. (`When` and `Where` often only set the scene.)
_CONDITIONAL_OPENING = re.compile(
    r"""['"(\[\u201c\u2018]*(?P<words>except|unless|if|only\s+if|notwithstanding|subject\s+to|provided|absent"""
    r"""|to\s+the\s+extent|so\s+long\s+as|as\s+long\s+as|save|other\s+than|barring)\b""",
    re.IGNORECASE,
)
# The end of the sentence before (or a paragraph break), the last one before a passage.
_SENTENCE_BEFORE = re.compile(r"""[.?!;:]['")\]\u201d\u2019]*\s+|\n[ \t]*\n""")
_SENTENCE_LOOKBACK = 300


def limits_opening(source: str, start: int) -> tuple[str, int, int] | None:
    """``(limited_before, start, end)`` of the condition or exception the sentence of ``source`` that the passage
    starting at ``start`` continues opens with (`Except as provided in subsection (b), `), or None; None too when
    the passage starts the sentence, or the sentence's start is not within a few hundred characters. These are the
    rules before version 4; version 4's reader, which finds the sentence's start past a citation's periods
    (`[N.C. Gen. Stat.] 163-231(a)`) and an enumeration (`(6) Except as provided`), is
    :func:`lqai_verify.verification.omissions.opening_condition`."""
    lo = max(0, start - _SENTENCE_LOOKBACK)
    opening = None
    for opening in _SENTENCE_BEFORE.finditer(source, lo, start):  # noqa: B007 - the last end is the one wanted
        pass
    if opening is None and lo > 0:
        return None
    begin = opening.end() if opening is not None else 0
    if begin >= start or "," not in source[begin:start]:
        return None  # the passage starts the sentence, or is inside its opening clause (`limits_before` reads that)
    m = _CONDITIONAL_OPENING.match(source, begin, start)
    return None if m is None else (LIMITED_BEFORE, m.start("words"), m.end("words"))


def _may_limit_before(tail: str) -> bool:
    """Whether ``tail`` may hold a word :func:`limits_before` looks for: False only when it holds none.

    A cheap test, so that the clause is cut out and split into words only for the few passages that have such a word
    before them. One byte per character (any other than ASCII is `?`), lower-cased, every byte but a letter a space:
    each word of the lower-cased ``tail`` that is one of those words keeps its letters and the non-letters around it,
    so it is a word here too, and a word ending in `n't` (or `n\u2019t`) leaves `n't` (or `n?t`)."""
    raw = tail.encode("ascii", "replace").lower()
    if b"n't" in raw or b"n?t" in raw:
        return True
    return not _LIMIT_WORDS.isdisjoint(raw.translate(_LETTERS_ONLY).split())


def limits_before(source: str, start: int, window: int = 60) -> tuple[str, int, int] | None:
    """``(flag, start, end)`` of a negation (``negated_before``) or a limiting word (``limited_before``) among the
    last few words of the clause of ``source`` that the passage starting at ``start`` continues, or None."""
    lo = max(0, start - window)
    tail = source[lo:start]
    if not tail.strip() or tail.rstrip()[-1:] in '.;:!?()"\u201c\u201d':
        return None  # the passage starts its clause: nothing of it comes before
    if not _may_limit_before(tail):
        return None
    last = _UP_TO_LAST_CLAUSE_MARK.match(tail)  # one pass: `.*` backs off to the last mark
    offset = lo + (last.end() if last is not None else 0)
    clause = source[offset:start].lower().replace("\u2019", "'")  # same length: offsets still hold
    found: tuple[str, int, int] | None = None
    # The words right before the passage: a negation further back in a long clause governs another verb
    # (`did not hold the University to the demanding burden of` before "strict scrutiny").
    for m in [*WORD.finditer(clause)][-_WORDS_BEFORE:]:
        w = m.group()
        if w in NEGATIONS or w == "cannot" or w.endswith("n't"):
            return NEGATED_BEFORE, offset + m.start(), offset + m.end()
        if found is None and w in _LIMITING_BEFORE:
            found = (LIMITED_BEFORE, offset + m.start(), offset + m.end())
    return found
