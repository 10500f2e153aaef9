"""The case citations of an answer read while it streams (``StreamedCitations``): the same citations as the
whole-text extraction, whatever the chunks; and a run hands them to ``finalize_turn``, whose check then reads
only the unfinished rest."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import LazySettings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from chats.assistant import FinalAnswer, Script, ScriptedBackend, TextDelta, TurnRun
from chats.case_citations import Kind, Status, StreamedCitations, check_case_citations, extraction
from chats.case_citations.extraction import FoundCitation, extract_citations
from chats.models import CaseCitation, Chat, Message
from chats.services import finalize_turn, reopen_interrupted_turn, start_turn
from demo.seed import WRONG_NAME_ANSWER
from tests import factories
from tests.conftest import CORPUS, corpus_text
from tests.test_case_citation_rows import ANSWER as ROWS_ANSWER

# The corpus's opinions, but one: its star-paging lines (`[590 F.Supp.3d 855]`, a citation alone between blank
# lines) take a "name" from whatever eyecite reads before them, which differs when the paragraph is read alone.
OPINIONS = sorted(p.name for p in CORPUS.glob("*.txt") if not p.name.startswith("democracy-nc"))
BENCH_LIKE_ANSWER = (
    "Strict scrutiny applies to race-conscious admissions. Fisher v. University of Texas at Austin, 570 U.S. "
    "297, 310 (2013), held that the university must show the plan is narrowly tailored. The court in "
    "Grutter v. Bollinger, 539 U.S. 306, 326 (2003), had deferred to the university's judgment.\n\n"
    "That deference has limits. Fisher, 570 U.S., at 311. Id. at 312. The record shows that the officials "
    "applied the policy as written; that is what mattered in Grutter at 330.\n\n"
    "See also Smith v. Jones, 999 F.3d 1 (4th Cir. 2021); 42 U.S.C. § 1983."
)
ANSWERS = [ROWS_ANSWER, WRONG_NAME_ANSWER, BENCH_LIKE_ANSWER]


def streamed(text: str, sizes: list[int] | None = None, **kwargs: Any) -> StreamedCitations:
    """``text`` fed to a :class:`StreamedCitations` in pieces of ``sizes`` (cycled; default: word by word)."""
    stream = StreamedCitations(**kwargs)
    if sizes is None:
        for word in re.findall(r"\S*\s*", text):
            stream.feed(word)
        return stream
    at = n = 0
    while at < len(text):
        size = sizes[n % len(sizes)]
        stream.feed(text[at : at + size])
        at += size
        n += 1
    return stream


def spans(found: list[FoundCitation]) -> list[tuple[int, int, Kind]]:
    return [(f.start, f.end, f.kind) for f in found]


@pytest.mark.parametrize("answer", ANSWERS)
def test_streamed_answers_give_the_whole_texts_citations(answer: str) -> None:
    stream = streamed(answer)

    assert stream.citations(answer) == extract_citations(answer)


@pytest.mark.parametrize("name", OPINIONS)
def test_real_opinions_streamed_give_the_whole_texts_citations(name: str) -> None:
    text = corpus_text(f"opinions/{name}")[:12_000]
    stream = streamed(text, sizes=[1, 7, 3, 40, 2])

    assert len(stream._paragraphs) > 1  # it was read paragraph by paragraph
    assert stream.citations(text) == extract_citations(text)


@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(OPINIONS),
    first=st.integers(min_value=0, max_value=200),
    count=st.integers(min_value=1, max_value=12),
    sizes=st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=8),
    paragraph_chars=st.sampled_from([50, 200, 1500]),
)
def test_any_split_of_real_opinions_paragraphs_gives_the_whole_texts_citations(
    name: str, first: int, count: int, sizes: list[int], paragraph_chars: int
) -> None:
    # Given an answer made of some consecutive paragraphs of a real opinion, streamed in arbitrary pieces
    paragraphs = [p for p in corpus_text(f"opinions/{name}").split("\n\n") if p.strip()]
    start = first % len(paragraphs)
    text = "\n\n".join(paragraphs[start : start + count])
    # when it is read while it streams, then its citations are those of the whole text
    stream = streamed(text, sizes=sizes, paragraph_chars=paragraph_chars)
    assert stream.citations(text) == extract_citations(text)


def test_a_citation_across_chunks_is_found_once() -> None:
    answer = "As the Court held.\n\nFisher v. University of Texas at Austin, 570 U.S. 297, 311 (2013).\n\nThe end."
    cut = answer.index("U.S.") + 2
    stream = StreamedCitations()
    for piece in (answer[:cut], answer[cut : cut + 1], answer[cut + 1 :]):
        stream.feed(piece)

    found = stream.citations(answer)

    assert [(f.kind, f.citation, f.pin) for f in found] == [(Kind.FULL, "570 U.S. 297", "311")]
    assert found[0].text == answer[answer.index("570") : answer.index(", 311")]


def test_a_reference_by_name_to_an_earlier_paragraphs_case_is_resolved() -> None:
    # eyecite finds `Grutter at 330` by searching the text after each full citation: across paragraphs too.
    stream = streamed(BENCH_LIKE_ANSWER)

    found = stream.citations(BENCH_LIKE_ANSWER)

    reference = next(f for f in found if f.kind is Kind.REFERENCE)
    assert reference.text.startswith("Grutter at 330")
    assert reference.antecedent is not None
    assert found[reference.antecedent].citation == "539 U.S. 306"
    assert BENCH_LIKE_ANSWER.index("\n\n") < reference.start  # in a later paragraph than its case
    assert found == extract_citations(BENCH_LIKE_ANSWER)


def test_a_longer_paragraph_is_read_at_sentence_ends_not_inside_citations() -> None:
    sentence = "The court held that the statute applies, see Smith v. Jones, 123 F. Supp. 2d 456, 460 (D. Md. 2001). "
    answer = sentence * 12 + "Ex parte Young, 209 U.S. 123 (1908), and United States ex rel. Doe v. Roe, 5 F.4th 6."
    stream = streamed(answer, paragraph_chars=100)

    assert len(stream._paragraphs) > 5
    assert stream.citations(answer) == extract_citations(answer)


def test_only_the_start_it_was_asked_for_is_read() -> None:
    stream = streamed(BENCH_LIKE_ANSWER)
    cut = BENCH_LIKE_ANSWER.index("\n\nSee also")

    assert stream.citations(BENCH_LIKE_ANSWER[:cut]) == extract_citations(BENCH_LIKE_ANSWER[:cut])


def test_another_text_than_the_one_fed_is_read_whole(caplog: pytest.LogCaptureFixture) -> None:
    stream = streamed(BENCH_LIKE_ANSWER)
    other = ROWS_ANSWER

    assert stream.citations(other) == extract_citations(other)
    assert "fed another text" in caplog.text


def test_a_failure_while_streaming_falls_back_to_the_whole_text(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = extraction._eyecite_citations
    monkeypatch.setattr(extraction, "_eyecite_citations", lambda text: 1 / 0)
    stream = streamed(BENCH_LIKE_ANSWER)  # never raises
    monkeypatch.setattr(extraction, "_eyecite_citations", real)

    assert stream.broken
    assert stream.citations(BENCH_LIKE_ANSWER) == extract_citations(BENCH_LIKE_ANSWER)
    assert "as it streams failed" in caplog.text


@pytest.mark.django_db
@pytest.mark.parametrize("max_chars", [None, 200])
def test_the_check_of_a_streamed_answer_is_the_whole_texts(settings: LazySettings, max_chars: int | None) -> None:
    settings.COURTLISTENER_API_TOKEN = ""
    factories.CaselawOpinionFactory.create(
        provider="local", case_name="Fisher v. University of Texas at Austin", citation="570 U.S. 297 (2013)"
    )
    factories.CaselawOpinionFactory.create(provider="local", case_name="Grutter v. Bollinger", citation="539 U.S. 306")
    stream = streamed(BENCH_LIKE_ANSWER, max_chars=max_chars)

    checked = check_case_citations(BENCH_LIKE_ANSWER, streamed=stream, max_chars=max_chars)

    assert checked == check_case_citations(BENCH_LIKE_ANSWER, max_chars=max_chars)
    assert Status.VERIFIED in {c.status for c in checked}


def _record_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts eyecite is given, recorded."""
    read: list[str] = []
    real = extraction._eyecite_citations

    def recording(text: str) -> list[Any]:
        read.append(text)
        return real(text)

    monkeypatch.setattr(extraction, "_eyecite_citations", recording)
    return read


@pytest.mark.django_db
def test_a_run_reads_the_answer_while_it_streams_and_finalize_reads_only_the_rest(
    matter_chat: Chat,
    scripted_backend: Callable[..., Script],
    monkeypatch: pytest.MonkeyPatch,
    settings: LazySettings,
) -> None:
    settings.COURTLISTENER_API_TOKEN = ""
    words = re.findall(r"\S*\s*", BENCH_LIKE_ANSWER)
    scripted_backend(*(TextDelta(word) for word in words if word), FinalAnswer(citations=()))
    _, message = start_turn(chat=matter_chat, content="q")
    read = _record_reads(monkeypatch)
    at_finalize: list[int] = []
    real_finalize = finalize_turn

    def finalize(**kwargs: Any) -> Any:
        at_finalize.append(len(read))
        return real_finalize(**kwargs)

    monkeypatch.setattr("chats.assistant.runner.finalize_turn", finalize)

    result = TurnRun(message=message, backend=ScriptedBackend(), tools={}).run_to_end()

    # eyecite read the answer paragraph by paragraph: never the whole of it, and at finalize only its last one
    assert read
    assert all(len(text) < len(BENCH_LIKE_ANSWER) for text in read)
    assert read[at_finalize[0] :] == ["See also Smith v. Jones, 999 F.3d 1 (4th Cir. 2021); 42 U.S.C. § 1983."]
    rows = list(CaseCitation.objects.filter(message=result.message).order_by("answer_offset_start"))
    # (the statute citation is the authority library's: a statute row, not a case citation)
    whole = [c for c in check_case_citations(BENCH_LIKE_ANSWER) if c.kind is not Kind.STATUTE]
    assert [(r.answer_offset_start, r.answer_offset_end, r.kind, r.status) for r in rows] == [
        (c.start, c.end, c.kind.value, c.status.value) for c in whole
    ]
    assert list(result.message.statute_citations.values_list("citation", "status")) == [
        ("42 U.S.C. § 1983", "unchecked")
    ]


@pytest.mark.django_db
def test_a_resumed_run_records_exactly_its_new_citations(
    matter_chat: Chat, scripted_backend: Callable[..., Script], settings: LazySettings
) -> None:
    settings.COURTLISTENER_API_TOKEN = ""
    fisher = factories.CaselawOpinionFactory.create(
        provider="local", case_name="Fisher v. University of Texas at Austin", citation="570 U.S. 297 (2013)"
    )
    cut = BENCH_LIKE_ANSWER.index("That deference")
    first, rest = BENCH_LIKE_ANSWER[:cut], BENCH_LIKE_ANSWER[cut:]
    # Given a turn interrupted after its first paragraph
    _, message = start_turn(chat=matter_chat, content="q")
    finalize_turn(message=message, content=first, status=Message.Status.INTERRUPTED)
    before = list(CaseCitation.objects.filter(message=message).values_list("answer_offset_start", "pk"))
    assert len(before) == 2
    # when it is resumed and the run streams the rest
    message.refresh_from_db()
    assert reopen_interrupted_turn(message=message)
    rng = random.Random(7)
    pieces, at = [], 0
    while at < len(rest):
        size = rng.randint(1, 9)
        pieces.append(TextDelta(rest[at : at + size]))
        at += size
    scripted_backend(*pieces, FinalAnswer(citations=()))
    TurnRun(message=message, backend=ScriptedBackend(), tools={}).run_to_end()

    # then the earlier rows stay as they were and each new span is recorded once, as the whole text's check has it
    rows = list(CaseCitation.objects.filter(message=message).order_by("answer_offset_start"))
    whole = [c for c in check_case_citations(BENCH_LIKE_ANSWER) if c.kind is not Kind.STATUTE]
    assert [r.answer_offset_start for r in rows] == [c.start for c in whole]
    assert {(r.answer_offset_start, r.pk) for r in rows} >= set(before)
    short = next(r for r in rows if r.kind == Kind.SHORT.value)
    assert (short.status, short.opinion_id) == (Status.VERIFIED.value, fisher.pk)


@pytest.mark.django_db
def test_the_pin_check_reads_the_cited_opinions_texts_in_one_query(
    settings: LazySettings, django_assert_num_queries: Any
) -> None:
    settings.COURTLISTENER_API_TOKEN = ""
    for n in range(1, 6):
        factories.CaselawOpinionFactory.create(
            provider="local", case_name="Doe v. Roe", citation=f"{n} F.3d {n + 100}", text=f"*{n + 101} x *{n + 120}"
        )
    answer = " ".join(f"Doe v. Roe, {n} F.3d {n + 100}, {n + 110} (1st Cir. 2001)." for n in range(1, 6))

    with django_assert_num_queries(2):  # the lookup, then the texts
        checked = check_case_citations(answer)

    assert [c.pin_status for c in checked] == [
        "unchecked"
    ] * 5  # within each case; no passage quoted with it shows its page
