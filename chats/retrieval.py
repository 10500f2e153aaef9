"""Passage retrieval for the extractive assistant and the caselaw tool.

Source texts are cut into passages (a sentence, or two when the first is short) whose offsets
point into the original text, so that ``text[start:end]`` is a verbatim quote that verifies
as an exact match. Passages and whole sources are ranked against a question:

- on PostgreSQL with full-text search (``to_tsvector``/``to_tsquery`` with the ``english``
  configuration: stemming and stop words), sources through ``django.contrib.postgres.search``,
  passages by ``ts_rank`` over an ``unnest``-ed array of candidate passages;
- elsewhere (SQLite) with a term-overlap scorer: each query term found in a passage adds its
  inverse document frequency over the candidates.

Both are deterministic: ties are broken by source order, then position in the source.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import TypeVar

from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector
from django.db import connection
from django.db.models import Model, Q, QuerySet

ModelT = TypeVar("ModelT", bound=Model)

# A passage longer than this is not a quotable sentence (a run-on block, a table, a list).
MAX_PASSAGE_CHARS = 500
# The most distinct terms of a question that are searched for: the first ones, in order. A question
# can hold thousands (LQAI_MAX_MESSAGE_CHARS), and each term is one OR-ed condition: SQLite refuses
# a query past a thousand ("Expression tree is too large"), and on PostgreSQL the tsquery grows with it.
MAX_QUERY_TERMS = 64
# A sentence shorter than this is joined with the next one ("one or two sentences").
SHORT_SENTENCE_CHARS = 80
MIN_PASSAGE_WORDS = 6

# fmt: off
_STOPWORDS = frozenset({
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do",
    "does", "doing", "done", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have",
    "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its",
    "itself", "just", "me", "might", "more", "most", "must", "my", "no", "nor", "not", "now", "of", "off", "on",
    "once", "only", "or", "other", "our", "ours", "out", "over", "own", "same", "shall", "she", "should", "so",
    "some", "such", "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they", "this",
    "those", "through", "to", "too", "under", "until", "up", "upon", "very", "was", "we", "were", "what",
    "when", "where", "whether", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
    "yours"
})
# fmt: on
_WORD = re.compile(r"[a-z0-9]+")
# Sentence-ending punctuation, optionally followed by closing quotes or brackets, then whitespace.
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(\s+)")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\f\v]*\n\s*")
_LAST_WORD = re.compile(r"(\S+)$")
# Words ending in a period that do not end a sentence (legal citations are full of them).
# fmt: off
_ABBREVIATIONS = frozenset({
    "v.", "vs.", "no.", "nos.", "inc.", "co.", "corp.", "ltd.", "mr.", "mrs.", "ms.", "dr.", "st.", "e.g.",
    "i.e.", "id.", "cf.", "ct.", "app.", "supp.", "cir.", "art.", "sec.", "ed.", "ann.", "stat.", "rev.", "jr.",
    "sr.", "u.s.", "op.", "p.", "pp.", "seq.", "al.", "j.", "jj.", "c.j.", "ch.", "cl.", "amend.", "const.",
    "dist.", "div.", "dept.", "gen.", "atty.", "att'y.", "ass'n.", "gov't.", "n.c.", "n.e.", "n.w.", "s.e.",
    "s.w.", "f.2d.", "f.3d.", "f.4th.", "s.ct.", "l.ed.", "cong.", "reg."
})
# fmt: on


@dataclass(frozen=True, slots=True)
class Passage:
    """A verbatim span of one of the ranked sources: ``texts[source][start:end] == text``."""

    source: int
    start: int
    end: int
    text: str


def query_terms(question: str) -> list[str]:
    """The distinct content words of ``question``, lowercased, in order of first appearance; at most
    :data:`MAX_QUERY_TERMS` of them."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(question.lower()):
        if word not in _STOPWORDS and len(word) > 1:
            seen.setdefault(word, None)
            if len(seen) == MAX_QUERY_TERMS:
                break
    return list(seen)


def _stem(word: str) -> str:
    """A light English stemmer: enough for plurals and common verb endings to meet."""
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: len(word) - len(suffix)] + replacement
    return word


def _stems(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def _is_sentence_end(text: str, punctuation_at: int) -> bool:
    if text[punctuation_at] != ".":
        return True
    match = _LAST_WORD.search(text, max(0, punctuation_at - 40), punctuation_at + 1)
    word = match.group(1).lstrip("(\"'\u201c\u2018[").lower() if match else ""
    # "U." of "U. S.", initials ("J. Smith"), abbreviations: no boundary.
    return not (len(word) == 2 and word[0].isalpha()) and word not in _ABBREVIATIONS


def _starts_sentence(char: str) -> bool:
    return char.isupper() or (char != "" and char in "\"'\u201c\u2018([")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text``; paragraph breaks always end a sentence."""
    spans: list[tuple[int, int]] = []
    block_start = 0
    blocks = [*(m.start() for m in _PARAGRAPH_BREAK.finditer(text)), len(text)]
    for block_end in blocks:
        start = block_start
        for match in _SENTENCE_END.finditer(text, block_start, block_end):
            following = text[match.end() : match.end() + 1]
            # A sentence starts with a capital or an opening quote or bracket; "(Ky. 1939)" does not end one.
            if not _starts_sentence(following) or not _is_sentence_end(text, match.start()):
                continue
            spans.append((start, match.start(1)))
            start = match.end()
        spans.append((start, block_end))
        next_break = _PARAGRAPH_BREAK.match(text, block_end)
        block_start = next_break.end() if next_break else block_end
    return [(s, e) for s, e in (_strip(text, s, e) for s, e in spans) if e > s]


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _quotable(span: str) -> bool:
    letters = [c for c in span if c.isalpha()]
    return (
        len(span) <= MAX_PASSAGE_CHARS
        and len(span.split()) >= MIN_PASSAGE_WORDS
        # Headings and captions are mostly capitals; prose is mostly lowercase.
        and sum(c.islower() for c in letters) > len(letters) * 0.6
    )


def passages(text: str, *, source: int = 0) -> list[Passage]:
    """The quotable passages of ``text``, in order: each sentence, joined with the next if short."""
    spans = sentence_spans(text)
    result: list[Passage] = []
    for i, (start, end) in enumerate(spans):
        if end - start < SHORT_SENTENCE_CHARS and i + 1 < len(spans):
            next_start, next_end = spans[i + 1]
            if "\n\n" not in text[end:next_start]:
                end = next_end
        if _quotable(text[start:end]):
            result.append(Passage(source=source, start=start, end=end, text=text[start:end]))
    return result


def _on_postgres() -> bool:
    return connection.vendor == "postgresql"


def tsquery(terms: Sequence[str]) -> str:
    # Terms are [a-z0-9]+ only (see query_terms), so this raw tsquery cannot be malformed.
    return " | ".join(terms)


def rank_passages(candidates: Sequence[Passage], question: str, *, limit: int) -> list[Passage]:
    """The ``limit`` candidates that best answer ``question`` (best first), none overlapping another
    (a short sentence is a candidate alone and joined with the next); none that share no term with it."""
    terms = query_terms(question)
    if not terms or not candidates or limit <= 0:
        return []
    # Overlaps can only remove a few: rank a margin more than asked for.
    margin = limit * 4
    if _on_postgres():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT t.idx FROM unnest(%s::text[]) WITH ORDINALITY AS t(body, idx), "
                "to_tsquery('english', %s) AS q WHERE to_tsvector('english', t.body) @@ q "
                "ORDER BY ts_rank(to_tsvector('english', t.body), q) DESC, t.idx LIMIT %s",
                [[c.text for c in candidates], tsquery(terms), margin],
            )
            ranked = [candidates[idx - 1] for (idx,) in cursor.fetchall()]
    else:
        ranked = rank_by_overlap(candidates, terms, limit=margin)
    return without_overlaps(ranked, limit=limit)


def without_overlaps(ranked: Sequence[Passage], *, limit: int) -> list[Passage]:
    """The first ``limit`` of ``ranked`` that overlap no passage of the same source kept before them."""
    chosen: list[Passage] = []
    for passage in ranked:
        if not any(p.source == passage.source and p.start < passage.end and passage.start < p.end for p in chosen):
            chosen.append(passage)
        if len(chosen) == limit:
            break
    return chosen


def rank_by_overlap(candidates: Sequence[Passage], terms: Sequence[str], *, limit: int) -> list[Passage]:
    """The ``limit`` candidates with the most inverse-document-frequency weight of ``terms`` (ties: order)."""
    query = {_stem(t) for t in terms}
    stems = [_stems(c.text) & query for c in candidates]
    document_frequency = Counter(term for found in stems for term in found)
    n = len(candidates)
    idf = {term: math.log(1 + n / count) for term, count in document_frequency.items()}
    scored = [(sum(idf[t] for t in found), i) for i, found in enumerate(stems) if found]
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [candidates[i] for _, i in scored[:limit]]


def rank_sources(queryset: QuerySet[ModelT], *, field: str, question: str, limit: int) -> list[ModelT]:
    """The ``limit`` rows of ``queryset`` whose ``field`` best matches ``question`` (best first).

    PostgreSQL: ``field @@ to_tsquery`` (the GIN expression indexes of migration 0002 serve it),
    ordered by ``SearchRank``. Elsewhere: rows containing any term, ordered by term overlap.
    """
    terms = query_terms(question)
    if not terms or limit <= 0:
        return []
    if _on_postgres():
        query = SearchQuery(tsquery(terms), search_type="raw", config="english")
        vector = SearchVector(field, config="english")
        return list(
            queryset.annotate(search=vector, rank=SearchRank(vector, query))
            .filter(search=query)
            .order_by("-rank", "pk")[:limit]
        )
    stems = [_stem(t) for t in terms]
    rows = list(queryset.filter(reduce(or_, (Q(**{f"{field}__icontains": s}) for s in stems))).order_by("pk"))
    as_passages = [Passage(source=i, start=0, end=0, text=getattr(row, field)) for i, row in enumerate(rows)]
    return [rows[p.source] for p in rank_by_overlap(as_passages, terms, limit=limit)]
