"""Access is the matter's: who sees a chat, and what a removal from a matter revokes.

Two or more users against the real views: alice owns a matter, bob is (then is no longer) a member.
A chat in a matter is visible to the matter's current owner and members only, its creator included
only while she is one of them; a matter-less chat to its owner only. Removal takes effect on the
next request, everywhere: the chat list, the detail, the single-shot and streamed turns, the
resume and the ledger trace.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from chats.models import Chat, DocumentQuote, Message, Project
from chats.selectors import chats_visible_to
from citations.models import CitationLedgerEntry
from tests import factories

QUESTION = "Must the reviewing court be satisfied that no workable race-neutral alternative exists?"


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


def ways_in(chat: Chat, message: Message) -> dict[str, tuple[str, str]]:
    """Every endpoint that reads or writes one chat (method, url)."""
    return {
        "detail": ("get", f"/api/chats/{chat.pk}/"),
        "turn": ("post", f"/api/chats/{chat.pk}/messages/"),
        "stream": ("post", f"/api/chats/{chat.pk}/messages/stream/"),
        "resume": ("post", f"/api/chats/{chat.pk}/messages/{message.pk}/resume/"),
        "trace": ("get", f"/api/chats/{chat.pk}/ledger/"),
    }


def listed(client: APIClient) -> set[str]:
    response = client.get("/api/chats/")
    assert response.status_code == 200
    return {row["id"] for row in response.json()["results"]}


@pytest.fixture
def alice(db: None) -> User:
    return factories.UserFactory.create(username="alice")


@pytest.fixture
def bob(db: None) -> User:
    return factories.UserFactory.create(username="bob")


@pytest.fixture
def matter(alice: User, bob: User) -> Project:
    """alice's matter with one KB document; bob is a member."""
    project = factories.ProjectFactory.create(owner=alice, members=[bob], name="Admissions")
    factories.DocumentFactory.create(project=project, title="Strict scrutiny memo")
    return project


@pytest.fixture
def bobs_chat(matter: Project, bob: User) -> Chat:
    """A chat bob created in the matter, with an interrupted turn of his (so that resume has a target)
    and that turn's quote in the ledger."""
    chat = factories.ChatFactory.create(project=matter, owner=bob)
    factories.UserMessageFactory.create(chat=chat, content=QUESTION)
    factories.assembled_turn(chat, kb=1, caselaw=0, tools=0)
    factories.MessageFactory.create(chat=chat, status=Message.Status.INTERRUPTED, content="Half an")
    return chat


def interrupted_turn(chat: Chat) -> Message:
    return chat.messages.get(status=Message.Status.INTERRUPTED)


# --- the rule ---------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_matter_chat_is_visible_to_the_matters_owner_and_members_only(alice: User, bob: User) -> None:
    carol = factories.UserFactory.create(username="carol")
    project = factories.ProjectFactory.create(owner=alice, members=[bob])
    alices = factories.ChatFactory.create(project=project, owner=alice)
    bobs = factories.ChatFactory.create(project=project, owner=bob)
    # A chat whose creator is not (or no longer) in its matter
    carols = factories.ChatFactory.create(project=project, owner=carol)
    carols_own = factories.ChatFactory.create(project=None, owner=carol)

    assert set(chats_visible_to(alice)) == {alices, bobs, carols}
    assert set(chats_visible_to(bob)) == {alices, bobs, carols}
    assert set(chats_visible_to(carol)) == {carols_own}


@pytest.mark.django_db
def test_a_matterless_chat_is_visible_to_its_owner_only(alice: User, bob: User) -> None:
    own = factories.ChatFactory.create(project=None, owner=bob)
    factories.ProjectFactory.create(owner=alice, members=[bob])

    assert list(chats_visible_to(bob)) == [own]
    assert list(chats_visible_to(alice)) == []


@pytest.mark.django_db
def test_each_chat_is_listed_once_whatever_the_ways_to_it(alice: User) -> None:
    # alice owns the matter and is also listed as its member
    project = factories.ProjectFactory.create(owner=alice, members=[alice])
    chat = factories.ChatFactory.create(project=project, owner=alice)

    assert list(chats_visible_to(alice)) == [chat]


# --- removal --------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_before_removal_the_member_uses_every_way_in(bob: User, bobs_chat: Chat) -> None:
    # A baseline for the revocation test below: each way in answers bob while he is a member
    client = client_for(bob)
    urls = ways_in(bobs_chat, interrupted_turn(bobs_chat))

    assert str(bobs_chat.pk) in listed(client)
    assert client.get(urls["detail"][1]).status_code == 200
    assert client.get(urls["trace"][1]).status_code == 200
    assert client.post(urls["turn"][1], {"content": QUESTION}, format="json").status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize("way", ["detail", "turn", "stream", "resume", "trace"])
def test_removal_revokes_every_way_into_the_chats_she_created(
    matter: Project, alice: User, bob: User, bobs_chat: Chat, way: str
) -> None:
    # Given bob, a member who created a chat in the matter and used it
    client = client_for(bob)
    method, url = ways_in(bobs_chat, interrupted_turn(bobs_chat))[way]
    before = (Message.objects.count(), DocumentQuote.objects.count(), CitationLedgerEntry.objects.count())

    # When alice removes him from the matter
    matter.members.remove(bob)

    # Then his next request is refused as if the chat did not exist, and writes nothing
    response = getattr(client, method)(url, {"content": QUESTION}, format="json")
    assert response.status_code == 404
    assert (Message.objects.count(), DocumentQuote.objects.count(), CitationLedgerEntry.objects.count()) == before
    # while alice, the matter's owner, still has the chat
    assert client_for(alice).get(f"/api/chats/{bobs_chat.pk}/").status_code == 200


@pytest.mark.django_db
def test_removal_takes_the_chats_off_her_list(matter: Project, alice: User, bob: User, bobs_chat: Chat) -> None:
    own = factories.ChatFactory.create(project=None, owner=bob)
    assert listed(client_for(bob)) == {str(bobs_chat.pk), str(own.pk)}

    matter.members.remove(bob)

    assert listed(client_for(bob)) == {str(own.pk)}
    assert str(bobs_chat.pk) in listed(client_for(alice))


@pytest.mark.django_db
def test_a_removed_member_cannot_quote_documents_added_after_her_removal(
    matter: Project, bob: User, bobs_chat: Chat
) -> None:
    # Given bob removed, then a new document added to the matter
    matter.members.remove(bob)
    secret = factories.DocumentFactory.create(
        project=matter, title="Settlement strategy", content="The client would accept a settlement of two million."
    )
    client = client_for(bob)

    # When he asks about it in his old chat, single-shot or streamed
    for path in ("messages/", "messages/stream/"):
        response = client.post(f"/api/chats/{bobs_chat.pk}/{path}", {"content": "settlement"}, format="json")
        # Then he cannot post at all, so no turn of his quotes it
        assert response.status_code == 404
    assert not DocumentQuote.objects.filter(document=secret).exists()
    assert not Message.objects.filter(chat=bobs_chat, content__contains="settlement").exists()


@pytest.mark.django_db
def test_a_removed_member_cannot_open_a_new_chat_in_the_matter(matter: Project, bob: User) -> None:
    matter.members.remove(bob)

    response = client_for(bob).post("/api/chats/", {"project": str(matter.pk)}, format="json")

    assert response.status_code == 400
    assert response.json() == {"project": ["unknown project"]}
    assert not Chat.objects.filter(project=matter, owner=bob).exists()


@pytest.mark.django_db
def test_adding_her_back_restores_access(matter: Project, bob: User, bobs_chat: Chat) -> None:
    client = client_for(bob)
    matter.members.remove(bob)
    assert client.get(f"/api/chats/{bobs_chat.pk}/").status_code == 404

    matter.members.add(bob)

    assert client.get(f"/api/chats/{bobs_chat.pk}/").status_code == 200


@pytest.mark.django_db
def test_a_new_owner_gets_the_matter_and_the_old_owner_loses_it(
    matter: Project, alice: User, bob: User, bobs_chat: Chat
) -> None:
    carol = factories.UserFactory.create(username="carol")
    alices = factories.ChatFactory.create(project=matter, owner=alice)

    matter.owner = carol
    matter.save(update_fields=["owner"])

    assert set(chats_visible_to(carol)) == {alices, bobs_chat}
    assert set(chats_visible_to(alice)) == set()


# --- removal while requests run (PostgreSQL) -------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_removal_holds_for_every_request_that_starts_after_it_commits() -> None:
    # Given bob reading his matter chat's detail and trace from four threads, in a loop
    alice = factories.UserFactory.create(username="alice")
    bob = factories.UserFactory.create(username="bob")
    matter = factories.ProjectFactory.create(owner=alice, members=[bob])
    factories.DocumentFactory.create(project=matter)
    chat = factories.ChatFactory.create(project=matter, owner=bob)
    factories.assembled_turn(chat, kb=1, caselaw=0, tools=0)
    paths = [f"/api/chats/{chat.pk}/", f"/api/chats/{chat.pk}/ledger/"]
    results: list[tuple[float, int]] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader(index: int) -> None:
        client = client_for(bob)
        try:
            for i in range(2000):  # bounded: the test ends by `stop`, long before
                if stop.is_set():
                    return
                started = time.monotonic()
                status = client.get(paths[(index + i) % 2]).status_code
                with lock:
                    results.append((started, status))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    def statuses_since(moment: float) -> list[int]:
        with lock:
            return [status for started, status in results if started > moment]

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(4)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while len(statuses_since(0)) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)

        # When alice removes him (autocommit: committed when remove() returns)
        matter.members.remove(bob)
        removed_at = time.monotonic()

        while len(statuses_since(removed_at)) < 40 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads)

    # Then every request before the removal was served, and every one that started after it was refused
    before = [status for started, status in results if started <= removed_at]
    after = statuses_since(removed_at)
    assert len(before) >= 20
    assert len(after) >= 40
    assert set(after) == {404}
    assert 200 in before
    assert set(before) <= {200, 404}  # one in flight across the commit may see either side


@pytest.mark.django_db
def test_the_trace_and_the_chat_agree_on_who_sees_what(
    matter: Project, alice: User, bob: User, bobs_chat: Chat
) -> None:
    # The trace resolves its chat through the same selector: one rule, same answers
    outsider = factories.UserFactory.create(username="mallory")
    for who, expected in ((alice, 200), (bob, 200), (outsider, 404)):
        client = client_for(who)
        assert client.get(f"/api/chats/{bobs_chat.pk}/ledger/").status_code == expected
        assert client.get(f"/api/chats/{bobs_chat.pk}/").status_code == expected
