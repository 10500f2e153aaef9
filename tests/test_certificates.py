"""The certificate of verification of a turn (issue 52, item 3): refused while a claim is open, issued by an owner
or a reviewer, sealed, exported and checked offline against the sealed decisions it names."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from chats.matters import NotTheOwner, WordingInvalid, set_certificate_wording
from chats.models import Chat, Message, Project, Role
from chats.record import AppendOnlyError
from citations import keys
from citations.certificates import ClaimsOpen, issue_certificate
from citations.claims import claims_of
from citations.integrity import verify_record
from citations.models import Certificate
from citations.reviews import record_decision
from lqai_verify import certificates as sealed_certificates
from lqai_verify import record
from lqai_verify.bundle import verify_bundle
from tests import factories
from tests.test_reviews import answered_turn, client_of, export


@pytest.fixture
def reviewer(matter_chat: Chat) -> User:
    person = factories.UserFactory.create(username="rita")
    matter_chat.project.members.add(person, through_defaults={"role": Role.REVIEWER})  # type: ignore[union-attr]
    return person


@pytest.fixture
def turn(matter_chat: Chat) -> Message:
    """A sealed turn with a verified quote (claim 1) and a quote not found in its source (claim 2)."""
    return answered_turn(matter_chat, claims=2)


def certify(client: APIClient, turn: Message) -> Any:
    return client.post(f"/api/messages/{turn.pk}/certificate/")


def test_a_certificate_is_refused_naming_the_open_claim_then_issued_after_a_decision(
    reviewer: User, turn: Message
) -> None:
    client = client_of(reviewer)
    failed = claims_of(turn)[1]

    # Given the failed quote undecided: 409 naming it, nothing written
    refused = certify(client, turn)
    assert refused.status_code == 409, refused.content
    assert [(c["claim"], c["kind"]) for c in refused.json()["open_claims"]] == [(str(failed.id), "kb_quote")]
    assert "corrected or removed" in refused.json()["open_claims"][0]["why"]
    # A confirmation of a quote the machine found wrong is not enough
    record_decision(message=turn, claim_id=failed.id, decision="confirmed", source="the memo", by=reviewer)
    assert certify(client, turn).status_code == 409
    assert not Certificate.objects.exists()

    # When it is removed: 201, sealed, naming that decision
    removal = record_decision(message=turn, claim_id=failed.id, decision="removed", note="not in the memo", by=reviewer)
    issued = certify(client, turn)

    assert issued.status_code == 201, issued.content
    body = issued.json()
    assert (body["issued_by"], body["role"], body["sequence"]) == ("rita", "reviewer", 1)
    named = [c["decision"] for c in body["statement"]["claims"]]
    assert named[0] is None  # the verified quote: the machine's check only
    assert (named[1]["id"], named[1]["seal_sha256"]) == (str(removal.pk), removal.seal_sha256)
    assert "REMOVED: it will not be filed, by rita (reviewer)" in body["text"]
    assert "checked by the machine only; no person checked them" in body["text"]
    assert "Nobody, machine or person, checked" in body["text"]
    certificate = Certificate.objects.get()
    assert certificate.chain == f"certificates:matter:{turn.chat.project_id}"
    assert client.get(f"/api/certificates/{certificate.pk}/").json()["text"] == body["text"]
    assert verify_record().intact


def test_a_claim_that_needs_review_without_a_decision_is_open(reviewer: User, matter_chat: Chat) -> None:
    turn = answered_turn(matter_chat, claims=1)  # one verified quote: nothing needs review
    assert issue_certificate(message=turn, by=reviewer).sequence == 1
    turn = answered_turn(matter_chat, claims=2)

    with pytest.raises(ClaimsOpen) as refused:
        issue_certificate(message=turn, by=reviewer)

    assert [o.claim.id for o in refused.value.open if o.claim] == [claims_of(turn)[1].id]


def test_a_member_gets_403_and_an_outsider_404(
    matter_chat: Chat, reviewer: User, other_user: User, turn: Message
) -> None:
    record_decision(message=turn, claim_id=claims_of(turn)[1].id, decision="removed", by=reviewer)
    certificate = issue_certificate(message=turn, by=reviewer)
    member = factories.UserFactory.create(username="mo")
    matter_chat.project.members.add(member)  # type: ignore[union-attr]

    assert certify(client_of(member), turn).status_code == 403
    assert certify(client_of(other_user), turn).status_code == 404
    assert client_of(other_user).get(f"/api/certificates/{certificate.pk}/").status_code == 404
    assert client_of(member).get(f"/api/certificates/{certificate.pk}/").status_code == 200  # she reads it
    assert Certificate.objects.count() == 1


def test_the_owner_issues_and_the_court_and_judge_word_it(user: User, matter_chat: Chat, turn: Message) -> None:
    project = matter_chat.project
    assert project is not None
    set_certificate_wording(
        project=project, court="txnd", judge_wording="Counsel shall also file the list of sources.", by=user
    )
    record_decision(message=turn, claim_id=claims_of(turn)[1].id, decision="corrected", corrected_text="x", by=user)
    turn.chat.project = Project.objects.get(pk=project.pk)

    text = certify(client_of(user), turn).json()["text"]

    assert "Northern District of Texas" in text
    assert "using print reporters or traditional legal databases, by a human being" in text
    assert "As the assigned judge requires:\nCounsel shall also file the list of sources." in text
    assert "Machine's check of the correction: not found in the source" in text


def test_only_the_owner_words_the_certificate(user: User, reviewer: User, matter_chat: Chat) -> None:
    project = matter_chat.project
    assert project is not None
    with pytest.raises(NotTheOwner):
        set_certificate_wording(project=project, court="txnd", judge_wording="", by=reviewer)
    with pytest.raises(WordingInvalid):
        set_certificate_wording(project=project, court="moon", judge_wording="", by=user)
    bad = Project(owner=user, name="x", certificate_court="moon")
    with pytest.raises(IntegrityError), transaction.atomic():
        bad.save()


def test_a_certificate_is_never_updated_nor_deleted(reviewer: User, matter_chat: Chat) -> None:
    certificate = issue_certificate(message=answered_turn(matter_chat, claims=1), by=reviewer)

    with pytest.raises(AppendOnlyError):
        Certificate.objects.filter(pk=certificate.pk).update(text="all checked")
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE review_certificates SET text = 'all checked'")
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM review_certificates")


def test_issuing_costs_the_same_queries_whatever_the_matter_size(reviewer: User, matter_chat: Chat) -> None:
    def queries_of_one_certificate() -> int:
        turn = Message.objects.select_related("chat__project").get(pk=answered_turn(matter_chat, claims=1).pk)
        with CaptureQueriesContext(connection) as queries:
            issue_certificate(message=turn, by=reviewer)
        return len(queries)

    small = queries_of_one_certificate()
    for _ in range(4):
        more = answered_turn(matter_chat, claims=2)
        record_decision(message=more, claim_id=claims_of(more)[1].id, decision="removed", by=reviewer)
        issue_certificate(message=more, by=reviewer)

    assert queries_of_one_certificate() == small


# --- the export and the offline verifier ---------------------------------------------------------------------


@pytest.fixture
def certified(reviewer: User, turn: Message) -> Certificate:
    record_decision(message=turn, claim_id=claims_of(turn)[1].id, decision="removed", note="gone", by=reviewer)
    return issue_certificate(message=turn, by=reviewer)


def test_the_export_holds_the_certificate_and_the_offline_verifier_checks_it(
    certified: Certificate, turn: Message, tmp_path: Path
) -> None:
    result = verify_bundle(export(turn.chat, tmp_path / "matter.zip"), public_key=keys.current_fingerprint())

    assert result.ok, result.problems
    assert (result.decisions, result.certificates) == (1, 1)
    assert "1 certificates of verification" in result.summary()


def test_the_report_shows_each_decision_and_the_certificate(
    certified: Certificate, reviewer: User, turn: Message, tmp_path: Path
) -> None:
    from tests.test_export import members

    # Given a superseded decision beside the current one
    record_decision(message=turn, claim_id=claims_of(turn)[0].id, decision="confirmed", source="memo p. 1", by=reviewer)
    record_decision(message=turn, claim_id=claims_of(turn)[0].id, decision="confirmed", source="memo p. 2", by=reviewer)

    bundle = export(turn.chat, tmp_path / "matter.zip")

    page = members(bundle)["report.html"].decode()
    assert "Decisions by people (3)" in page
    assert "removed (not to be filed)" in page
    assert "rita (reviewer)" in page
    assert "memo p. 1" in page
    assert page.count("superseded by a later decision") == 1
    assert "Certificates of verification (1)" in page
    assert certified.seal_sha256 in page
    assert "CERTIFICATE OF VERIFICATION" in page
    # ... and the verifier renders it again from the checked data: byte for byte the same
    result = verify_bundle(bundle, public_key=keys.current_fingerprint())
    assert result.ok, result.problems


def resealed(line: dict[str, Any]) -> dict[str, Any]:
    """``line`` sealed and signed again, as someone holding the key could."""
    line = {**line, "seal_sha256": sealed_certificates.certificate_sha256(line)}
    return {**line, "signature": record.sign(keys.signing_key(), sealed_certificates.certificate_payload(line))}


def _rendered(line: dict[str, Any]) -> dict[str, Any]:
    text = sealed_certificates.render_text(
        line["statement"],
        issuer=line["issuer"],
        role=line["role"],
        issued_at=line["issued_at"],
        key_fingerprint=line["key_fingerprint"],
    )
    return {**line, "text": text}


def _named_absent(line: dict[str, Any]) -> dict[str, Any]:
    statement = dict(line["statement"])
    claims = [dict(c) for c in statement["claims"]]
    claims[0]["decision"] = {**claims[1]["decision"], "id": "0190e5b0-0000-7000-8000-000000000000"}
    return resealed(_rendered({**line, "statement": {**statement, "claims": claims}}))


def _named_otherwise(line: dict[str, Any]) -> dict[str, Any]:
    statement = dict(line["statement"])
    claims = [dict(c) for c in statement["claims"]]
    claims[1]["decision"] = {**claims[1]["decision"], "decision": "confirmed", "source": "the reporter"}
    return resealed(_rendered({**line, "statement": {**statement, "claims": claims}}))


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        # edited in the bundle, not sealed again: its digest no longer holds
        (lambda line: {**line, "text": line["text"].replace("REMOVED", "CONFIRMED")}, "changed after it was sealed"),
        # its text edited and sealed again by someone holding the key: the text is not its statement's
        (lambda line: resealed({**line, "text": line["text"] + "All claims checked.\n"}), "text is not what its"),
        # naming a decision the bundle does not hold (sealed again, text rendered again)
        (_named_absent, "which the record does not hold"),
        # stating a decision otherwise than sealed
        (_named_otherwise, "otherwise than sealed (decision, source)"),
    ],
)
def test_a_certificate_edited_in_the_bundle_fails_offline(
    certified: Certificate, turn: Message, tmp_path: Path, edit: Any, found: str
) -> None:
    from tests.test_export import jsonl, lines, members, rewrite

    files = members(export(turn.chat, tmp_path / "matter.zip"))
    files["certificates.jsonl"] = jsonl([edit(lines(files["certificates.jsonl"])[0])])

    result = verify_bundle(rewrite(tmp_path / "edited.zip", files, resign=keys.signing_key()))

    assert any(found in problem and str(certified.pk) in problem for problem in result.problems), result.problems
    assert result.certificates == 0


def test_verify_ledger_checks_the_certificates(certified: Certificate) -> None:
    out = StringIO()
    call_command("verify_ledger", stdout=out)
    assert "1 certificate(s) checked" in out.getvalue()


# --- the heads of the decisions and certificates chains ------------------------------------------------------


def remove_below_the_app(table: str, row_id: Any) -> None:
    """A row deleted as a database superuser could: triggers off (PostgreSQL), or as in a purge (SQLite)."""
    from chats.record import purging
    from tests.conftest import triggers_off

    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with triggers_off(cursor):
                cursor.execute(f"DELETE FROM {table} WHERE id = %s", [str(row_id)])
        else:
            with purging(__import__("uuid").UUID(int=0)):
                cursor.execute(f"DELETE FROM {table} WHERE id = %s", [row_id.hex])


@pytest.mark.parametrize("table", ["review_decisions", "review_certificates"])
def test_verify_ledger_names_a_last_link_removed_below_the_app(
    certified: Certificate, reviewer: User, turn: Message, table: str
) -> None:
    from citations.models import ReviewDecision
    from tests.test_reviews import verify

    status, output = verify()
    assert status == 0, output
    last = ReviewDecision.objects.order_by("-sequence").first() if table == "review_decisions" else certified
    assert last is not None

    remove_below_the_app(table, last.pk)

    status, output = verify()
    assert status == 1
    kind = "reviews" if table == "review_decisions" else "certificates"
    assert f"the chain {kind}:matter:{turn.chat.project_id} ends at #0, but its head says #1" in output


def test_a_chain_head_moves_only_forward_to_its_last_link_and_stays(certified: Certificate, reviewer: User) -> None:
    from citations.models import ReviewChainHead

    chain = certified.chain
    head = ReviewChainHead.objects.get(chain=chain)
    assert (head.sequence, head.seal_sha256) == (1, certified.seal_sha256)
    for statement, parameters in [
        ("UPDATE review_chain_heads SET sequence = 0, seal_sha256 = '' WHERE chain = %s", [chain]),
        ("UPDATE review_chain_heads SET sequence = 2 WHERE chain = %s", [chain]),
        ("DELETE FROM review_chain_heads WHERE chain = %s", [chain]),
        (
            "INSERT INTO review_chain_heads (chain, sequence, seal_sha256, project_id) "
            "SELECT 'reviews:matter:x', 3, '', project_id FROM review_chain_heads WHERE chain = %s",
            [chain],
        ),
    ]:
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, parameters)
    assert ReviewChainHead.objects.get(chain=chain).sequence == 1


def test_a_turn_not_sealed_is_open_as_a_whole(
    reviewer: User, matter_chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citations import seals

    def broken(message_ids: Any) -> Any:
        raise RuntimeError("sealing is down")

    monkeypatch.setattr(seals, "turn_facts", broken)  # the turn commits unsealed (its receiver logs the failure)
    turn = answered_turn(matter_chat, claims=1)
    monkeypatch.undo()

    refused = certify(client_of(reviewer), turn)

    assert refused.status_code == 409, refused.content
    assert refused.json()["open_claims"] == [
        {"claim": None, "kind": None, "text": None, "why": "the turn's record is not sealed yet (manage.py seal_turns)"}
    ]


def test_the_offline_verifier_names_a_last_decision_removed_below_the_app(
    certified: Certificate, reviewer: User, turn: Message, tmp_path: Path
) -> None:
    from citations.models import ReviewDecision

    later = record_decision(message=turn, claim_id=claims_of(turn)[0].id, decision="removed", by=reviewer)
    assert ReviewDecision.objects.order_by("-sequence").first() == later
    remove_below_the_app("review_decisions", later.pk)

    result = verify_bundle(export(turn.chat, tmp_path / "matter.zip"), public_key=keys.current_fingerprint())

    assert "decisions.jsonl: it ends at #1, but its chain's head is at #2: links were removed from the record" in (
        result.problems
    )


def test_a_bundle_cut_short_of_its_last_certificate_fails_offline(
    certified: Certificate, turn: Message, tmp_path: Path
) -> None:
    from tests.test_export import members, rewrite

    files = members(export(turn.chat, tmp_path / "matter.zip"))
    # Given the bundle's only certificate left out, the manifest signed again (by someone holding the key)
    files["certificates.jsonl"] = b""

    result = verify_bundle(rewrite(tmp_path / "cut.zip", files, resign=keys.signing_key()))

    assert any(
        p.startswith("certificates.jsonl: it ends at #0, but its chain's head is at #1") for p in result.problems
    )


def test_the_owner_words_the_certificates_through_the_api(
    user: User, reviewer: User, other_user: User, matter_chat: Chat
) -> None:
    url = f"/api/projects/{matter_chat.project_id}/certificate-wording/"
    body = {"court": "txnd", "judge_wording": "Also list each source."}

    assert client_of(reviewer).get(url).json() == {
        "project_id": str(matter_chat.project_id),
        "court": "default",
        "judge_wording": "",
    }
    assert client_of(reviewer).put(url, body, format="json").status_code == 403
    assert client_of(other_user).put(url, body, format="json").status_code == 404
    assert "court" in client_of(user).put(url, {"court": "moon"}, format="json").json()
    assert client_of(user).put(url, {"court": "txnd", "judge_wording": ["x"]}, format="json").status_code == 400
    answer = client_of(user).put(url, body, format="json")

    assert answer.status_code == 200
    assert (answer.json()["court"], answer.json()["judge_wording"]) == ("txnd", "Also list each source.")
    assert Project.objects.get(chats=matter_chat).certificate_court == "txnd"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_two_reviewers_deciding_and_certifying_at_once_leave_intact_chains(
    committed_matter_chat: tuple[APIClient, Chat],
) -> None:
    import threading

    from django.db import connections

    from citations.models import ReviewChainHead, ReviewDecision

    _, chat = committed_matter_chat
    turns = [answered_turn(chat, claims=1) for _ in range(2)]  # a verified quote each: certifiable at once
    people = [factories.UserFactory.create(username=name) for name in ("rita", "ruth")]
    for person in people:
        chat.project.members.add(person, through_defaults={"role": Role.REVIEWER})  # type: ignore[union-attr]
    barrier = threading.Barrier(2, timeout=30)
    errors: list[BaseException] = []

    def decide(person: User, turn: Message) -> None:
        try:
            message = Message.objects.select_related("chat__project").get(pk=turn.pk)
            claim = claims_of(message)[0]
            barrier.wait()
            for _ in range(5):  # each decision followed by a certificate naming it, while the other certifies too
                record_decision(message=message, claim_id=claim.id, decision="confirmed", source="x", by=person)
                issue_certificate(message=message, by=person)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def certify_all(person: User, turn: Message) -> None:
        try:
            message = Message.objects.select_related("chat__project").get(pk=turn.pk)
            barrier.wait()
            for _ in range(5):
                issue_certificate(message=message, by=person)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=decide, args=(people[0], turns[0])),
        threading.Thread(target=certify_all, args=(people[1], turns[1])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a writer hung"

    assert errors == []
    project = chat.project_id
    assert [d.sequence for d in ReviewDecision.objects.filter(chain=f"reviews:matter:{project}")] == [1, 2, 3, 4, 5]
    certificates = Certificate.objects.filter(chain=f"certificates:matter:{project}")
    assert [c.sequence for c in certificates] == list(range(1, 11))
    assert [c.previous_sha256 for c in certificates[1:]] == [c.seal_sha256 for c in certificates[:9]]
    assert ReviewChainHead.objects.get(chain=f"certificates:matter:{project}").sequence == 10
    result = verify_record()
    assert result.intact, [str(p) for p in result.problems]


def test_an_answer_that_did_not_complete_is_not_certified(reviewer: User, matter_chat: Chat) -> None:
    from chats.services import finalize_turn, start_turn

    _, answer = start_turn(chat=matter_chat, content="A question", author=matter_chat.owner)
    finalize_turn(message=answer, content="Half an ans", status=Message.Status.FAILED)
    answer.refresh_from_db()

    refused = certify(client_of(reviewer), answer)

    assert refused.status_code == 409, refused.content
    assert [c["why"] for c in refused.json()["open_claims"]] == [
        "the answer did not complete (failed): there is no whole answer to certify"
    ]
