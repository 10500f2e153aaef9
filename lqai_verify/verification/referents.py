"""Rules version 4: the referent of a bracket that replaces a pronoun or a role noun, by a stated rule (no model).

A bracket (`[The State Board] also bears the duty` for "It also bears the duty") verifies when the source, in the
same paragraph, leaves the bracketed words the only candidate the replaced words can refer to:

- the replaced words agree with the candidate: `it`/`its` a definite noun phrase (`the State Board`, `the
  statute`), `he`/`she` and their forms a person (a name such as `Freeman`, `Mr. Warren`, or a person's role,
  `plaintiff`), `they`/`their` a plural (`plaintiffs`, `the Defendants`); a role noun (`defendant`) the name
  written with that role in the paragraph (`defendant Freeman`);
- a pronoun that opens its sentence continues the subject of the sentence before (citation sentences skipped):
  the candidates are that sentence's opening noun phrase; any other pronoun may refer to every agreeing noun
  phrase of the sentence before and of its own sentence up to it;
- the bracket names the candidate when its words (articles aside) are all among the candidate's. Otherwise the
  bracket stays ``altered``, naming the candidates found (or none). Limits: docs/verification.md.
"""

from __future__ import annotations

import re

from lqai_verify.verification import omissions, policy


def _words_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_THING = _words_set("it its itself")
_PERSON = _words_set("he him his himself she her hers herself")
_PLURAL = _words_set("they them their theirs themselves")
_PERSON_ROLES = _words_set(
    """plaintiff defendant petitioner respondent appellant appellee movant claimant applicant intervenor complainant
    employer employee officer father mother husband wife child tenant landlord"""
)
_CAPITALIZED = r"[A-Z][\w'\u2019.-]*"
_DEFINITE = re.compile(rf"\b[Tt]he ((?:{_CAPITALIZED}(?: (?:of|for|and) (?={_CAPITALIZED}))? ?)+)")
_DEFINITE_ROLE = re.compile(r"\b[Tt]he ([a-z]+)\b")
_NAME = re.compile(r"(?<![\w'\u2019.-])((?:Mr\.|Mrs\.|Ms\.|Dr\.) )?([A-Z][\w'\u2019-]*(?: [A-Z][\w'\u2019-]*){0,2})")
_NOT_NAMES = _words_set(
    """the this that these those it its he she they we our a an in on at for of to by as and or but if when where while
    although because under with from after before since first second third finally however accordingly instead
    id see e.g cf court section act state federal united states january february march april may june july august
    september october november december"""
)
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_PARAGRAPH_REACH = 3000
_SUBJECT_WORDS = 8  # how far into a sentence its opening noun phrase may reach


def resolve(source: str, start: int, end: int, quote_text: str) -> tuple[str, str]:
    """``(alters, note)`` for a bracket ``quote_text`` that stands for ``source[start:end]`` (a pronoun or a role
    noun the caption does not settle): ``("", note)`` when the paragraph leaves the bracketed words the only
    candidate, the note saying so for the reader; else ``(why, "")`` naming the candidates found."""
    replaced = source[start:end]
    words = policy.words(replaced)
    bracketed = [w for w in policy.words(quote_text) if w not in policy.ARTICLES]
    if not words or not bracketed:
        return policy.REASON_UNSETTLED_REFERENT, ""
    paragraph_start = _paragraph_start(source, start)
    sentence_start = max(omissions.sentence_start(source, start), paragraph_start)
    before = [s for s in omissions.sentences(source[paragraph_start:sentence_start]) if not _citation(s)]
    previous = before[-1] if before else ""
    own = source[sentence_start:start]
    opens = not policy.words(own)
    kind = _kind(words)
    if kind is None:
        return policy.REASON_UNSETTLED_REFERENT, ""
    if kind == "role":
        candidates = _role_names(source[paragraph_start:start], words[-1])
    elif opens:
        candidates = _subject(previous, kind)
    else:
        candidates = _noun_phrases(previous + " " + own, kind)
    unique = list(dict.fromkeys(candidates))
    shown = ", ".join(unique) if unique else "none"
    if unique and all(set(bracketed) <= set(policy.words(c)) for c in unique):
        where = "the sentence before names" if kind != "role" else "the paragraph names"
        return "", f"{quote_text} stands for \u201c{replaced}\u201d; {where} {unique[0]}"
    return (
        f"a bracket names a referent the paragraph does not settle: \u201c{replaced}\u201d may refer to {shown}",
        "",
    )


def _paragraph_start(source: str, pos: int) -> int:
    lo = max(0, pos - _PARAGRAPH_REACH)
    begin = lo
    for m in _PARAGRAPH.finditer(source, lo, pos):
        begin = m.end()
    return begin


def _citation(sentence: str) -> bool:
    return omissions.citation_sentence(sentence) or bool(re.match(r"^(?:[A-Z][\w.]*\.? ?){1,4}\u00a7", sentence))


def _kind(words: list[str]) -> str | None:
    last = words[-1]
    if last in _THING:
        return "thing"
    if last in _PERSON:
        return "person"
    if last in _PLURAL:
        return "plural"
    if last in policy.ROLE_NOUNS:
        return "role"
    return None


def _subject(sentence: str, kind: str) -> list[str]:
    """The opening noun phrase of ``sentence`` if it agrees with ``kind``: the subject a sentence-opening pronoun
    continues."""
    head = " ".join(sentence.split()[:_SUBJECT_WORDS])
    found = _noun_phrases(head, kind)
    if not found:
        return []
    first = found[0]
    return [first] if head.lower().find(first.lower()) <= len("The ") else []


def _noun_phrases(text: str, kind: str) -> list[str]:
    """The noun phrases of ``text`` that agree with ``kind``, in order."""
    text = " ".join(text.split())
    found: list[tuple[int, str]] = []
    if kind in ("thing", "plural"):
        for m in _DEFINITE.finditer(text):
            phrase = m.group(1).strip()
            plural = phrase.split()[-1].lower().endswith("s") and not phrase.lower().endswith("ss")
            if (kind == "plural") == plural and phrase.lower() not in _NOT_NAMES:
                found.append((m.start(), "the " + phrase))
        for m in _DEFINITE_ROLE.finditer(text):
            word = m.group(1)
            if word in policy.ROLE_NOUNS and (kind == "plural") == word.endswith("s") and word not in _PERSON_ROLES:
                found.append((m.start(), "the " + word))
    if kind == "plural":
        found += [(m.start(), m.group()) for m in re.finditer(r"\b(?:[a-z]+ )?(?:plaintiffs|defendants)\b", text)]
    if kind == "person":
        for m in _NAME.finditer(text):
            first = m.group(2).split()[0]
            if first.lower() in _NOT_NAMES or _definite_before(text, m.start()):
                continue
            # A capitalized word that opens a sentence is a name only if it is a person's role or the text also
            # writes it capitalized inside a sentence (`Petitioner, who is Caucasian`; not `Based on these facts`).
            opens = m.start() == 0 or text[max(0, m.start() - 2) : m.start()] in (". ", "? ", "! ")
            if opens and first.lower() not in _PERSON_ROLES and not re.search(rf"[a-z,;] {re.escape(first)}\b", text):
                continue
            found.append((m.start(), (m.group(1) or "") + m.group(2)))
        found += [(m.start(), m.group(1)) for m in re.finditer(r"\b(" + "|".join(_PERSON_ROLES) + r")\b", text)]
    found.sort()
    return [phrase for _, phrase in found]


def _definite_before(text: str, pos: int) -> bool:
    return text[max(0, pos - 4) : pos].lower() == "the "


def _role_names(text: str, role: str) -> list[str]:
    """The names written with ``role`` in ``text``: `defendant Freeman`, `Freeman, the defendant`."""
    text = " ".join(text.split())
    singular = role.rstrip("s") if role.endswith("s") and role[:-1] in policy.ROLE_NOUNS else role
    names = [
        m.group(1)
        for m in re.finditer(rf"\b{re.escape(singular)}s? ({_CAPITALIZED}(?: {_CAPITALIZED})?)", text, re.IGNORECASE)
    ]
    names += [m.group(1) for m in re.finditer(rf"\b({_CAPITALIZED}), (?:the )?{re.escape(singular)}\b", text)]
    return [n for n in names if n.split()[0].lower() not in _NOT_NAMES]
