"""Review of a turn's claims by people: roles in a matter (owner, reviewer, member), and per-claim decisions
sealed into the matter's record (issue 52)."""

from __future__ import annotations

import threading
import zipfile
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from chats.models import Chat, Message, Project, ProjectMembership, Role
from chats.record import AppendOnlyError
from chats.services import ClaimedCitation, finalize_turn, start_turn
from citations import keys
from citations.claims import claims_of
from citations.integrity import verify_record
from citations.models import ReviewDecision
from citations.reviews import NotAReviewer, record_decision
from lqai_verify import decisions as sealed_decisions
from lqai_verify import record
from lqai_verify.bundle import verify_bundle
from tests import factories
from tests.conftest import triggers_off

QUESTION = "Must the reviewing court be satisfied that no workable race-neutral alternative exists?"


def client_of(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


@pytest.fixture
def matter(user: User) -> Project:
    return factories.ProjectFactory.create(owner=user, name="Ballot matter")


def roles_of(body: dict[str, Any]) -> dict[str, str]:
    return {person["username"]: person["role"] for person in body["roles"]}


# --- roles ---------------------------------------------------------------------------------------------------


def test_the_owner_adds_a_reviewer_and_changes_her_role(user: User, other_user: User, matter: Project) -> None:
    owner = client_of(user)

    added = owner.post(
        f"/api/projects/{matter.pk}/members/", {"username": other_user.username, "role": "reviewer"}, format="json"
    )
    assert added.status_code == 201
    assert roles_of(added.json()) == {user.username: "owner", other_user.username: "reviewer"}

    changed = owner.patch(
        f"/api/projects/{matter.pk}/members/{other_user.username}/", {"role": "member"}, format="json"
    )
    assert changed.status_code == 200
    assert roles_of(changed.json())[other_user.username] == "member"
    assert ProjectMembership.objects.get(project=matter, user=other_user).role == Role.MEMBER


def test_a_new_member_is_a_member_and_re_adding_keeps_her_role(user: User, other_user: User, matter: Project) -> None:
    owner = client_of(user)
    assert (
        owner.post(f"/api/projects/{matter.pk}/members/", {"username": other_user.username}, format="json").status_code
        == 201
    )
    owner.patch(f"/api/projects/{matter.pk}/members/{other_user.username}/", {"role": "reviewer"}, format="json")

    again = owner.post(f"/api/projects/{matter.pk}/members/", {"username": other_user.username}, format="json")

    assert again.status_code == 200
    assert roles_of(again.json())[other_user.username] == "reviewer"


def test_only_the_owner_changes_roles(user: User, other_user: User, matter: Project) -> None:
    third = factories.UserFactory.create(username="carol")
    matter.members.add(other_user, through_defaults={"role": Role.REVIEWER})
    matter.members.add(third)
    reviewer = client_of(other_user)

    promote = reviewer.patch(
        f"/api/projects/{matter.pk}/members/{third.username}/", {"role": "reviewer"}, format="json"
    )
    add = reviewer.post(f"/api/projects/{matter.pk}/members/", {"username": "carol", "role": "reviewer"}, format="json")
    outsider = client_of(factories.UserFactory.create(username="eve")).patch(
        f"/api/projects/{matter.pk}/members/{third.username}/", {"role": "reviewer"}, format="json"
    )

    assert (promote.status_code, add.status_code, outsider.status_code) == (403, 403, 404)
    assert ProjectMembership.objects.get(project=matter, user=third).role == Role.MEMBER


@pytest.mark.parametrize("role", ["owner", "judge", "", None, ["reviewer"]])
def test_a_role_is_reviewer_or_member(user: User, other_user: User, matter: Project, role: Any) -> None:
    matter.members.add(other_user)

    answer = client_of(user).patch(
        f"/api/projects/{matter.pk}/members/{other_user.username}/", {"role": role}, format="json"
    )

    assert answer.status_code == 400
    assert "role" in answer.json()
    assert ProjectMembership.objects.get(project=matter, user=other_user).role == Role.MEMBER


def test_the_database_refuses_a_membership_role_it_does_not_know(other_user: User, matter: Project) -> None:
    membership = ProjectMembership(project=matter, user=other_user, role="owner")
    with pytest.raises(ValidationError):
        membership.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        membership.save()


# --- decisions -----------------------------------------------------------------------------------------------


def answered_turn(chat: Chat, *, claims: int = 1) -> Message:
    """A finalized, sealed turn of ``chat`` quoting its matter's document ``claims`` times (a verified quote
    first, then one that does not hold)."""
    document = chat.project.documents.get()  # type: ignore[union-attr]
    _, answer = start_turn(chat=chat, content=QUESTION, author=chat.owner)
    quotes = ["must ultimately be satisfied", "no such words are in the memo"]
    finalize_turn(
        message=answer,
        content="Answer",
        status=Message.Status.COMPLETE,
        claimed_citations=[ClaimedCitation(quotes[min(i, 1)], document_id=document.pk) for i in range(claims)],
    )
    answer.refresh_from_db()
    return answer


@pytest.fixture
def reviewer(matter_chat: Chat) -> User:
    person = factories.UserFactory.create(username="rita")
    matter_chat.project.members.add(person, through_defaults={"role": Role.REVIEWER})  # type: ignore[union-attr]
    return person


@pytest.fixture
def turn(matter_chat: Chat) -> Message:
    return answered_turn(matter_chat, claims=2)


def post_review(client: APIClient, turn: Message, **body: Any) -> Any:
    return client.post(f"/api/messages/{turn.pk}/reviews/", body, format="json")


def claims_body(client: APIClient, turn: Message) -> list[dict[str, Any]]:
    answer = client.get(f"/api/messages/{turn.pk}/claims/")
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_the_claims_of_a_turn_say_which_need_review(user: User, turn: Message) -> None:
    claims = claims_body(client_of(user), turn)

    assert [(c["kind"], c["status"], c["needs_review"], c["decision"]) for c in claims] == [
        ("kb_quote", "exact_match", False, None),
        ("kb_quote", "unverified", True, None),
    ]
    assert claims[0]["text"] == "must ultimately be satisfied"


def test_a_reviewer_confirms_a_claim_and_it_is_sealed(reviewer: User, turn: Message) -> None:
    client = client_of(reviewer)
    claim = claims_body(client, turn)[1]

    answer = post_review(client, turn, claim=claim["id"], decision="confirmed", source="the memo, p. 2", note="ok")

    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["decision"], body["source"], body["decided_by"], body["role"], body["sequence"]) == (
        "confirmed",
        "the memo, p. 2",
        "rita",
        "reviewer",
        1,
    )
    current = claims_body(client, turn)[1]["decision"]
    assert current["id"] == body["id"]
    decision = ReviewDecision.objects.get()
    assert decision.chain == f"reviews:matter:{turn.chat.project_id}"
    assert decision.turn_seal_sha256  # made on the turn's sealed record
    assert verify_record().intact


def test_the_owner_decides_too(user: User, turn: Message) -> None:
    claim = claims_body(client_of(user), turn)[0]

    answer = post_review(client_of(user), turn, claim=claim["id"], decision="removed")

    assert answer.status_code == 201, answer.content
    assert answer.json()["role"] == "owner"


def test_a_member_who_is_not_a_reviewer_gets_403_and_nothing_is_written(
    matter_chat: Chat, other_user: User, turn: Message
) -> None:
    matter_chat.project.members.add(other_user)  # type: ignore[union-attr]
    client = client_of(other_user)
    claim = claims_body(client, turn)[0]  # she reads the claims

    answer = post_review(client, turn, claim=claim["id"], decision="removed")
    bad_input = post_review(client, turn, claim="nothing", decision="approved")

    assert answer.status_code == bad_input.status_code == 403
    assert not ReviewDecision.objects.exists()


def test_outside_the_matter_it_is_404(other_user: User, turn: Message) -> None:
    client = client_of(other_user)
    claim_id = str(claims_of(turn)[0].id)

    assert client.get(f"/api/messages/{turn.pk}/claims/").status_code == 404
    assert post_review(client, turn, claim=claim_id, decision="removed").status_code == 404
    assert not ReviewDecision.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "confirmed"}, "source"),
        ({"decision": "confirmed", "source": "   "}, "source"),
        ({"decision": "corrected"}, "corrected_text"),
        ({"decision": "approved"}, "decision"),
        ({"decision": "removed", "claim": "not-a-uuid"}, "claim"),
        ({"decision": "removed", "claim": "0190e5b0-0000-7000-8000-000000000000"}, "claim"),
        ({"decision": "removed", "note": ["x"]}, "note"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(reviewer: User, turn: Message, body: dict[str, Any], field: str) -> None:
    client = client_of(reviewer)
    claim = claims_body(client, turn)[0]

    answer = post_review(client, turn, **{"claim": claim["id"], **body})

    assert answer.status_code == 400
    assert field in answer.json()
    assert not ReviewDecision.objects.exists()


def test_a_later_decision_supersedes_and_both_stay(reviewer: User, user: User, turn: Message) -> None:
    claim = claims_body(client_of(reviewer), turn)[1]
    first = post_review(client_of(reviewer), turn, claim=claim["id"], decision="confirmed", source="memo").json()

    second = post_review(client_of(user), turn, claim=claim["id"], decision="removed", note="not in the memo").json()

    assert [d.pk for d in ReviewDecision.objects.order_by("sequence")] == [
        __import__("uuid").UUID(first["id"]),
        __import__("uuid").UUID(second["id"]),
    ]
    current = claims_body(client_of(reviewer), turn)[1]["decision"]
    assert (current["id"], current["decision"], current["decided_by"]) == (second["id"], "removed", "alice")
    decisions = list(ReviewDecision.objects.order_by("sequence"))
    assert decisions[1].previous_sha256 == decisions[0].seal_sha256


def test_a_corrected_quote_is_verified_against_its_source(reviewer: User, turn: Message) -> None:
    client = client_of(reviewer)
    failed = claims_body(client, turn)[1]

    found = post_review(
        client, turn, claim=failed["id"], decision="corrected", corrected_text="must ultimately be satisfied"
    )
    not_found = post_review(client, turn, claim=failed["id"], decision="corrected", corrected_text="words nobody wrote")

    assert found.status_code == not_found.status_code == 201
    assert found.json()["correction_check"]["status"] == "exact_match"
    assert not_found.json()["correction_check"]["status"] == "unverified"
    assert not_found.json()["correction_check"]["detail"]


def test_the_service_refuses_a_member(matter_chat: Chat, other_user: User, turn: Message) -> None:
    matter_chat.project.members.add(other_user)  # type: ignore[union-attr]
    claim = claims_of(turn)[0]

    with pytest.raises(NotAReviewer):
        record_decision(message=turn, claim_id=claim.id, decision="removed", by=other_user)


def test_a_confirmation_without_source_is_refused_by_the_database_too(reviewer: User, turn: Message) -> None:
    decision = record_decision(message=turn, claim_id=claims_of(turn)[0].id, decision="removed", by=reviewer)
    bad = ReviewDecision(**{f.attname: getattr(decision, f.attname) for f in ReviewDecision._meta.concrete_fields})
    bad.pk = None
    bad.id = __import__("uuid").uuid4()
    bad.decision, bad.source = "confirmed", ""

    with pytest.raises(ValidationError):
        bad.full_clean()


def decided(reviewer: User, turn: Message) -> ReviewDecision:
    return record_decision(
        message=turn, claim_id=claims_of(turn)[1].id, decision="confirmed", source="memo p. 2", by=reviewer
    )


def test_a_decision_is_never_updated_nor_deleted_in_the_app(reviewer: User, turn: Message) -> None:
    decision = decided(reviewer, turn)

    with pytest.raises(AppendOnlyError):
        ReviewDecision.objects.filter(pk=decision.pk).update(note="changed")
    with pytest.raises(AppendOnlyError):
        ReviewDecision.objects.filter(pk=decision.pk).delete()


@pytest.mark.parametrize(
    "statement",
    ["UPDATE review_decisions SET note = 'changed'", "DELETE FROM review_decisions"],
)
def test_a_decision_is_never_updated_nor_deleted_in_sql(reviewer: User, turn: Message, statement: str) -> None:
    decided(reviewer, turn)

    with pytest.raises(IntegrityError, match="lqai_append_only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)
    assert ReviewDecision.objects.get().note == ""


def test_a_decision_out_of_its_chain_is_refused_in_sql(reviewer: User, turn: Message) -> None:
    decided(reviewer, turn)
    columns = [f.column for f in ReviewDecision._meta.concrete_fields if f.column != "id"]
    names = ", ".join(columns)

    with pytest.raises(IntegrityError, match="lqai_review_chain"), transaction.atomic(), connection.cursor() as cursor:
        # a copy of the decision at the same place + 5: not its chain's last + 1
        cursor.execute(
            f"INSERT INTO review_decisions (id, {names}) SELECT %s, {names.replace('sequence', 'sequence + 5')} "
            "FROM review_decisions",
            [
                "0190e5b0000070008000000000000001"
                if connection.vendor == "sqlite"
                else "0190e5b0-0000-7000-8000-000000000001"
            ],
        )


def verify(*args: str) -> tuple[int, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_ledger", *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue() + err.getvalue()
    return 0, out.getvalue() + err.getvalue()


def change_below_the_app(decision: ReviewDecision, note: str) -> None:
    """A decision's note changed as a database superuser could, with the triggers off."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with triggers_off(cursor):
                cursor.execute("UPDATE review_decisions SET note = %s WHERE id = %s", [note, str(decision.pk)])
        else:
            cursor.execute("DROP TRIGGER review_decisions_no_update")
            cursor.execute("UPDATE review_decisions SET note = %s WHERE id = %s", [note, decision.pk.hex])
            cursor.execute(
                "CREATE TRIGGER review_decisions_no_update BEFORE UPDATE ON review_decisions "
                "BEGIN SELECT RAISE(ABORT, 'lqai_append_only: review_decisions rows cannot be updated'); END"
            )


def test_verify_ledger_names_a_decision_changed_below_the_app(reviewer: User, turn: Message) -> None:
    decision = decided(reviewer, turn)
    status, output = verify()
    assert status == 0, output
    assert "1 review decision(s) checked" in output

    change_below_the_app(decision, "nothing to see")

    status, output = verify()
    assert status == 1
    assert f"review decision {decision.pk}" in output
    assert "changed after it was sealed" in output


def export(chat: Chat, path: Path) -> Path:
    call_command("export_matter", str(chat.project_id), "--out", str(path), stdout=StringIO())
    return path


def test_the_export_holds_the_decisions_and_the_offline_verifier_checks_them(
    reviewer: User, turn: Message, tmp_path: Path
) -> None:
    decision = decided(reviewer, turn)

    result = verify_bundle(export(turn.chat, tmp_path / "matter.zip"), public_key=keys.current_fingerprint())

    assert result.ok, result.problems
    assert result.decisions == 1
    with zipfile.ZipFile(tmp_path / "matter.zip") as bundle:
        line = record.canonical_json(__import__("json").loads(bundle.read("decisions.jsonl")))
    assert str(decision.pk).encode() in line


def test_the_offline_verifier_names_a_decision_changed_below_the_app(
    reviewer: User, turn: Message, tmp_path: Path
) -> None:
    decision = decided(reviewer, turn)
    change_below_the_app(decision, "nothing to see")

    result = verify_bundle(export(turn.chat, tmp_path / "matter.zip"), public_key=keys.current_fingerprint())

    assert not result.ok
    assert any(str(decision.pk) in problem and "changed after it was sealed" in problem for problem in result.problems)


def test_a_decision_costs_the_same_queries_whatever_the_matter_size(matter_chat: Chat, reviewer: User) -> None:
    def queries_of_one_decision(turn: Message) -> int:
        claim = claims_of(turn)[0]
        message = Message.objects.select_related("chat__project").get(pk=turn.pk)
        with CaptureQueriesContext(connection) as queries:
            record_decision(message=message, claim_id=claim.id, decision="removed", by=reviewer)
        return len(queries)

    small = queries_of_one_decision(answered_turn(matter_chat, claims=1))
    for _ in range(4):  # a larger matter: more turns, more claims, more decisions
        more = answered_turn(matter_chat, claims=2)
        for claim in claims_of(more):
            record_decision(message=more, claim_id=claim.id, decision="removed", by=reviewer)
    large = queries_of_one_decision(answered_turn(matter_chat, claims=2))

    assert small == large


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_two_reviewers_deciding_at_once_leave_an_intact_chain(committed_matter_chat: tuple[APIClient, Chat]) -> None:
    _, chat = committed_matter_chat
    turns = [answered_turn(chat, claims=2) for _ in range(2)]
    reviewers = [factories.UserFactory.create(username=name) for name in ("rita", "ruth")]
    for person in reviewers:
        chat.project.members.add(person, through_defaults={"role": Role.REVIEWER})  # type: ignore[union-attr]
    barrier = threading.Barrier(2, timeout=30)
    errors: list[BaseException] = []

    def decide(person: User, turn: Message) -> None:
        try:
            message = Message.objects.select_related("chat__project").get(pk=turn.pk)
            claims = claims_of(message)
            barrier.wait()
            for _ in range(5):
                for claim in claims:
                    record_decision(message=message, claim_id=claim.id, decision="confirmed", source="x", by=person)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=decide, args=pair) for pair in zip(reviewers, turns, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a decision hung"

    assert errors == []
    chain = list(ReviewDecision.objects.filter(chain=f"reviews:matter:{chat.project_id}").order_by("sequence"))
    assert [d.sequence for d in chain] == list(range(1, 21))
    assert [d.previous_sha256 for d in chain[1:]] == [d.seal_sha256 for d in chain[:-1]]
    result = verify_record()
    assert result.intact, [str(p) for p in result.problems]
    assert result.decisions == 20


def test_a_matter_purge_takes_its_decisions_with_it(reviewer: User, turn: Message) -> None:
    from citations.purge import purge_matter

    decided(reviewer, turn)
    project = turn.chat.project
    assert project is not None

    purge_matter(project_id=project.pk, purged_by="test")

    assert not ReviewDecision.objects.exists()


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        (lambda line: {**line, "decision": "removed"}, "changed after it was sealed"),
        (lambda line: {**line, "claim": f"message_citations:{line['id']}"}, "is not a sealed row"),
        (lambda line: {**line, "sequence": 2}, "decisions are missing"),
    ],
)
def test_a_decision_edited_in_the_bundle_fails_offline(
    reviewer: User, turn: Message, tmp_path: Path, edit: Any, found: str
) -> None:
    from tests.test_export import jsonl, lines, members, rewrite

    decided(reviewer, turn)
    files = members(export(turn.chat, tmp_path / "matter.zip"))
    # Given the decision edited (and, for a claim of its own making, sealed again by someone holding the key), the
    # manifest signed again over the edited file
    changed = edit(lines(files["decisions.jsonl"])[0])
    if "sealed row" in found:
        changed["seal_sha256"] = sealed_decisions.decision_sha256(changed)
        changed["signature"] = record.sign(keys.signing_key(), sealed_decisions.decision_payload(changed))
    files["decisions.jsonl"] = jsonl([changed])

    result = verify_bundle(rewrite(tmp_path / "edited.zip", files, resign=keys.signing_key()))

    assert any(found in problem for problem in result.problems), result.problems


@pytest.mark.django_db(transaction=True)
def test_the_roles_migration_makes_every_existing_membership_a_member() -> None:
    from django.db.migrations.executor import MigrationExecutor

    owner = factories.UserFactory.create(username="olga")
    member = factories.UserFactory.create(username="mia")
    project = factories.ProjectFactory.create(owner=owner)
    try:
        # Given a membership stored before roles existed
        MigrationExecutor(connection).migrate([("chats", "0038_lookup_opinion_parallel_citations")])
        assert "role" not in {
            c.name for c in connection.introspection.get_table_description(connection.cursor(), "project_members")
        }
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO project_members (project_id, user_id) VALUES (%s, %s)",
                [project.pk.hex if connection.vendor == "sqlite" else str(project.pk), member.pk],
            )
    finally:
        # When the migrations run again
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())

    # Then she is a member, the owner still the owner
    assert ProjectMembership.objects.get(project=project, user=member).role == Role.MEMBER
    assert list(Project.objects.get(pk=project.pk).members.all()) == [member]
    assert roles_of(client_of(owner).get(f"/api/projects/{project.pk}/").json()) == {"olga": "owner", "mia": "member"}


def test_the_owner_of_a_matterless_chat_decides_on_its_own_chain(
    user: User, other_user: User, local_opinion: Any, tmp_path: Path
) -> None:
    chat = factories.ChatFactory.create(project=None, owner=user)
    _, turn = start_turn(chat=chat, content=QUESTION, author=user)
    finalize_turn(
        message=turn,
        content="The court must be satisfied.",
        status=Message.Status.COMPLETE,
        claimed_citations=[
            ClaimedCitation("[t]he reviewing court must . . . be satisfied", opinion_id=local_opinion.pk)
        ],
    )
    claims = claims_body(client_of(user), turn)
    assert [c["kind"] for c in claims] == ["caselaw_quote"]

    decided_now = post_review(client_of(user), turn, claim=claims[0]["id"], decision="removed")

    assert decided_now.status_code == 201, decided_now.content
    assert ReviewDecision.objects.get().chain == f"reviews:chat:{chat.pk}"
    assert client_of(other_user).get(f"/api/messages/{turn.pk}/claims/").status_code == 404
    assert verify_record().intact
    path = tmp_path / "chat.zip"
    call_command("export_matter", "--chat", str(chat.pk), "--out", str(path), stdout=StringIO())
    result = verify_bundle(path, public_key=keys.current_fingerprint())
    assert result.ok, result.problems
    assert result.decisions == 1


# --- statute rows as claims ----------------------------------------------------------------------------------


def statute_turn(chat: Chat, content: str) -> Message:
    """A finalized turn of ``chat`` answering ``content``, with 9 U.S.C. in the authority library and no
    CourtListener."""
    from authorities.loading import load_uslm
    from tests.test_statute_rows import FIXTURES

    load_uslm(path=FIXTURES / "usc09.xml")
    _, answer = start_turn(chat=chat, content=QUESTION, author=chat.owner)
    finalize_turn(message=answer, content=content, status=Message.Status.COMPLETE)
    return answer


def test_a_statute_citation_and_its_quote_are_claims_a_reviewer_decides_on(
    reviewer: User, matter_chat: Chat, settings: Any
) -> None:
    settings.COURTLISTENER_API_TOKEN = ""
    # A word changed in the quote of 9 U.S.C. § 2: the citation verifies, the quote fails.
    answer = statute_turn(
        matter_chat, "An arbitration clause “shall be valid, irrevocable, and binding.” 9 U.S.C. § 2."
    )
    client = client_of(reviewer)

    claims = claims_body(client, answer)
    statute = [(c["kind"], c["text"], c["status"], c["needs_review"]) for c in claims if c["kind"] == "statute"]
    assert statute == [
        ("statute", "9 U.S.C. § 2 (Online@117-80)", "statute_verified", False),
        ("statute", "shall be valid, irrevocable, and binding", "statute_quote_failed", True),
    ]
    quote = next(c for c in claims if c["status"] == "statute_quote_failed")

    decided = post_review(client, answer, claim=quote["id"], decision="removed", note="not the statute's words")

    assert decided.status_code == 201, decided.content
    assert decided.json()["decision"] == "removed"
    [current] = [c["decision"] for c in claims_body(client, answer) if c["id"] == quote["id"]]
    assert current is not None
    assert current["decision"] == "removed"
    assert ReviewDecision.objects.get().claim_table == record.STATUTE
    assert verify_record().intact


@pytest.mark.parametrize(
    ("corrected", "status"),
    [
        ("9 U.S.C. § 3", "statute_verified"),  # a section the title has
        ("9 U.S.C. § 999", "statute_not_found"),  # one it has not: fabricated
        ("42 U.S.C. § 1983", "statute_unchecked"),  # a title not loaded
        ("section two of the Act", "not_checked"),  # no citation the machine can read
    ],
)
def test_a_corrected_statute_citation_is_resolved_in_the_library(
    reviewer: User, matter_chat: Chat, settings: Any, corrected: str, status: str
) -> None:
    settings.COURTLISTENER_API_TOKEN = ""
    answer = statute_turn(matter_chat, "See 9 U.S.C. § 2.")
    client = client_of(reviewer)
    [citation] = [c for c in claims_body(client, answer) if c["kind"] == "statute"]

    decided = post_review(client, answer, claim=citation["id"], decision="corrected", corrected_text=corrected)

    assert decided.status_code == 201, decided.content
    assert ReviewDecision.objects.get().correction_check["status"] == status


def test_a_corrected_statute_quote_is_re_verified_against_its_section(
    reviewer: User, matter_chat: Chat, settings: Any
) -> None:
    settings.COURTLISTENER_API_TOKEN = ""
    answer = statute_turn(
        matter_chat, "An arbitration clause “shall be valid, irrevocable, and enforceable.” 9 U.S.C. § 2."
    )
    client = client_of(reviewer)
    [quote] = [c for c in claims_body(client, answer) if c["kind"] == "statute" and c["status"].startswith("statute_q")]
    right = "shall be valid, irrevocable, and enforceable, save upon such grounds as exist at law or in equity"

    good = post_review(client, answer, claim=quote["id"], decision="corrected", corrected_text=right)
    bad = post_review(client, answer, claim=quote["id"], decision="corrected", corrected_text="shall be void")

    assert (good.status_code, bad.status_code) == (201, 201)
    first, second = ReviewDecision.objects.order_by("sequence")
    assert first.correction_check["status"] in {"exact_match", "tolerant_match", "altered"}
    assert first.correction_check["source_offset_start"] is not None
    assert second.correction_check["status"] == "unverified"


@pytest.mark.parametrize(
    ("corrected", "status"),
    [
        ("Fisher v. University of Texas at Austin, 570 U.S. 297 (2013)", "verified"),
        ("Fisher v. Nobody, 570 U.S. 297 (2013)", "name_mismatch"),
        ("Roe v. Doe, 999 U.S. 999 (2031)", "unchecked"),  # no token: only CourtListener could say "not found"
        ("the Supreme Court's affirmative-action case", "not_checked"),
    ],
)
def test_a_corrected_case_citation_is_checked_as_an_answers_are(
    reviewer: User, matter_chat: Chat, settings: Any, corrected: str, status: str
) -> None:
    settings.COURTLISTENER_API_TOKEN = ""
    factories.CaselawOpinionFactory.create(
        case_name="Fisher v. University of Texas at Austin", citation="570 U.S. 297", text="Strict scrutiny applies."
    )
    _, answer = start_turn(chat=matter_chat, content=QUESTION, author=matter_chat.owner)
    finalize_turn(
        message=answer, content="See Grutter v. Bollinger, 539 U.S. 306 (2003).", status=Message.Status.COMPLETE
    )
    client = client_of(reviewer)
    [case] = [c for c in claims_body(client, answer) if c["kind"] == "case_citation"]

    decided = post_review(client, answer, claim=case["id"], decision="corrected", corrected_text=corrected)

    assert decided.status_code == 201, decided.content
    assert ReviewDecision.objects.get().correction_check["status"] == status
