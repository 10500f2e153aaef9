"""A turn answers its own question: the assistant message references the user message it answers
(``Message.reply_to``), and the runner builds the history up to and including that message.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from chats.assistant import FinalAnswer, ScriptedBackend, TurnRun
from chats.assistant.runner import turn_history
from chats.models import Chat, Message
from chats.record import purging
from chats.services import start_turn
from tests import factories
from tests.test_streaming import sse_events


def _answer(chat: Chat, question: Message, **fields: Any) -> Message:
    return factories.MessageFactory.build(chat=chat, reply_to=question, **fields)


# --- the schema ------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_start_turn_links_the_answer_to_its_question(matter_chat: Chat) -> None:
    question, answer = start_turn(chat=matter_chat, content="q1")

    assert answer.reply_to == question
    assert question.reply_to is None
    assert list(question.replies.all()) == [answer]


@pytest.mark.django_db
def test_only_an_assistant_message_replies_full_clean(matter_chat: Chat) -> None:
    question = factories.UserMessageFactory.create(chat=matter_chat)
    second = factories.UserMessageFactory.build(chat=matter_chat, reply_to=question)

    with pytest.raises(ValidationError, match="Only an assistant message can reply to a message"):
        second.full_clean()


@pytest.mark.django_db
def test_only_an_assistant_message_replies_insert(matter_chat: Chat) -> None:
    question = factories.UserMessageFactory.create(chat=matter_chat)

    expected = "messages_reply_to_only_assistant" if connection.vendor == "postgresql" else None
    with pytest.raises(IntegrityError, match=expected), transaction.atomic():
        factories.UserMessageFactory.create(chat=matter_chat, reply_to=question)


@pytest.mark.django_db
def test_one_answer_per_question_full_clean(matter_chat: Chat) -> None:
    question, _ = start_turn(chat=matter_chat, content="q1")

    with pytest.raises(ValidationError, match="This question already has an answer"):
        _answer(matter_chat, question).full_clean()


@pytest.mark.django_db
def test_one_answer_per_question_insert(matter_chat: Chat) -> None:
    question, _ = start_turn(chat=matter_chat, content="q1")

    expected = "messages_reply_to_uniq" if connection.vendor == "postgresql" else None
    with pytest.raises(IntegrityError, match=expected), transaction.atomic():
        _answer(matter_chat, question).save()


@pytest.mark.django_db
def test_deleting_a_question_deletes_its_answer(matter_chat: Chat) -> None:
    question, answer = start_turn(chat=matter_chat, content="q1")

    with purging(matter_chat.project_id):  # messages leave only with their matter's purge
        question.delete()

    assert not Message.objects.filter(pk=answer.pk).exists()


@pytest.mark.django_db
def test_the_api_shows_which_question_an_answer_answers(api_client: APIClient, matter_chat: Chat) -> None:
    turn = api_client.post(f"/api/chats/{matter_chat.pk}/messages/", {"content": "strict scrutiny"}, format="json")
    assert turn.status_code == 201, turn.content
    assert turn.json()["message"]["reply_to"] == turn.json()["user_message_id"]

    question, answer = api_client.get(f"/api/chats/{matter_chat.pk}/messages/").json()["results"]
    assert (question["reply_to"], answer["reply_to"]) == (None, question["id"])


@pytest.mark.django_db
def test_the_admin_shows_the_question_by_id_without_listing_every_message(
    admin_client: Client, matter_chat: Chat
) -> None:
    question, answer = start_turn(chat=matter_chat, content="q1")

    page = admin_client.get(reverse("admin:chats_message_change", args=[answer.pk])).content.decode()

    # read-only (a message is a record), shown as the question's link, never as a list of every message
    assert f"user message {question.pk}" in page
    assert '<select name="reply_to"' not in page


# --- the history -----------------------------------------------------------------------------------------------------


def _history(message: Message) -> list[tuple[str, str]]:
    return [(e.role, e.content) for e in turn_history(message)]


@pytest.mark.django_db
def test_the_history_ends_with_the_turns_own_question_not_a_later_one(matter_chat: Chat) -> None:
    # Given a turn started, then another question posted to the chat before the first is answered
    factories.UserMessageFactory.create(chat=matter_chat, content="q0")
    factories.MessageFactory.create(chat=matter_chat, content="a0")
    _, first = start_turn(chat=matter_chat, content="q1")
    _, second = start_turn(chat=matter_chat, content="q2")

    # Then each turn's history ends with its own question
    assert _history(first) == [("user", "q0"), ("assistant", "a0"), ("user", "q1")]
    assert _history(second) == [("user", "q0"), ("assistant", "a0"), ("user", "q1"), ("user", "q2")]

    # And the backend is asked that question, also when the later turn ran first
    with ScriptedBackend.scripted(FinalAnswer(), FinalAnswer()) as script:
        list(TurnRun(message=second, backend=ScriptedBackend(), tools={}))
        list(TurnRun(message=first, backend=ScriptedBackend(), tools={}))
    assert [turn.question for turn in script.turns] == ["q2", "q1"]


@pytest.mark.django_db
def test_a_resumed_turn_still_answers_its_own_question(matter_chat: Chat) -> None:
    _, interrupted = start_turn(chat=matter_chat, content="q1", assistant_status=Message.Status.INTERRUPTED)
    _, later = start_turn(chat=matter_chat, content="q2")
    later.status = Message.Status.COMPLETE
    later.save(update_fields=["status"])

    assert _history(interrupted) == [("user", "q1")]


@pytest.mark.django_db
def test_ties_on_created_at_are_broken_by_id(matter_chat: Chat) -> None:
    # Given three questions created at the very same instant
    instant = timezone.now()
    questions = [
        factories.UserMessageFactory.create(chat=matter_chat, content=f"q{i}", created_at=instant) for i in range(3)
    ]
    by_id = sorted(questions, key=lambda m: str(m.pk))
    answer = factories.MessageFactory.create(
        chat=matter_chat,
        reply_to=by_id[1],
        status=Message.Status.STREAMING,
        created_at=instant + datetime.timedelta(microseconds=1),
    )

    # Then the history is in id order and stops at the question, whatever the insertion order
    assert _history(answer) == [("user", by_id[0].content), ("user", by_id[1].content)]


@pytest.mark.django_db
def test_a_turn_stored_before_reply_to_falls_back_to_the_latest_question_before_it(matter_chat: Chat) -> None:
    factories.UserMessageFactory.create(chat=matter_chat, content="q1")
    old = factories.MessageFactory.create(chat=matter_chat, status=Message.Status.PENDING, content="", reply_to=None)
    factories.UserMessageFactory.create(chat=matter_chat, content="q2")

    assert _history(old) == [("user", "q1")]
    with ScriptedBackend.scripted(FinalAnswer()) as script:
        list(TurnRun(message=old, backend=ScriptedBackend(), tools={}))
    assert script.turns[0].question == "q1"


# --- concurrent streamed turns in one chat (PostgreSQL) ---------------------------------------------------------------

TOPICS = (
    "aviation",
    "bankruptcy",
    "copyright",
    "defamation",
    "easement",
    "fiduciary",
    "garnishment",
    "habeas",
    "immigration",
    "jurisdiction",
    "kidnapping",
    "larceny",
    "malpractice",
    "negligence",
    "obscenity",
    "perjury",
)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_sixteen_concurrent_streamed_turns_in_one_chat_each_answer_their_own_question() -> None:
    # Given a matter chat shared by its owner and a member, and one document per topic
    owner = factories.UserFactory.create(username="alice")
    member = factories.UserFactory.create(username="bob")
    matter = factories.ProjectFactory.create(owner=owner, members=[member])
    documents = {
        topic: factories.DocumentFactory.create(
            project=matter,
            title=f"{topic.title()} memo",
            content=(
                f"This memo summarizes the settled law of {topic} for the firm. "
                f"A claim of {topic} is decided on the whole record by the trial court."
            ),
        )
        for topic in TOPICS
    }
    chat = factories.ChatFactory.create(project=matter, owner=owner)
    questions = {topic: f"How is a claim of {topic} decided?" for topic in TOPICS}
    barrier = threading.Barrier(len(TOPICS), timeout=60)
    outcomes: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    errors: list[BaseException] = []

    def ask(index: int, topic: str) -> None:
        try:
            client = APIClient()
            client.force_authenticate(user=owner if index % 2 else member)
            barrier.wait()
            response = client.post(
                f"/api/chats/{chat.pk}/messages/stream/",
                {"content": questions[topic]},
                format="json",
                HTTP_ACCEPT="text/event-stream",
            )
            assert response.status_code == 200, response.content
            assert isinstance(response, StreamingHttpResponse)
            outcomes[topic] = list(sse_events(response.streaming_content))
            response.close()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    # When all sixteen are posted at once
    threads = [threading.Thread(target=ask, args=(i, t), daemon=True) for i, t in enumerate(TOPICS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a turn did not finish"
    assert not errors, errors

    # Then each searched for its own question and answered it from its own topic's document
    wrong = []
    for topic, events in outcomes.items():
        calls = [data for name, data in events if name == "tool_call"]
        (done,) = [data for name, data in events if name == "done"]
        cited = {data["document"] for name, data in events if name == "citation" and data["kind"] == "kb_document"}
        answer = Message.objects.select_related("reply_to").get(pk=done["message_id"])
        if (
            [call["arguments"] for call in calls] != [{"query": questions[topic]}]
            or answer.reply_to is None
            or answer.reply_to.content != questions[topic]
            or str(documents[topic].pk) not in cited
            or topic not in answer.content
        ):
            wrong.append(topic)
        assert done["status"] == Message.Status.COMPLETE
    assert len(outcomes) == len(TOPICS)
    assert wrong == []
    assert Message.objects.filter(chat=chat, role=Message.Role.ASSISTANT).count() == len(TOPICS)
