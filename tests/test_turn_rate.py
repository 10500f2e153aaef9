"""The turn rate is counted atomically in the database (chats/throttles.py): concurrent requests of one user,
real threads each with its own connection, get exactly the rate's number of turns through a window."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from chats.assistant import AssistantEvent, FinalAnswer, TextDelta, Turn
from chats.models import Chat, Message, TurnRateCount
from chats.throttles import count_turn

pytestmark = pytest.mark.django_db


class InstantBackend:
    """Answers at once, so that the requests overlap in the throttle and in finalize, not in a model."""

    def respond(self, turn: Turn) -> Iterator[AssistantEvent]:
        yield TextDelta("Answered.")
        yield FinalAnswer()


def _at_the_start_of_a_window(period: int, margin: float) -> None:
    """Wait, if needed, until the current window has at least ``margin`` seconds left: the test must not
    straddle two windows."""
    left = period - time.time() % period
    if left < margin:
        time.sleep(left + 0.05)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_45_simultaneous_turns_at_30_a_minute_let_exactly_30_through(
    committed_matter_chat: tuple[APIClient, Chat], settings: LazySettings
) -> None:
    # Given a user whose rate is 30 turns a minute, and 45 of her requests at the same moment
    settings.LQAI_THROTTLE_TURNS = "30/min"
    settings.LQAI_ASSISTANT_BACKEND = "tests.test_turn_rate.InstantBackend"
    _, chat = committed_matter_chat
    user = chat.owner
    barrier = threading.Barrier(45, timeout=30)

    def ask(_: int) -> int:
        client = APIClient()
        client.force_authenticate(user=user)
        try:
            barrier.wait()
            response = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "q"}, format="json")
            return response.status_code
        finally:
            connection.close()

    _at_the_start_of_a_window(60, margin=20)
    with ThreadPoolExecutor(max_workers=45) as pool:
        codes = list(pool.map(ask, range(45), timeout=60))

    # Then exactly 30 turns were started, and the 15 others were refused with 429
    assert sorted(codes) == [201] * 30 + [429] * 15
    assert Message.objects.filter(chat=chat, role=Message.Role.ASSISTANT).count() == 30
    assert TurnRateCount.objects.get(user=user).turns == 45


def test_a_count_goes_on_within_its_window_and_starts_again_in_the_next_pruning_the_old(
    committed_matter_chat: tuple[APIClient, Chat],
) -> None:
    _, chat = committed_matter_chat
    assert chat.owner is not None
    user_id = chat.owner.pk

    assert [count_turn(user_id=user_id, window_start=600) for _ in range(3)] == [1, 2, 3]
    assert count_turn(user_id=user_id, window_start=660) == 1

    assert list(TurnRateCount.objects.values_list("window_start", "turns")) == [(660, 1)]


def test_over_the_rate_the_retry_after_is_the_rest_of_the_window(
    api_client: APIClient, matter_chat: Chat, settings: LazySettings
) -> None:
    settings.LQAI_THROTTLE_TURNS = "1/hour"
    settings.LQAI_ASSISTANT_BACKEND = "tests.test_turn_rate.InstantBackend"
    _at_the_start_of_a_window(3600, margin=5)
    url = f"/api/chats/{matter_chat.pk}/messages/"

    first = api_client.post(url, {"content": "q"}, format="json")
    second = api_client.post(url, {"content": "q"}, format="json")

    assert (first.status_code, second.status_code) == (201, 429)
    left = 3600 - time.time() % 3600
    assert abs(int(second["Retry-After"]) - left) <= 2


def test_the_counts_are_shown_read_only_in_the_admin_to_superusers_only(admin_client: Client, user: User) -> None:
    TurnRateCount.objects.create(user=user, window_start=600, turns=3)
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_turnratecount"))
    staff_client = Client()
    staff_client.force_login(staff)
    url = reverse("admin:chats_turnratecount_changelist")

    assert admin_client.get(url).status_code == 200
    assert admin_client.post(reverse("admin:chats_turnratecount_add"), {"turns": 1}).status_code == 403
    assert staff_client.get(url).status_code == 403
