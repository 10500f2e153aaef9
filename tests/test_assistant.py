"""Assistant backends, passage retrieval and the turn runner (below the HTTP views)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import LazySettings
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from chats.assistant import (
    ExtractiveBackend,
    FinalAnswer,
    HistoryEntry,
    Script,
    ScriptedBackend,
    TextDelta,
    ToolCall,
    ToolResult,
    Turn,
    TurnFailed,
    TurnFinalized,
    TurnRun,
    load_backend,
)
from chats.assistant.events import AssistantEvent
from chats.assistant.extractive import NOTHING_FOUND
from chats.models import CaselawOpinion, Chat, Message, MessageToolSource
from chats.retrieval import passages, query_terms, rank_passages, sentence_spans
from chats.services import ClaimedCitation, ConsultedSource, reopen_interrupted_turn, start_turn
from chats.tools import CaselawSearchTool
from lqai_verify.verification import EXACT_MATCH, NormalizedSource
from tests import factories
from tests.conftest import CORPUS

QUESTION = (
    "Must the reviewing court be satisfied that no workable race-neutral alternative exists under strict scrutiny?"
)


# --- retrieval ----------------------------------------------------------------------------------------------------


@given(st.text(alphabet=st.sampled_from("ab .?!\n\u201dU.S v"), max_size=300))
@hypothesis_settings(max_examples=300, deadline=None)
def test_every_passage_is_a_verbatim_stripped_slice_of_its_text(text: str) -> None:
    for passage in passages(text):
        assert text[passage.start : passage.end] == passage.text
        assert passage.text == passage.text.strip()
    for start, end in sentence_spans(text):
        assert 0 <= start < end <= len(text)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.txt")), ids=lambda p: p.stem)
def test_corpus_passages_verify_as_exact_matches(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    source = NormalizedSource.build(text)

    found = passages(text)

    assert len(found) > 50
    for passage in found[::25]:
        match = source.verify(passage.text)
        assert match is not None
        assert (match.method, match.start, match.end) == (EXACT_MATCH, passage.start, passage.end)


def test_sentences_do_not_end_at_citation_abbreviations() -> None:
    text = (
        "See Grutter v. Bollinger, 539 U. S. 306, 326 (2003). The Court so held in Asher (Ky. 1939). "
        "\u201cThen it ended.\u201d and so on. Next."
    )

    spans = [text[s:e] for s, e in sentence_spans(text)]

    assert spans == [
        "See Grutter v. Bollinger, 539 U. S. 306, 326 (2003).",
        "The Court so held in Asher (Ky. 1939).",
        "\u201cThen it ended.\u201d and so on.",
        "Next.",
    ]


def test_ranked_passages_never_overlap(db: None) -> None:
    # The short first sentence is a candidate alone and joined with the next: only one of them is chosen
    text = "Strict scrutiny governs. Strict scrutiny applies to every racial classification, whatever its purpose."
    candidates = passages(text)
    assert len(candidates) == 2

    best = rank_passages(candidates, "strict scrutiny racial classification", limit=2)

    assert len(best) == 1


def test_query_terms_drop_stop_words_and_repeats() -> None:
    assert query_terms("What is THE standard, the Standard of review?") == ["standard", "review"]


def test_rank_passages_prefers_more_and_rarer_terms(db: None) -> None:
    text = (
        "Strict scrutiny applies to every racial classification that the state makes, whatever its purpose. "
        "A university may consider race only under strict scrutiny and narrow tailoring, said the Court. "
        "The weather was pleasant on the day of the hearing, and nothing else of note happened at all."
    )
    candidates = passages(text)
    assert len(candidates) == 3

    best = rank_passages(candidates, "narrow tailoring under strict scrutiny", limit=3)

    assert [p.text for p in best] == [candidates[1].text, candidates[0].text]
    assert rank_passages(candidates, "of the and", limit=3) == []


# --- the extractive backend -------------------------------------------------------------------------------------


def _turn(chat: Chat, question: str = QUESTION, *, tools: bool = False, partial: str = "") -> Turn:
    return Turn(
        chat=chat,
        history=(
            HistoryEntry("user", "earlier question"),
            HistoryEntry("assistant", "earlier"),
            HistoryEntry("user", question),
        ),
        tools={"caselaw_search": CaselawSearchTool()} if tools else {},
        partial=partial,
    )


def _answer(events: list[AssistantEvent]) -> tuple[str, FinalAnswer]:
    assert isinstance(events[-1], FinalAnswer)
    return "".join(e.text for e in events if isinstance(e, TextDelta)), events[-1]


@pytest.mark.django_db
def test_extractive_backend_quotes_matter_documents_verbatim(matter_chat: Chat) -> None:
    events = list(ExtractiveBackend().respond(_turn(matter_chat)))

    content, final = _answer(events)
    assert not any(isinstance(e, ToolCall | ToolResult) for e in events)
    assert content.startswith("From the matter's documents:\n")
    assert final.citations
    document = matter_chat.project.documents.get()  # type: ignore[union-attr]
    for claim in final.citations:
        assert claim.document_id == document.pk
        assert claim.opinion_id is None
        assert claim.quote in content
        match = NormalizedSource.build(document.content).verify(claim.quote)
        assert match is not None
        assert match.method == EXACT_MATCH


@pytest.mark.django_db
def test_extractive_backend_in_tool_mode_searches_caselaw_first_and_quotes_the_best_opinion(
    matter_chat: Chat, local_opinion: CaselawOpinion
) -> None:
    events = list(ExtractiveBackend().respond(_turn(matter_chat, tools=True)))

    call, result = events[0], events[1]
    assert call == ToolCall(call_id="call_1", tool="caselaw_search", arguments={"query": QUESTION})
    assert isinstance(result, ToolResult)
    assert result.call_id == "call_1"
    assert [s.label for s in result.sources] == [local_opinion.case_name]
    content, final = _answer(events)
    assert "From the caselaw consulted:" in content
    [caselaw_claim] = [c for c in final.citations if c.opinion_id is not None]
    assert caselaw_claim.opinion_id == local_opinion.pk
    match = NormalizedSource.build(local_opinion.text).verify(caselaw_claim.quote)
    assert match is not None
    assert match.method == EXACT_MATCH


@pytest.mark.django_db
def test_extractive_backend_is_deterministic(matter_chat: Chat, local_opinion: CaselawOpinion) -> None:
    first = list(ExtractiveBackend().respond(_turn(matter_chat, tools=True)))
    second = list(ExtractiveBackend().respond(_turn(matter_chat, tools=True)))

    assert first == second


@pytest.mark.django_db
def test_extractive_backend_says_so_when_nothing_matches(user: factories.User) -> None:
    chat = factories.ChatFactory.create(project=None, owner=user)

    content, final = _answer(list(ExtractiveBackend().respond(_turn(chat))))

    assert content == NOTHING_FOUND
    assert final.citations == ()


@pytest.mark.django_db
def test_extractive_backend_continues_after_a_partial_answer(matter_chat: Chat) -> None:
    full, final = _answer(list(ExtractiveBackend().respond(_turn(matter_chat))))
    partial = full[: len(full) // 2]

    rest, resumed_final = _answer(list(ExtractiveBackend().respond(_turn(matter_chat, partial=partial))))

    assert partial + rest == full
    assert resumed_final == final


@pytest.mark.django_db
def test_extractive_backend_answers_anew_after_a_partial_answer_it_would_not_give(matter_chat: Chat) -> None:
    full, _ = _answer(list(ExtractiveBackend().respond(_turn(matter_chat))))

    rest, _ = _answer(list(ExtractiveBackend().respond(_turn(matter_chat, partial="Something else"))))

    assert rest == "\n\n" + full


def test_the_default_backend_setting_names_the_extractive_backend(settings: LazySettings) -> None:
    from lqai import settings as project_settings

    assert project_settings.LQAI_ASSISTANT_BACKEND == "chats.assistant.ExtractiveBackend"
    settings.LQAI_ASSISTANT_BACKEND = project_settings.LQAI_ASSISTANT_BACKEND
    assert isinstance(load_backend(), ExtractiveBackend)
    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.ScriptedBackend"
    assert isinstance(load_backend(), ScriptedBackend)


# --- the scripted backend -----------------------------------------------------------------------------------------


def test_scripted_backend_replays_its_script_and_records_the_turn(scripted_backend: Callable[..., Script]) -> None:
    chat = factories.ChatFactory.build()
    script = scripted_backend(TextDelta("a"), FinalAnswer())

    events = list(load_backend().respond(_turn(chat)))

    assert events == [TextDelta("a"), FinalAnswer()]
    assert [t.question for t in script.turns] == [QUESTION]


def test_scripted_backend_raises_the_exceptions_of_its_script(scripted_backend: Callable[..., Script]) -> None:
    scripted_backend(TextDelta("a"), RuntimeError("model down"))
    events = load_backend().respond(_turn(factories.ChatFactory.build()))

    assert next(events) == TextDelta("a")
    with pytest.raises(RuntimeError, match="model down"):
        next(events)


def test_scripted_backend_without_a_script_refuses() -> None:
    with pytest.raises(RuntimeError, match="no script"):
        next(ScriptedBackend().respond(_turn(factories.ChatFactory.build())))


# --- the turn runner ----------------------------------------------------------------------------------------------

SOURCE = ConsultedSource(
    source_kind="mcp", tool="lookup", label="KRS 117.265", provider="statutes", url="https://x.test/1"
)


def _run(chat: Chat, *steps: object) -> tuple[TurnRun, Script]:
    _, message = start_turn(chat=chat, content=QUESTION, assistant_status=Message.Status.STREAMING)
    with ScriptedBackend.scripted(*steps) as script:  # type: ignore[arg-type]
        return TurnRun(message=message, backend=ScriptedBackend(), tools={}), script


def _drain(run: TurnRun, script: Script) -> list[object]:
    with ScriptedBackend.scripted(*script.steps):
        return list(run)


@pytest.mark.django_db
def test_a_run_finalizes_complete_with_content_claims_and_deduplicated_sources(matter_chat: Chat) -> None:
    document = matter_chat.project.documents.get()  # type: ignore[union-attr]
    result = ToolResult(call_id="1", tool="lookup", payload={}, sources=(SOURCE, SOURCE))
    run, script = _run(
        matter_chat,
        ToolCall("1", "lookup", {}),
        result,
        TextDelta("Hello "),
        TextDelta("world"),
        FinalAnswer((ClaimedCitation(quote="strict scrutiny", document_id=document.pk),)),
    )

    events = _drain(run, script)

    assert [type(e) for e in events] == [ToolCall, ToolResult, TextDelta, TextDelta, TurnFinalized]
    message = Message.objects.get(pk=run.message.pk)
    assert (message.status, message.content) == (Message.Status.COMPLETE, "Hello world")
    assert message.citations.count() == 1
    assert message.tool_sources.count() == 1


@pytest.mark.django_db
def test_a_run_closed_before_it_starts_is_finalized_interrupted(matter_chat: Chat) -> None:
    run, _ = _run(matter_chat, TextDelta("never sent"))

    run.close()
    run.close()  # idempotent

    message = Message.objects.get(pk=run.message.pk)
    assert (message.status, message.content) == (Message.Status.INTERRUPTED, "")


@pytest.mark.django_db
def test_a_run_closed_midway_keeps_what_was_produced(matter_chat: Chat) -> None:
    steps = (
        ToolResult(call_id="1", tool="lookup", payload={}, sources=(SOURCE,)),
        TextDelta("partial "),
        TextDelta("never sent"),
        FinalAnswer(),
    )
    run, _ = _run(matter_chat)

    def consume() -> Iterator[object]:
        with ScriptedBackend.scripted(*steps):
            yield next(run)
            yield next(run)
            run.close()

    list(consume())

    message = Message.objects.get(pk=run.message.pk)
    assert (message.status, message.content) == (Message.Status.INTERRUPTED, "partial ")
    assert list(message.tool_sources.values_list("label", flat=True)) == ["KRS 117.265"]


@pytest.mark.django_db
@pytest.mark.parametrize("failure", [RuntimeError("model down"), "not an event"])
def test_a_backend_failure_finalizes_the_turn_as_failed(matter_chat: Chat, failure: object) -> None:
    steps = (ToolResult(call_id="1", tool="lookup", payload={}, sources=(SOURCE,)), TextDelta("so far"), failure)
    run, script = _run(matter_chat, *steps)

    events = _drain(run, script)

    assert isinstance(events[-2], TurnFailed)
    assert isinstance(events[-1], TurnFinalized)
    message = Message.objects.get(pk=run.message.pk)
    assert (message.status, message.content) == (Message.Status.FAILED, "so far")
    assert message.tool_sources.count() == 1


@pytest.mark.django_db
def test_a_resumed_run_continues_the_content_and_skips_sources_already_recorded(matter_chat: Chat) -> None:
    _, message = start_turn(chat=matter_chat, content=QUESTION, assistant_status=Message.Status.INTERRUPTED)
    message.content = "Half an "
    message.save(update_fields=["content"])
    factories.MessageToolSourceFactory.create(
        message=message,
        source_kind="mcp",
        tool="lookup",
        provider="statutes",
        label="KRS 117.265",
        url="https://x.test/1",
        external_ref="",
    )
    other = ConsultedSource(source_kind="mcp", tool="lookup", label="KRS 117.235", provider="statutes")
    steps = (
        ToolResult(call_id="1", tool="lookup", payload={}, sources=(SOURCE, other)),
        TextDelta("answer."),
        FinalAnswer(),
    )
    assert reopen_interrupted_turn(message=message)  # the resume's claim, as the resume view takes it

    with ScriptedBackend.scripted(*steps) as script:
        run = TurnRun(message=message, backend=ScriptedBackend(), tools={})
        list(run)

    assert script.turns[0].partial == "Half an "
    assert [e.content for e in script.turns[0].history] == [QUESTION]
    message.refresh_from_db()
    assert (message.status, message.content) == (Message.Status.COMPLETE, "Half an answer.")
    assert sorted(MessageToolSource.objects.filter(message=message).values_list("label", flat=True)) == [
        "KRS 117.235",
        "KRS 117.265",
    ]


@pytest.mark.django_db
def test_history_holds_earlier_answers_but_not_failed_or_pending_ones(matter_chat: Chat) -> None:
    factories.UserMessageFactory.create(chat=matter_chat, content="q1")
    factories.MessageFactory.create(chat=matter_chat, content="a1")
    factories.MessageFactory.create(chat=matter_chat, content="broken", status=Message.Status.FAILED)
    _, message = start_turn(chat=matter_chat, content="q2")

    with ScriptedBackend.scripted(FinalAnswer()) as script:
        list(TurnRun(message=message, backend=ScriptedBackend(), tools={}))

    assert [(e.role, e.content) for e in script.turns[0].history] == [
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
    ]
