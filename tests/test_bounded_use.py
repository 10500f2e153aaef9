"""Bounded use of the turn endpoints: throttles, concurrent streams, stream duration and heartbeats,
stuck turns, paginated messages, and questions as long as a message may be."""

from __future__ import annotations

import itertools
import string

import pytest
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from chats.models import CaselawOpinion, Chat
from chats.retrieval import MAX_QUERY_TERMS, query_terms
from tests.test_streaming import names, sse_events, stream

pytestmark = pytest.mark.django_db


def _distinct_words(count: int) -> list[str]:
    """``count`` distinct two- and three-letter content words (no stop words), shortest first."""
    words = ("".join(letters) for size in (2, 3) for letters in itertools.product(string.ascii_lowercase, repeat=size))
    return list(itertools.islice((w for w in words if query_terms(w)), count))


# --- long questions -----------------------------------------------------------------------------------------------


def test_query_terms_are_capped_to_the_first_ones() -> None:
    words = _distinct_words(MAX_QUERY_TERMS + 10)
    assert query_terms(" ".join(words)) == words[:MAX_QUERY_TERMS]


def test_a_question_of_two_thousand_distinct_words_is_answered(
    api_client: APIClient, matter_chat: Chat, local_opinion: CaselawOpinion
) -> None:
    """The tool loop searches the matter's documents and the opinions with it (SQLite: one OR-ed
    condition per term; PostgreSQL: one tsquery), and answers from both."""
    question = "strict scrutiny " + " ".join(_distinct_words(2000))
    assert len(question) <= django_settings.LQAI_MAX_MESSAGE_CHARS

    events = list(sse_events(stream(api_client, matter_chat, question).streaming_content))  # type: ignore[arg-type]

    assert names(events)[-1] == "done"
    assert events[-1][1]["status"] == "complete"
    kinds = {data["kind"] for name, data in events if name == "citation"}
    assert kinds == {"kb_document", "caselaw"}
