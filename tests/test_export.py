"""The signed matter export and its offline verifier (``python -m lqai_verify``): an exported matter verifies,
and each kind of tampering is detected with a message naming what and where."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import tracemalloc
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from io import StringIO
from pathlib import Path
from typing import Any

import factory
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import LazySettings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from rest_framework.test import APIClient

from chats.models import CaseCitation, CaselawOpinion, Chat, DocumentQuote, Message
from chats.services import ClaimedCitation, finalize_turn, start_turn
from citations import export as export_module
from citations import keys, ledger, seals
from citations.export import excerpt_for
from citations.models import TurnSeal
from lqai_verify import record
from lqai_verify.__main__ import main as lqai_verify_main
from lqai_verify.bundle import BundleError, verify_bundle
from lqai_verify.verification import alterations_record, verify_quote
from tests import factories
from tests.test_backfill import _Terminal
from tests.test_seals import (
    QUESTION,
    TURN_TABLES,
    _db_id,
    _first_format_digests,
    _first_format_row,
    _raw,
    _turn,
    a_turn_commits_first,
    seal_as_the_earlier_release,
)
from tests.test_seals import verify as verify_ledger
from tests.test_verifier_install import unavailable

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def exported_matter(
    api_client: APIClient, matter_chat: Chat, local_opinion: CaselawOpinion, user: Any
) -> tuple[Chat, list[str]]:
    """Alice's matter with three turns: two answered by the default backend, and one that quotes the Fisher
    opinion with alterations, fails a claim and cites a case."""
    turns = [_turn(api_client, matter_chat)["id"] for _ in range(2)]
    _, answer = start_turn(chat=matter_chat, content=QUESTION, author=user)
    finalize_turn(
        message=answer,
        content="See Fisher v. University of Texas at Austin, 570 U.S. 297 (2013).",
        status=Message.Status.COMPLETE,
        claimed_citations=[
            ClaimedCitation("[t]he reviewing court must . . . be satisfied", opinion_id=local_opinion.pk),
            ClaimedCitation("the court must never be satisfied", opinion_id=local_opinion.pk),
            ClaimedCitation(
                "must ultimately be satisfied",
                document_id=matter_chat.project.documents.get().pk,  # type: ignore[union-attr]
            ),
        ],
    )
    return matter_chat, [*turns, str(answer.pk)]


def export(chat: Chat, path: Path) -> Path:
    out = StringIO()
    call_command("export_matter", str(chat.project_id), "--out", str(path), stdout=out)
    assert "export_matter:" in out.getvalue()
    return path


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as bundle:
        return {name: bundle.read(name) for name in bundle.namelist()}


def rewrite(path: Path, files: dict[str, bytes], *, resign: Ed25519PrivateKey | None = None) -> Path:
    """Write ``files`` as a bundle at ``path``; with ``resign``, the manifest's digests recomputed and signed with
    that key (as someone holding it could), so that the checks behind the signature are the ones tested."""
    files = dict(files)
    if resign is not None:
        manifest = json.loads(files["manifest.json"])
        public = resign.public_key()
        keys_file = json.loads(files["public_key.json"])
        keys_file["signing_key"] = {
            "public_key": record.public_key_b64(public),
            "fingerprint": record.fingerprint(public),
        }
        files["public_key.json"] = record.canonical_json(keys_file)
        if "report.html" in files:  # the report names the key that signs the bundle, as its signer would write it
            files["report.html"] = files["report.html"].replace(
                manifest["signing_key"].encode(), record.fingerprint(public).encode()
            )
        manifest["signing_key"] = record.fingerprint(public)
        for name in manifest["files"]:
            manifest["files"][name] = {"sha256": record.sha256_hex(files[name]), "bytes": len(files[name])}
        files["manifest.json"] = json.dumps(manifest, indent=2, sort_keys=True).encode()
        files["manifest.sig"] = record.sign(resign, files["manifest.json"]).encode()
    with zipfile.ZipFile(path, "w") as bundle:
        for name, data in files.items():
            bundle.writestr(name, data)
    return path


def lines(data: bytes) -> list[dict[str, Any]]:
    """The values of a JSON Lines file, split at ``\\n`` only, as the verifier reads it."""
    return [json.loads(line) for line in data.decode().removesuffix("\n").split("\n") if data]


def jsonl(values: list[dict[str, Any]]) -> bytes:
    return b"".join(record.canonical_json(v) + b"\n" for v in values)


def fingerprint() -> str:
    return keys.current_fingerprint()


# --- The export --------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_exported_matter_verifies(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    chat, turns = exported_matter

    result = verify_bundle(export(chat, tmp_path / "matter.zip"), public_key=fingerprint())

    assert result.problems == []
    assert (result.turns, result.seals) == (3, 3)
    assert result.quotes >= 4  # two default-backend quotes at least, the altered Fisher quote, the KB quote
    assert result.case_citations == 1
    assert result.entries == result.rows
    files = members(tmp_path / "matter.zip")
    assert [line["turn"]["message"] for line in lines(files["turns.jsonl"])] == turns
    report = files["report.html"].decode()
    assert "Fisher v. University of Texas at Austin, 570 U.S. 297" in report
    assert "the court must never be satisfied" in report
    assert "\u2717 not found in the source</span>" in report  # the failed claim, its status in words
    assert "Why it failed: " in report
    assert "\u2713 case verified: the citation is this case</span>" in report
    assert '<span class="alteration" data-kind="ellipsis"' in report  # the altered quote's omission, marked ...
    assert " omits \u201c" in report  # ... and spelled out
    assert "Verdict: Fail</span>" in report
    assert fingerprint() in report
    head = json.loads(files["manifest.json"])["chain_head"]
    assert f"The chain ends at seal #3, digest <code>{head['seal_sha256']}</code>" in report  # for --extends


@pytest.mark.django_db
def test_a_quote_of_a_paged_opinion_names_its_page(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    chat, _ = exported_matter

    passages = lines(members(export(chat, tmp_path / "m.zip"))["passages.jsonl"])

    fisher = [p for p in passages if p["source_table"] == "caselaw_opinions"]
    assert fisher
    # The slip opinion's own page (the quote's first place is in the syllabus), never a count of its PDF's pages.
    assert {p["pin_cite"] for p in fisher} == {"slip op. at 2 (syllabus)"}, fisher
    report = members(export(chat, tmp_path / "again.zip"))["report.html"].decode()
    assert "Fisher v. University of Texas at Austin, 570 U.S. 297, slip op. at 2 (syllabus)" in report
    assert all(len(p["excerpt"]) < 5_000 for p in fisher)  # the passage in context, not the whole opinion


@pytest.mark.django_db
def test_turns_sealed_late_are_marked_in_the_report(matter_chat: Chat, tmp_path: Path) -> None:
    factories.assembled_turn(matter_chat, caselaw=0)
    call_command("seal_turns", stdout=StringIO())

    path = export(matter_chat, tmp_path / "late.zip")

    assert "sealed late" in members(path)["report.html"].decode()
    assert lines(members(path)["turns.jsonl"])[0]["late"] is True
    result = verify_bundle(path, public_key=fingerprint())
    assert result.problems == []
    assert result.late == 1


@pytest.mark.django_db
def test_a_turn_from_before_passage_digests_verifies_with_a_warning_per_quote(
    matter_chat: Chat, local_opinion: CaselawOpinion, tmp_path: Path
) -> None:
    """Quotes stored before passage digests were recorded (``passage_sha256`` empty), in a turn sealed late:
    each re-verifies against its bundled passage, and the verifier says that no digest of the time vouches
    for that passage, rather than failing a matter with nothing wrong in it."""
    message = factories.MessageFactory.create(chat=matter_chat)
    document = factories.DocumentQuoteFactory.create(message=message, passage_sha256="")
    opinion = factories.OpinionQuoteFactory.create(message=message, opinion=local_opinion, passage_sha256="")
    ledger.assemble(message)
    call_command("seal_turns", stdout=StringIO())

    path = export(matter_chat, tmp_path / "legacy.zip")
    result = verify_bundle(path, public_key=fingerprint())

    assert result.problems == []
    assert (result.quotes, result.late) == (2, 1)
    unrecorded = [w for w in result.warnings if "no passage digest was recorded" in w]
    named = {f"message_citations:{document.pk}", f"message_caselaw_citations:{opinion.pk}"}
    assert {w.split("quote ")[1].split(")")[0] for w in unrecorded} == named, result.warnings
    assert members(path)["report.html"].decode().count("no passage digest: stored before digests were recorded") == 2
    # The opinion's passage in context, not the whole opinion (what a quote that does not re-verify gets).
    (passage,) = [
        p for p in lines(members(path)["passages.jsonl"]) if p["row"] == f"message_caselaw_citations:{opinion.pk}"
    ]
    assert 0 < len(passage["excerpt"]) < len(local_opinion.text) - 1_000


@pytest.mark.parametrize("sealed", ["late", "on time", "on time under earlier rules"])
@pytest.mark.django_db
def test_a_quote_todays_rules_judge_otherwise_warns_unless_its_turn_was_sealed_on_time_under_these_rules(
    matter_chat: Chat, tmp_path: Path, sealed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tolerant match stored before alterations were recorded (``alterations`` empty, as rows from then are):
    today's rules report its alterations. In a turn sealed late, verified before its seal perhaps under
    earlier rules, that is a warning naming the quote and the difference; so it is in a turn sealed on time
    under earlier rules than the verifier's (its seal names them: what they said is not this verifier's to
    judge, and a matter sealed across an upgrade must still verify); in a turn sealed on time under the
    verifier's own rules, it is a problem."""
    message = factories.MessageFactory.create(chat=matter_chat)
    quote = factories.DocumentQuoteFactory.create(message=message, altered=True, alterations=[])
    ledger.assemble(message)
    if sealed == "late":
        call_command("seal_turns", stdout=StringIO())
    else:
        if sealed == "on time under earlier rules":
            monkeypatch.setattr(seals, "VERIFIER_VERSION", "2")
        seals.seal_turn(message_id=message.pk)

    result = verify_bundle(export(matter_chat, tmp_path / "rules.zip"), public_key=fingerprint())

    difference = f"(turn {message.pk}, quote message_citations:{quote.pk}): re-verified, its alterations is ["
    named = [line for line in [*result.problems, *result.warnings] if difference in line]
    assert len(named) == 1, (result.problems, result.warnings)
    assert "the sealed row says []" in named[0]
    if sealed == "late":
        assert result.problems == []
        assert "sealed late, after it was verified, perhaps under earlier rules" in named[0]
    elif sealed == "on time under earlier rules":
        assert result.problems == []
        assert "sealed under verification rules '2', not this verifier's" in named[0]
    else:
        assert result.problems == named


# Hogarth v. Bell (E.D.N.C. 2025): the court reports Freeman's assertion, then rejects it.
_HOGARTH = (
    "First, Freeman asserts that no injury is traceable to her because of her declaration. This point is unavailing."
)
# Version 3 verified it as tolerant; version 4 reads it as altered (the omission drops who asserts it).
_VOICE_QUOTE = "Freeman . . . no injury is traceable to her because of her declaration"


@pytest.mark.parametrize("recorded", ["as rules 3 said", "otherwise"])
@pytest.mark.django_db
def test_a_quote_sealed_under_rules_3_is_checked_under_them_and_todays_difference_is_a_warning(
    matter_chat: Chat, tmp_path: Path, recorded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn sealed on time under rules 3, which this verifier still has: its quote is re-verified under rules 3
    (a difference from the row is a problem: the record is not what its rules said), and where today's rules read
    it otherwise, that is a warning naming both versions."""
    message = factories.MessageFactory.create(chat=matter_chat)
    document = factories.DocumentFactory.create(project=matter_chat.project, content=_HOGARTH)
    match = verify_quote(_VOICE_QUOTE, _HOGARTH, rules=3)
    assert match is not None
    assert match.method == "tolerant_match"
    quote = factories.DocumentQuoteFactory.create(
        message=message,
        document=document,
        quote=_VOICE_QUOTE,
        source_offset_start=match.start,
        source_offset_end=match.end,
        verification_method=match.method,
        verification_confidence=match.confidence if recorded == "as rules 3 said" else 0.5,
        alterations=alterations_record(match),
    )
    ledger.assemble(message)
    monkeypatch.setattr(seals, "VERIFIER_VERSION", "3")
    seals.seal_turn(message_id=message.pk)

    result = verify_bundle(export(matter_chat, tmp_path / "rules3.zip"), public_key=fingerprint())

    where = f"(turn {message.pk}, quote message_citations:{quote.pk})"
    if recorded == "otherwise":
        assert [p for p in result.problems if where in p] == [
            next(p for p in result.problems if where in p and "under the rules it was sealed by (3)" in p)
        ]
        assert "re-verified, its confidence is 0.87, the sealed row says 0.5" in result.problems[0]
        return
    assert result.problems == []
    today = [w for w in result.warnings if where in w]
    assert today, result.warnings
    assert all("under today's rules (4), not those it was sealed by (3)" in w for w in today)
    assert any("its method is 'altered', the sealed row says 'tolerant_match'" in w for w in today)
    assert not any("use the verifier of that version" in w for w in result.warnings)


def test_a_quote_todays_rules_judge_otherwise_is_bundled_in_context_not_with_its_whole_source() -> None:
    """Its row differs from today's verification the same way against its passage in context as against the
    whole text: the excerpt is enough for the recipient, as for any quote."""
    text = "Lorem ipsum. " * 400 + factories.TEXT + " Dolor sit amet." * 400
    match = verify_quote(factories.ALTERED_QUOTE, text)
    assert match is not None
    assert match.alterations
    row = {
        "quote": factories.ALTERED_QUOTE,
        "offset_start": match.start,
        "offset_end": match.end,
        "method": match.method,
        "confidence": match.confidence,
        "alterations": [],  # stored before alterations were recorded
        "passage_sha256": record.text_sha256(text[match.start : match.end]),
    }

    start, excerpt = excerpt_for(row, text)

    assert 0 < start < match.start
    assert len(excerpt) < len(text) // 2
    differences = record.quote_differences(row, excerpt, start)
    assert differences == record.quote_differences(row, text, 0)
    assert differences[0].startswith("re-verified, its alterations is [")


@pytest.mark.django_db
def test_an_unsealed_turn_fails_verification(matter_chat: Chat, tmp_path: Path) -> None:
    message = factories.assembled_turn(matter_chat, caselaw=0)

    result = verify_bundle(export(matter_chat, tmp_path / "u.zip"), public_key=fingerprint())

    assert result.problems == [
        f"turns.jsonl line 1 (turn {message.pk}): the turn is not sealed (its facts are not authenticated)"
    ]


@pytest.mark.django_db
def test_the_development_key_says_so(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, settings: LazySettings
) -> None:
    chat, _ = exported_matter
    settings.LQAI_LEDGER_KEY = ""
    call_command("seal_turns", stdout=StringIO())  # nothing to seal; the chain stays the test key's
    path = export(chat, tmp_path / "dev.zip")

    manifest = json.loads(members(path)["manifest.json"])
    assert manifest["development_key"] is True
    assert "development key" in members(path)["report.html"].decode()
    result = verify_bundle(path)
    assert any("DEVELOPMENT key" in w for w in result.warnings)
    assert not any("proves nothing" in w for w in result.warnings)  # the files are as signed: say what it lacks
    # The summary reads right to a non-specialist: valid, but it does not show who made the bundle
    assert result.summary().endswith(
        f"signature valid, made with a development key ({result.fingerprint}): it does not show who made this bundle"
    )


@pytest.mark.django_db
def test_the_summary_says_what_the_signature_shows(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    chat, _ = exported_matter
    path = export(chat, tmp_path / "m.zip")

    expected = verify_bundle(path, public_key=fingerprint())
    unnamed = verify_bundle(path)
    files = members(path)
    forged = verify_bundle(rewrite(tmp_path / "f.zip", {**files, "manifest.sig": b"AAAA"}), public_key=fingerprint())

    assert expected.summary().endswith(f"signature valid, made with the key expected ({fingerprint()})")
    assert unnamed.summary().endswith(
        f"signature valid, made with the key the bundle carries ({fingerprint()}): it shows who made this bundle "
        "only once that fingerprint is compared with the one its sender published"
    )
    assert forged.summary().endswith(f"signature NOT valid (the bundle's key {fingerprint()})")


# --- Tampering ---------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_one_byte_flipped_in_any_file_is_detected(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    chat, _ = exported_matter
    original = members(export(chat, tmp_path / "m.zip"))

    for name, data in original.items():
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x01
        path = rewrite(tmp_path / f"flip-{name}.zip", {**original, name: bytes(flipped)})
        try:
            result = verify_bundle(path, public_key=fingerprint())
        except Exception as exc:
            pytest.fail(f"flipping a byte of {name} crashed the verifier: {exc!r}")
        assert result.problems, name
        assert any(name in problem or "manifest" in problem for problem in result.problems), (name, result.problems)


@pytest.mark.django_db
def test_a_removed_turn_is_detected(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    chat, turns = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    # Remove the second turn, its rows, its entries and its seal, and re-sign the bundle with the ledger key.
    files["turns.jsonl"] = jsonl([t for t in lines(files["turns.jsonl"]) if t["turn"]["message"] != turns[1]])
    files["rows.jsonl"] = jsonl([r for r in lines(files["rows.jsonl"]) if r["message"] != turns[1]])
    files["ledger.jsonl"] = jsonl([e for e in lines(files["ledger.jsonl"]) if e["message"] != turns[1]])
    files["seals.jsonl"] = jsonl([s for s in lines(files["seals.jsonl"]) if s["message"] != turns[1]])

    result = verify_bundle(rewrite(tmp_path / "r.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert f"seals.jsonl line 2 (turn {turns[2]}): seal #3 where #2 was expected (a seal removed, added or moved)" in (
        result.problems
    )
    # Without the key, the same removal already fails at the manifest.
    unsigned = verify_bundle(rewrite(tmp_path / "u.zip", files), public_key=fingerprint())
    assert "turns.jsonl: its SHA-256 differs from the manifest's (the file was changed)" in unsigned.problems


@pytest.mark.django_db
def test_two_swapped_turns_are_detected(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    chat, turns = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    swapped = lines(files["turns.jsonl"])
    swapped[0], swapped[1] = swapped[1], swapped[0]
    files["turns.jsonl"] = jsonl(swapped)

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert result.problems == [
        f"turns.jsonl line 2 (turn {turns[0]}): out of chain order (its seal #1 comes after #2: turns swapped or moved)"
    ]


@pytest.mark.django_db
def test_a_ledger_row_edited_in_sql_shows_in_a_fresh_export(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    chat, turns = exported_matter
    quote = DocumentQuote.objects.filter(message_id=turns[0]).order_by("id").first()
    assert quote is not None
    _raw(
        "UPDATE citation_ledger_entry SET verification_status = 'tolerant_match', confidence = 0.9 "
        "WHERE message_citation_id = %(id)s",
        {"id": _db_id(quote.pk)},
    )

    result = verify_bundle(export(chat, tmp_path / "fresh.zip"), public_key=fingerprint())

    assert len(result.problems) == 2  # the two columns changed, each named
    assert all(p.startswith(f"ledger.jsonl (turn {turns[0]}): ledger entry ") for p in result.problems)
    assert f"(message_citations:{quote.pk}): its verification_status is 'tolerant_match', its sealed row says " in (
        result.problems[0] + result.problems[1]
    )
    assert "its confidence is 0.9, its sealed row says 1.0" in result.problems[0] + result.problems[1]


@pytest.mark.django_db
def test_a_pin_cite_or_a_quotes_place_edited_in_sql_shows_in_a_fresh_export(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    chat, turns = exported_matter
    citation = CaseCitation.objects.get(message_id=turns[2])
    quote = DocumentQuote.objects.filter(message_id=turns[0]).exclude(answer_offset_start=None).order_by("id").first()
    assert quote is not None
    _raw("UPDATE message_case_citations SET pin_status = 'unchecked' WHERE id = %(id)s", {"id": _db_id(citation.pk)})
    _raw(
        "UPDATE message_citations SET answer_offset_start = answer_offset_start + 1, "
        "answer_offset_end = answer_offset_end + 1 WHERE id = %(id)s",
        {"id": _db_id(quote.pk)},
    )

    result = verify_bundle(export(chat, tmp_path / "fresh.zip"), public_key=fingerprint())

    assert f"message_case_citations:{citation.pk} differs from its seal (edited)" in "\n".join(result.problems)
    assert f"message_citations:{quote.pk} differs from its seal (edited)" in "\n".join(result.problems)


@pytest.mark.django_db
def test_turns_sealed_in_the_first_facts_format_verify_with_a_warning_and_in_an_earlier_export_format(
    api_client: APIClient, matter_chat: Chat, tmp_path: Path
) -> None:
    # Given a turn sealed before a quote's place and a pin cite were sealed, then one sealed since
    older = factories.MessageFactory.create(chat=matter_chat)
    factories.DocumentQuoteFactory.create(message=older)
    factories.CaseCitationFactory.create(message=older, pin="310", pin_status="within")
    seal_as_the_earlier_release(older)
    _turn(api_client, matter_chat)

    files = members(export(matter_chat, tmp_path / "m.zip"))
    result = verify_bundle(tmp_path / "m.zip", public_key=fingerprint())

    assert result.problems == []
    assert (
        "turns.jsonl: 1 of 2 turns are sealed in lqai-turn-facts/1 (their seals #1 to #1), which did not seal a "
        "quote's place in the answer and context flags or a case citation's pin cite: in those turns, those fields "
        "are vouched for by the export's signature only"
    ) in result.warnings
    # And the same record as the earlier export format wrote it (rows without those fields) verifies too
    earlier_rows = [_first_format_row(row) for row in lines(files["rows.jsonl"])]
    manifest = json.loads(files["manifest.json"])
    files = {
        **files,
        "rows.jsonl": jsonl(earlier_rows),
        "manifest.json": json.dumps({**manifest, "format": "lqai-export/2"}).encode(),
    }
    earlier = verify_bundle(rewrite(tmp_path / "earlier.zip", files, resign=keys.signing_key()))
    assert [p for p in earlier.problems if "seal #2" not in p] == []
    assert all("differs from its seal (edited)" in p for p in earlier.problems)


def _finalized_in_the_first_facts_format(
    chat: Chat, user: Any, monkeypatch: pytest.MonkeyPatch, *, content: str, status: str
) -> tuple[Message, ClaimedCitation]:
    """A turn quoting the matter's document, finalized ``status`` and sealed as the first facts format sealed it."""
    _, answer = start_turn(chat=chat, content=QUESTION, author=user)
    claim = ClaimedCitation("must ultimately be satisfied", document_id=chat.project.documents.get().pk)  # type: ignore[union-attr]
    with monkeypatch.context() as patched:
        patched.setattr(seals.TurnFacts, "digests", _first_format_digests)
        finalize_turn(message=answer, content=content, status=status, claimed_citations=[claim])
    return answer, claim


@pytest.mark.django_db
def test_a_turn_resumed_since_the_first_facts_format_is_wholly_sealed_and_not_counted_as_of_it(
    matter_chat: Chat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: Any
) -> None:
    # Given a turn interrupted and sealed in the first facts format, then resumed and sealed in the current one
    answer, claim = _finalized_in_the_first_facts_format(
        matter_chat, user, monkeypatch, content="Partial", status=Message.Status.INTERRUPTED
    )
    answer.refresh_from_db()
    finalize_turn(
        message=answer, content="Partial, then whole", status=Message.Status.COMPLETE, claimed_citations=[claim]
    )
    assert [record.sealed_format(s.row_digests) for s in TurnSeal.objects.order_by("sequence")] == [
        record.FACTS_FORMAT_1,
        record.FACTS_FORMAT,
    ]

    # Then its latest seal covers every field of its rows: neither the verifier nor verify_ledger says otherwise
    result = verify_bundle(export(matter_chat, tmp_path / "m.zip"), public_key=fingerprint())
    assert result.problems == []
    assert not [w for w in result.warnings if record.FACTS_FORMAT_1 in w]
    status, output = verify_ledger()
    assert status == 0, output
    assert record.FACTS_FORMAT_1 not in output


@pytest.mark.django_db
def test_a_row_with_a_field_no_facts_format_has_fails_whatever_its_seals_format(
    api_client: APIClient, matter_chat: Chat, tmp_path: Path
) -> None:
    # Given a turn sealed in the first facts format and one sealed in the current one
    older = factories.MessageFactory.create(chat=matter_chat)
    factories.CaseCitationFactory.create(message=older)
    seal_as_the_earlier_release(older)
    _turn(api_client, matter_chat)
    files = members(export(matter_chat, tmp_path / "m.zip"))
    rows = lines(files["rows.jsonl"])
    first_format_row = next(row for row in rows if row["message"] == str(older.pk))
    current_row = next(row for row in rows if row["message"] != str(older.pk))

    # When the key's holder adds a field to a row of each, which no seal covers
    for row in (first_format_row, current_row):
        row["court_approved"] = True
    files = {**files, "rows.jsonl": jsonl(rows)}
    result = verify_bundle(rewrite(tmp_path / "added.zip", files, resign=keys.signing_key()))

    # Then both rows differ from their seals
    problems = "\n".join(result.problems)
    assert f"row {record.row_key(first_format_row)} differs from its seal (edited)" in problems
    assert f"row {record.row_key(current_row)} differs from its seal (edited)" in problems


@pytest.mark.django_db
def test_a_seal_of_an_unknown_facts_format_is_reported_once(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    # Given a bundle whose first seal names a facts format no verifier knows, re-signed by the key's holder
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    claimed = lines(files["seals.jsonl"])
    claimed[0]["row_digests"]["format"] = "lqai-turn-facts/9"
    files["seals.jsonl"] = jsonl(claimed)

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    # Then the one seal's format is one problem
    unknown = [p for p in result.problems if "'lqai-turn-facts/9'" in p]
    assert unknown == [
        f"seals.jsonl line 1 (turn {claimed[0]['message']}): its facts format 'lqai-turn-facts/9' is none of "
        "lqai-turn-facts/1, lqai-turn-facts/2"
    ]


@pytest.mark.django_db
def test_a_context_flags_difference_in_a_turn_sealed_in_the_first_facts_format_says_its_row_is_not_sealed(
    matter_chat: Chat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: Any
) -> None:
    # Given a turn with a verified quote, sealed in the first facts format, which does not seal context flags
    _finalized_in_the_first_facts_format(
        matter_chat, user, monkeypatch, content="Quoted.", status=Message.Status.COMPLETE
    )
    files = members(export(matter_chat, tmp_path / "m.zip"))
    rows = lines(files["rows.jsonl"])
    (quote,) = [row for row in rows if row["table"] in record.QUOTE_TABLES]
    assert quote["offset_start"] is not None
    found = quote["context_flags"]
    # When the key's holder changes a quote's context flags
    quote["context_flags"] = [{"flag": "limited_after", "source_end": 2, "source_start": 1}]  # as canonical JSON reads
    files["rows.jsonl"] = jsonl(rows)

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    # Then the re-verification names the difference without calling the row sealed
    flagged = [p for p in result.problems if "context_flags" in p]
    assert len(flagged) == 1, result.problems
    assert flagged[0].endswith(
        f"re-verified, its context_flags is {found!r}, its row (lqai-turn-facts/1 does not seal it) says "
        f"{quote['context_flags']!r}"
    )


def test_a_quotes_context_flags_are_re_verified_where_its_row_records_them() -> None:
    text = "Preamble text. The rule applies in every case where the parties consent to it in writing."
    match = verify_quote("The rule applies in every case", text)
    assert match is not None
    assert match.method == "altered"
    row = {
        "quote": "The rule applies in every case",
        "offset_start": match.start,
        "offset_end": match.end,
        "method": match.method,
        "confidence": match.confidence,
        "alterations": [],
        "passage_sha256": record.text_sha256(text[match.start : match.end]),
        "context_flags": [{"flag": "limited_after", "source_start": 46, "source_end": 51}],
    }

    assert record.quote_differences(row, text, 0) == []
    assert record.quote_differences({**row, "context_flags": []}, text, 0) == [
        "re-verified, its context_flags is [{'flag': 'limited_after', 'source_start': 46, 'source_end': 51}], the "
        "sealed row says []"
    ]
    first_format = {name: value for name, value in row.items() if name != "context_flags"}
    assert record.quote_differences(first_format, text, 0) == []


@pytest.mark.django_db
def test_an_altered_passage_no_longer_verifies(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    chat, turns = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    passages = lines(files["passages.jsonl"])
    target = next(p for p in passages if p["source_table"] == "caselaw_opinions")
    row = next(r for r in lines(files["rows.jsonl"]) if record.row_key(r) == target["row"])
    start, end = row["offset_start"] - target["excerpt_start"], row["offset_end"] - target["excerpt_start"]
    passage = target["excerpt"][start:end]
    assert "court" in passage
    # "The reviewing court must ..." -> "The reviewing judge must ...", in the bundled passage only
    target["excerpt"] = target["excerpt"][:start] + passage.replace("court", "judge") + target["excerpt"][end:]
    files["passages.jsonl"] = jsonl(passages)

    result = verify_bundle(rewrite(tmp_path / "p.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert result.problems, "an altered passage went unnoticed"
    assert all(f"quote {target['row']}" in p for p in result.problems), result.problems
    assert any(f"(turn {turns[2]}, quote {target['row']})" in p for p in result.problems)


@pytest.mark.django_db
def test_export_matter_refuses_an_unknown_matter_or_a_missing_directory(matter_chat: Chat, tmp_path: Path) -> None:
    unknown = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(CommandError, match=f"No matter {unknown}: pass a project id"):
        call_command("export_matter", unknown, "--out", str(tmp_path / "m.zip"))
    with pytest.raises(CommandError, match=f"--out {tmp_path}/absent/m.zip: the directory {tmp_path}/absent does not"):
        call_command("export_matter", str(matter_chat.project_id), "--out", str(tmp_path / "absent" / "m.zip"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.django_db
def test_an_interrupted_export_leaves_no_file(
    matter_chat: Chat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails_halfway(*, of: Any, out: Any, on_batch: Any) -> None:
        out.write(b"PK half a zip")
        raise OSError("No space left on device")

    monkeypatch.setattr(export_module, "export_record", fails_halfway)

    with pytest.raises(OSError, match="No space left"):
        call_command("export_matter", str(matter_chat.project_id), "--out", str(tmp_path / "m.zip"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.django_db
def test_a_large_export_shows_its_progress_per_batch_of_turns(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citations import export as exporting
    from citations.management.commands import export_matter as command

    chat, _ = exported_matter
    monkeypatch.setattr(exporting, "BATCH", 2)
    batches: list[int] = []

    assert chat.project is not None
    with (tmp_path / "m.zip").open("wb") as out:
        summary = exporting.export_record(of=chat.project, out=out, on_batch=batches.append)

    assert batches == [2, 1]
    assert summary.turns == 3
    # and the command draws it as a bar on a terminal, once a matter has PROGRESS_FROM turns
    terminal = _Terminal()
    monkeypatch.setattr(command, "PROGRESS_FROM", 3)
    monkeypatch.setattr("sys.stderr", terminal)
    export(chat, tmp_path / "bar.zip")
    assert "export_matter" in terminal.getvalue()
    assert "3/3" in terminal.getvalue()
    assert verify_bundle(tmp_path / "bar.zip", public_key=fingerprint()).problems == []


def _sealed_turns(chat: Chat, *, turns: int, sources: int) -> None:
    """``turns`` turns of ``chat``, each with ``sources`` tool sources, sealed, each in one transaction."""
    for _ in range(turns):
        with transaction.atomic():  # a turn and its rows, in one transaction as a finalize writes them
            message = factories.MessageFactory.create(chat=chat)
            factories.MessageToolSourceFactory.create_batch(
                sources, message=message, position=factory.Iterator(range(sources))
            )
            ledger.assemble(message)
            seals.seal_turn(message_id=message.pk)


def _export_peak(chat: Chat, path: Path) -> int:
    """The most memory Python held while ``chat``'s matter was exported to ``path`` (``tracemalloc``)."""
    assert chat.project is not None
    tracemalloc.start()
    try:
        with path.open("wb") as out:
            export_module.export_record(of=chat.project, out=out)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.django_db
def test_an_exports_memory_does_not_grow_with_its_matter(
    matter_chat: Chat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export is written a batch of turns at a time: what it holds is a batch's, whatever the matter's size.
    (Batches of 5 turns here, so that a batch is small beside what a growing hold would add. The larger export
    still holds somewhat more: each file is copied into the zip a MiB at a time, and the smaller one's files are
    shorter than that. Holding every seal of the chain held twice as much.)"""
    monkeypatch.setattr(export_module, "BATCH", 5)
    # Given a matter of 60 turns, each with 40 sources (the seal of each names 40 row digests)
    _sealed_turns(matter_chat, turns=60, sources=40)
    small = _export_peak(matter_chat, tmp_path / "small.zip")
    # When it has four times as many
    _sealed_turns(matter_chat, turns=180, sources=40)
    large = _export_peak(matter_chat, tmp_path / "large.zip")

    # Then its export holds about as much
    assert verify_bundle(tmp_path / "large.zip", public_key=fingerprint()).problems == []
    assert large < 1.5 * small, f"{large:,} bytes held for 240 turns, {small:,} for 60"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_a_matter_exported_while_a_turn_commits_is_the_record_of_one_instant(
    committed_matter_chat: tuple[APIClient, Chat], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a matter with two sealed turns
    client, chat = committed_matter_chat
    _turn(client, chat)
    _turn(client, chat)
    # and a third turn committed by another connection once the export has read the first seal (before it reads
    # where the chain ends, and the turns)
    monkeypatch.setattr(seals, "seal_fields", a_turn_commits_first(client, chat, seals.seal_fields))

    # When the matter is exported
    path = export(chat, tmp_path / "matter.zip")

    # Then the bundle is the matter as it stood when the export began: two turns, their seals and the chain's
    # head at the second, and it verifies
    monkeypatch.undo()
    result = verify_bundle(path, public_key=fingerprint())
    assert result.problems == []
    assert (result.turns, result.seals) == (2, 2)
    assert json.loads(members(path)["manifest.json"])["chain_head"]["sequence"] == 2
    # and the next export has the third
    assert verify_bundle(export(chat, tmp_path / "next.zip"), public_key=fingerprint()).turns == 3


@pytest.mark.django_db
def test_a_bundle_signed_with_another_key_fails(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    other = Ed25519PrivateKey.generate()

    path = rewrite(tmp_path / "other.zip", files, resign=other)
    result = verify_bundle(path, public_key=fingerprint())
    by_key = verify_bundle(path, public_key=record.public_key_b64(keys.signing_key().public_key()))

    expected = (
        f"the bundle is signed by the key {record.fingerprint(other.public_key())}, not by the expected {fingerprint()}"
    )
    assert any(expected in p for p in result.problems)
    assert any(expected in p for p in by_key.problems)
    assert verify_bundle(path, public_key=record.fingerprint(other.public_key())).problems == []


# --- An export against an earlier one (``--extends``) ----------------------------------------------------------------


def extends(later: Path, earlier: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``python -m lqai_verify LATER --extends EARLIER``'s exit status and output (stdout and stderr)."""
    status = lqai_verify_main([str(later), "--public-key", fingerprint(), "--extends", str(earlier)])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


@pytest.mark.django_db
def test_a_later_export_extends_the_earlier_one_it_holds_unchanged(
    api_client: APIClient, exported_matter: tuple[Chat, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat, _ = exported_matter
    earlier = export(chat, tmp_path / "march.zip")
    _turn(api_client, chat)
    later = export(chat, tmp_path / "june.zip")
    head = verify_bundle(earlier).head
    assert head is not None

    status, output = extends(later, earlier, capsys)

    assert status == 0, output
    assert f"it extends {earlier} (exported " in output
    assert f"signed by {fingerprint()}): its seals #1 to #{head[0]} unchanged" in output
    # The other way round, the earlier export does not hold the later one's last seal.
    status, output = extends(earlier, later, capsys)
    assert status == 1
    assert f"the earlier export's chain ends at seal #{head[0] + 1}, which this export does not hold" in output


@pytest.mark.django_db
def test_an_export_of_another_matter_extends_nothing(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str], user: Any
) -> None:
    chat, _ = exported_matter
    other = factories.ChatFactory.create(project=factories.ProjectFactory.create(owner=user), owner=user)

    status, output = extends(export(chat, tmp_path / "a.zip"), export(other, tmp_path / "b.zip"), capsys)

    assert status == 1
    assert f"(the earlier export) is of the chain matter:{other.project_id}, not matter:{chat.project_id}" in output


# PostgreSQL: with its triggers off, as a database superuser could (SQLite checks each test's foreign keys).
@pytest.mark.postgres
@pytest.mark.django_db
def test_a_chain_cut_back_or_rewritten_in_sql_since_an_earlier_export_is_found(
    api_client: APIClient, exported_matter: tuple[Chat, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database superuser removes the last turn, its rows, entries and seal, and moves the chain's head back:
    the next export is signed by the server and verifies on its own. Only the earlier export shows the cut."""
    chat, turns = exported_matter
    earlier = export(chat, tmp_path / "march.zip")
    with connection.cursor() as cursor:  # the seals' deferred foreign-key checks made while their turns exist
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    last = TurnSeal.objects.get(message_id=turns[-1])
    for table in ("citation_ledger_entry", *TURN_TABLES, "turn_seals"):
        _raw(f"DELETE FROM {table} WHERE message_id = %(id)s", {"id": last.message_id})
    _raw("DELETE FROM messages WHERE id = %(id)s", {"id": last.message_id})
    _raw(
        "UPDATE seal_chain_heads SET sequence = %(sequence)s, seal_sha256 = %(digest)s WHERE chain = %(chain)s",
        {"sequence": last.sequence - 1, "digest": last.previous_sha256, "chain": last.chain},
    )
    cut = export(chat, tmp_path / "cut.zip")
    assert verify_bundle(cut, public_key=fingerprint()).problems == []
    assert verify_ledger()[0] == 0

    status, output = extends(cut, earlier, capsys)
    in_place, checked = verify_ledger("--extends", str(earlier))

    assert in_place == 1
    assert f"BROKEN at the record ({last.chain} #{last.sequence}): the export {earlier} (exported " in checked
    assert "ends at this seal, which the record no longer holds: the chain was cut back since" in checked
    assert status == 1
    cut_back = f"chain ends at seal #{last.sequence}, which this export does not hold: the record was cut back since "
    assert cut_back in output
    # A turn sealed in its place takes its number with another digest.
    _turn(api_client, chat)
    status, output = extends(export(chat, tmp_path / "rewritten.zip"), earlier, capsys)
    assert status == 1
    assert f"ends at seal #{last.sequence}, which this export holds with another digest: the record was rewritten" in (
        output
    )
    assert (
        "which the record holds with another digest: the chain was rewritten since"
        in verify_ledger("--extends", str(earlier))[1]
    )


@pytest.mark.django_db
def test_verify_ledger_checks_the_record_still_holds_earlier_exports(
    api_client: APIClient, exported_matter: tuple[Chat, list[str]], tmp_path: Path, user: Any
) -> None:
    chat, _ = exported_matter
    earlier = export(chat, tmp_path / "march.zip")
    empty = export(
        factories.ChatFactory.create(project=factories.ProjectFactory.create(owner=user), owner=user),
        tmp_path / "empty.zip",
    )
    _turn(api_client, chat)

    status, output = verify_ledger("--extends", str(earlier), "--extends", str(empty))

    assert status == 0, output
    assert "2 earlier export(s) held" in output


@pytest.mark.django_db
def test_verify_ledger_refuses_an_earlier_export_that_does_not_verify(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    changed = rewrite(tmp_path / "changed.zip", {**files, "turns.jsonl": files["turns.jsonl"].replace(b"e", b"a", 1)})
    (tmp_path / "notes.zip").write_text("not a zip")

    with pytest.raises(
        CommandError,
        match=r"changed.zip: the export does not verify \(2 problem\(s\), the first: turns.jsonl: its SHA-256 differs",
    ):
        verify_ledger("--extends", str(changed))
    with pytest.raises(CommandError, match=r"--extends .*notes.zip: .*not a readable zip"):
        verify_ledger("--extends", str(tmp_path / "notes.zip"))


# --- A bundle is input from whoever sent it ------------------------------------------------------------------------

# Values of every other JSON type, put in place of each value of a bundle's files in turn.
_MISPLACED: tuple[Any, ...] = (None, True, -1, "x", [], {})


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside ``value`` (the first two items of a list), ``()`` for ``value`` itself."""
    yield prefix
    if isinstance(value, dict):
        for name, inner in value.items():
            yield from _paths(inner, (*prefix, name))
    elif isinstance(value, list):
        for i, inner in enumerate(value[:2]):
            yield from _paths(inner, (*prefix, i))


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    inner = copy
    for step in path[:-1]:
        inner = inner[step]
    inner[path[-1]] = new
    return copy


def _malformed(files: dict[str, bytes]) -> Iterator[tuple[str, tuple[Any, ...], Any, bytes]]:
    """Each file of a bundle with one of its values (in a JSON Lines file, of its first line) replaced by a
    value of another type: (file, path, value, the file's new bytes)."""
    for name in sorted(files):
        if name.endswith(".json"):
            document = json.loads(files[name])
            for path in _paths(document):
                for new in _MISPLACED:
                    yield name, path, new, json.dumps(_replaced(document, path, new)).encode()
        elif name.endswith(".jsonl"):
            first, rest = files[name].split(b"\n", 1)
            document = json.loads(first)
            for path in _paths(document):
                for new in _MISPLACED:
                    yield name, path, new, json.dumps(_replaced(document, path, new)).encode() + b"\n" + rest


@pytest.mark.django_db
@pytest.mark.timeout(300)
def test_a_malformed_bundle_is_a_list_of_problems_never_a_crash(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """Every value of every file, replaced by a value of each other JSON type: the verifier reports it (as a
    problem, or as no bundle at all) and never stops with another exception. Each mutation is checked as sent
    (the manifest's digests then catch it) and, for the files behind the manifest, re-signed by the key's
    holder, so that the checks of the record itself read every malformed value too."""
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    checked = 0
    for name, path, new, data in _malformed(files):
        changed = {**files, name: data}
        sent = rewrite(tmp_path / "sent.zip", changed)
        signed = name not in ("manifest.json", "public_key.json")
        variants = [sent, rewrite(tmp_path / "signed.zip", changed, resign=keys.signing_key())] if signed else [sent]
        for bundle in variants:
            try:
                result = verify_bundle(bundle, public_key=fingerprint())
            except BundleError:
                continue
            except Exception as exc:  # the point: no other exception, whatever the input
                pytest.fail(f"{name} {list(path)} = {new!r}: {exc!r}")
            if bundle is sent:
                assert not result.ok, f"{name} {list(path)} = {new!r} went unnoticed"
            checked += 1
    assert checked > 1_000  # every file, and most of their values


@pytest.mark.django_db
def test_a_malformed_value_is_named_with_its_file_line_and_field(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    seals_file = lines(files["seals.jsonl"])
    seals_file[0]["sequence"] = "1"
    manifest = json.loads(files["manifest.json"])
    manifest["chain_head"] = 9
    key_file = json.loads(files["public_key.json"])
    key_file["seal_keys"][0]["public_key"] = "not a key"

    in_seals = verify_bundle(
        rewrite(tmp_path / "s.zip", {**files, "seals.jsonl": jsonl(seals_file)}, resign=keys.signing_key()),
        public_key=fingerprint(),
    )
    in_manifest = verify_bundle(
        rewrite(tmp_path / "m2.zip", {**files, "manifest.json": json.dumps(manifest).encode()}),
        public_key=fingerprint(),
    )
    in_keys = verify_bundle(
        rewrite(tmp_path / "k.zip", {**files, "public_key.json": json.dumps(key_file).encode()}),
        public_key=fingerprint(),
    )

    assert (
        f"seals.jsonl line 1 (turn {seals_file[0]['message']}): malformed: seal.sequence is a string, not an integer"
        in in_seals.problems
    )
    assert "manifest.json.chain_head is an integer, not an object or null" in in_manifest.problems
    assert "public_key.json: seal_keys[0]: the public key is not base64" in in_keys.problems


@pytest.mark.django_db
def test_a_file_the_zip_holds_twice_is_a_problem(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    """A zip can hold two files of one name: a reader shows one, the checks read the other."""
    chat, _ = exported_matter
    path = export(chat, tmp_path / "m.zip")
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(path, "a") as bundle:
        bundle.writestr("report.html", "<p>Every quote verified.</p>")

    result = verify_bundle(path, public_key=fingerprint())

    assert "report.html: the zip holds more than one file of this name" in result.problems


@pytest.mark.django_db
def test_a_bundle_that_would_unpack_past_the_limit_is_refused_unread(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat, _ = exported_matter
    path = export(chat, tmp_path / "m.zip")
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("padding.bin", bytes(3 * 2**20))  # 3 MiB of zeros, a few KB in the zip
    assert path.stat().st_size < 2**20

    with pytest.raises(BundleError, match=r"would unpack to 3,1\d\d,\d{3} bytes, more than the 2,097,152 allowed"):
        verify_bundle(path, public_key=fingerprint(), max_bytes=2 * 2**20)
    assert lqai_verify_main([str(path), "--max-mb", "2"]) == 2
    assert "more than the 2,097,152 allowed" in capsys.readouterr().err
    result = verify_bundle(path, public_key=fingerprint(), max_bytes=4 * 2**20)
    assert result.problems == ["padding.bin: a file the manifest does not list"]


# --- The API -----------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_members_download_the_export_and_others_get_404(
    exported_matter: tuple[Chat, list[str]], api_client: APIClient, other_user: Any, tmp_path: Path
) -> None:
    chat, _ = exported_matter
    url = f"/api/projects/{chat.project_id}/export/"

    response = api_client.get(url)
    outsider = APIClient()
    outsider.force_authenticate(user=other_user)
    denied = outsider.get(url)
    chat.project.members.add(other_user)  # type: ignore[union-attr]
    member = outsider.get(url)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert "attachment" in response["Content-Disposition"]
    path = tmp_path / "api.zip"
    path.write_bytes(b"".join(response.streaming_content))  # type: ignore[attr-defined]
    assert verify_bundle(path, public_key=fingerprint()).problems == []
    assert denied.status_code == 404
    assert member.status_code == 200
    assert APIClient().get(url).status_code in {401, 403}
    assert api_client.get("/api/projects/00000000-0000-0000-0000-000000000000/export/").status_code == 404


# --- The verifier stands alone -----------------------------------------------------------------------------------


def _standalone_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "PYTHONNOUSERSITE": "1"}


def test_the_verifier_and_the_verification_rules_import_without_django() -> None:
    code = (
        "import sys; sys.modules['django'] = None; sys.modules['rest_framework'] = None\n"
        "import lqai_verify.bundle, lqai_verify.record, lqai_verify.verification\n"
        "assert not any(m.startswith(('django', 'citations', 'lqai.')) for m in sys.modules if sys.modules[m])\n"
        "print(lqai_verify.verification.VERIFIER_VERSION)"
    )
    result = subprocess.run(  # noqa: S603 - this interpreter, a fixed program
        [sys.executable, "-c", code], cwd="/", env=_standalone_env(), capture_output=True, text=True
    )

    assert result.returncode == 0, result.stderr
    from lqai_verify.verification import VERIFIER_VERSION

    assert result.stdout.strip() == VERIFIER_VERSION


def _pinned_cryptography() -> str:
    pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("cryptography==")]
    assert len(pins) == 1
    return pins[0]


@pytest.fixture(scope="session")
def cryptography_only_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding only the pinned ``cryptography`` (from the package index or pip's cache)."""
    venv = tmp_path_factory.mktemp("verifier-venv") / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)  # noqa: S603
    if made.returncode != 0:
        unavailable(f"a venv cannot be made here (python -m venv failed: {made.stderr.strip()[-300:]})")
    python = venv / "bin" / "python"
    installed = subprocess.run(  # noqa: S603
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", _pinned_cryptography()],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if installed.returncode != 0:
        unavailable(f"the pinned cryptography cannot be installed into a fresh venv: {installed.stderr.strip()[-300:]}")
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)  # noqa: S603
    names = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
    assert "django" not in names
    assert names <= {"cryptography", "cffi", "pycparser", "pip", "setuptools", "wheel"}, names
    return python


@pytest.mark.django_db
@pytest.mark.timeout(360)
def test_an_exported_matter_verifies_offline_in_a_venv_with_only_cryptography(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, cryptography_only_venv: Path
) -> None:
    chat, _ = exported_matter
    path = export(chat, tmp_path / "matter.zip")
    # The verifier as a recipient gets it: the lqai_verify folder (with lqai_verify/verification), nothing else.
    checkout = tmp_path / "verifier"
    shutil.copytree(ROOT / "lqai_verify", checkout / "lqai_verify")
    assert sorted(path.name for path in checkout.iterdir()) == ["lqai_verify"]
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONNOUSERSITE": "1"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603
            [str(cryptography_only_venv), "-m", "lqai_verify", *args],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    good = run(str(path), "--public-key", fingerprint())
    files = members(path)
    passages = lines(files["passages.jsonl"])
    passages[0]["excerpt"] = passages[0]["excerpt"].replace(" ", "  ", 1).replace("e", "a", 3)
    tampered = run(
        str(rewrite(tmp_path / "t.zip", {**files, "passages.jsonl": jsonl(passages)})), "--public-key", fingerprint()
    )
    other = run(str(path), "--public-key", "0" * 64)

    assert good.returncode == 0, good.stderr
    assert "lqai_verify: OK: matter" in good.stdout
    assert "3 turns" in good.stdout
    assert tampered.returncode == 1
    assert "passages.jsonl: its SHA-256 differs from the manifest's" in tampered.stderr
    assert other.returncode == 1
    assert f"signed by the key {fingerprint()}, not by the expected {'0' * 64}" in other.stderr
    assert run(str(tmp_path / "missing.zip")).returncode == 2


def _member_client(chat: Chat, username: str) -> APIClient:
    member = factories.UserFactory.create(username=username)
    chat.project.members.add(member)  # type: ignore[union-attr]
    client = APIClient()
    client.force_authenticate(user=member)
    return client


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_each_user_prepares_one_export_at_a_time_and_the_server_a_bounded_number(
    committed_matter_chat: tuple[APIClient, Chat], settings: LazySettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export holds a thread, a connection and a snapshot for as long as it is prepared (seconds for a large
    matter): one user's repeated clicks, or many members at once, must not take every thread of the server."""
    settings.LQAI_MAX_CONCURRENT_EXPORTS = 2
    alice, chat = committed_matter_chat
    _turn(alice, chat)
    bob, carol = _member_client(chat, "bob"), _member_client(chat, "carol")
    url = f"/api/projects/{chat.project_id}/export/"
    # Each export, once it writes its first batch of turns, waits until the test lets it go on.
    started, release = threading.Semaphore(0), threading.Event()
    write_batch = export_module._export_batch

    def held_batch(*args: Any, **kwargs: Any) -> None:
        started.release()
        assert release.wait(timeout=30), "the test never let the export go on"
        write_batch(*args, **kwargs)

    monkeypatch.setattr(export_module, "_export_batch", held_batch)

    def download(client: APIClient) -> int:
        try:
            response = client.get(url)
            if response.status_code == 200:
                b"".join(response.streaming_content)  # type: ignore[attr-defined]
            return int(response.status_code)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        # Given alice's export and bob's being prepared (two threads, two connections: two server workers)
        alices = pool.submit(download, alice)
        assert started.acquire(timeout=20), "alice's export never started"
        bobs = pool.submit(download, bob)
        assert started.acquire(timeout=20), "bob's export never started"

        # When alice asks again, and carol asks while the server prepares as many exports as it may
        again = alice.get(url)
        busy = carol.get(url)

        # Then each is refused with 429, saying why and when to retry, and nothing waits
        release.set()
        assert (alices.result(timeout=30), bobs.result(timeout=30)) == (200, 200)
    assert again.status_code == 429
    assert again.json()["code"] == "export_in_progress"
    assert "already being prepared" in again.json()["detail"]
    assert busy.status_code == 429
    assert busy.json()["code"] == "exports_busy"
    assert int(again["Retry-After"]) > 0
    assert int(busy["Retry-After"]) > 0
    # and once they are done, the slots are free again: for alice, and for carol
    assert alice.get(url).status_code == 200
    assert carol.get(url).status_code == 200


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_an_export_that_fails_gives_its_slot_back(
    committed_matter_chat: tuple[APIClient, Chat], settings: LazySettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.LQAI_MAX_CONCURRENT_EXPORTS = 1
    client, chat = committed_matter_chat
    _turn(client, chat)
    client.raise_request_exception = False

    def failing_batch(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(export_module, "_export_batch", failing_batch)
    assert client.get(f"/api/projects/{chat.project_id}/export/").status_code == 500
    monkeypatch.undo()

    assert client.get(f"/api/projects/{chat.project_id}/export/").status_code == 200
    assert _member_client(chat, "bob").get(f"/api/projects/{chat.project_id}/export/").status_code == 200


# --- A chat outside any matter -----------------------------------------------------------------------------------


@pytest.fixture
def lone_chat(api_client: APIClient, user: Any, local_opinion: CaselawOpinion) -> Chat:
    """Alice's chat outside any matter (its turns chain on their own), with two turns: one answered by the
    default backend, one that quotes the Fisher opinion."""
    chat = factories.ChatFactory.create(project=None, owner=user, title="Research")
    _turn(api_client, chat)
    _, answer = start_turn(chat=chat, content=QUESTION, author=user)
    finalize_turn(
        message=answer,
        content="The court must be satisfied.",
        status=Message.Status.COMPLETE,
        claimed_citations=[
            ClaimedCitation("[t]he reviewing court must . . . be satisfied", opinion_id=local_opinion.pk)
        ],
    )
    return chat


@pytest.mark.django_db
def test_a_chat_outside_any_matter_is_exported_and_verifies(lone_chat: Chat, tmp_path: Path) -> None:
    out = StringIO()
    call_command("export_matter", "--chat", str(lone_chat.pk), "--out", str(tmp_path / "chat.zip"), stdout=out)

    result = verify_bundle(tmp_path / "chat.zip", public_key=fingerprint())
    assert result.problems == []
    assert (result.chat, result.matter, result.turns, result.seals, result.quotes) == (str(lone_chat.pk), "", 2, 2, 1)
    assert result.summary().startswith(f"chat {lone_chat.pk}: 2 turns")
    files = members(tmp_path / "chat.zip")
    manifest = json.loads(files["manifest.json"])
    assert manifest["matter"] is None
    assert manifest["chat"] == {"id": str(lone_chat.pk), "title": "Research"}
    assert manifest["chain"] == f"chat:{lone_chat.pk}"
    assert "Record of the chat “Research”" in files["report.html"].decode()
    assert "2 turns" in out.getvalue()


@pytest.mark.django_db
def test_export_matter_takes_a_matter_or_a_chat_outside_any_matter(
    lone_chat: Chat, matter_chat: Chat, tmp_path: Path
) -> None:
    out = str(tmp_path / "x.zip")
    with pytest.raises(CommandError, match=r"part of the matter .*: its turns are sealed in the matter's chain"):
        call_command("export_matter", "--chat", str(matter_chat.pk), "--out", out)
    with pytest.raises(CommandError, match="not both"):
        call_command("export_matter", str(matter_chat.project_id), "--chat", str(lone_chat.pk), "--out", out)
    with pytest.raises(CommandError, match="not both"):
        call_command("export_matter", "--out", out)
    with pytest.raises(CommandError, match="No chat"):
        call_command("export_matter", "--chat", "00000000-0000-0000-0000-000000000000", "--out", out)
    assert not (tmp_path / "x.zip").exists()


@pytest.mark.django_db
def test_the_owner_downloads_a_lone_chats_export_and_a_chat_of_a_matter_points_at_the_matter(
    lone_chat: Chat, matter_chat: Chat, api_client: APIClient, other_user: Any, tmp_path: Path
) -> None:
    response = api_client.get(f"/api/chats/{lone_chat.pk}/export/")
    outsider = APIClient()
    outsider.force_authenticate(user=other_user)

    assert response.status_code == 200
    assert f"lqai-chat-{lone_chat.pk}-" in response["Content-Disposition"]
    path = tmp_path / "api.zip"
    path.write_bytes(b"".join(response.streaming_content))  # type: ignore[attr-defined]
    assert verify_bundle(path, public_key=fingerprint()).problems == []
    assert outsider.get(f"/api/chats/{lone_chat.pk}/export/").status_code == 404
    of_a_matter = api_client.get(f"/api/chats/{matter_chat.pk}/export/")
    assert of_a_matter.status_code == 409
    assert of_a_matter.json()["code"] == "export_the_matter"
    assert of_a_matter.json()["project_id"] == str(matter_chat.project_id)
    assert f"/api/projects/{matter_chat.project_id}/export/" in of_a_matter.json()["detail"]


@pytest.mark.django_db
def test_a_manifest_that_names_another_subject_than_its_chain_fails(lone_chat: Chat, tmp_path: Path) -> None:
    call_command("export_matter", "--chat", str(lone_chat.pk), "--out", str(tmp_path / "chat.zip"), stdout=StringIO())
    files = members(tmp_path / "chat.zip")
    manifest = json.loads(files["manifest.json"])
    other = "11111111-1111-1111-1111-111111111111"

    def resigned(name: str, **changes: Any) -> list[str]:
        path = rewrite(
            tmp_path / name,
            {**files, "manifest.json": json.dumps({**manifest, **changes}).encode()},
            resign=Ed25519PrivateKey.generate(),
        )
        return verify_bundle(path).problems

    assert resigned("other.zip", chat={"id": other, "title": "Research"}) == [
        f"manifest.json: the chain chat:{lone_chat.pk} is not the chat's (chat:{other})"
    ]
    assert resigned("both.zip", matter={"id": other, "name": "M"}) == [
        "manifest.json: it must name either a matter or a chat (with a null matter)"
    ]
    assert resigned("neither.zip", chat=None) == [
        "manifest.json: it must name either a matter or a chat (with a null matter)"
    ]
    assert resigned("malformed.zip", chat={"title": "Research"}) == ["manifest.json.chat.id is missing"]


@pytest.mark.django_db
def test_a_lone_chats_later_export_extends_the_earlier_offline_and_in_place(
    lone_chat: Chat, api_client: APIClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def export_chat(name: str) -> Path:
        call_command("export_matter", "--chat", str(lone_chat.pk), "--out", str(tmp_path / name), stdout=StringIO())
        return tmp_path / name

    earlier = export_chat("march.zip")
    _turn(api_client, lone_chat)
    later = export_chat("june.zip")

    status, output = extends(later, earlier, capsys)
    in_place, checked = verify_ledger("--extends", str(earlier))

    assert status == 0, output
    assert "its seals #1 to #2 unchanged" in output
    assert in_place == 0, checked
    assert extends(earlier, later, capsys)[0] == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_an_export_slot_that_cannot_be_given_back_goes_with_its_connection(settings: LazySettings) -> None:
    """Session advisory locks outlive a rolled-back transaction: if the export failed inside the caller's
    transaction (ATOMIC_REQUESTS, say), the locks cannot be given back there, and a connection kept for the next
    request (CONN_MAX_AGE) would hold them for good. It is closed instead."""
    settings.LQAI_MAX_CONCURRENT_EXPORTS = 1
    with (
        pytest.raises(DatabaseError),
        transaction.atomic(),
        export_module.export_slot(user_id=7),
        connection.cursor() as cursor,
    ):
        cursor.execute("SELECT 1 / 0")  # the transaction fails: nothing more runs in it

    def take_the_slot() -> str:
        try:
            with export_module.export_slot(user_id=7):
                return "taken"
        except export_module.ExportBusy as busy:
            return busy.code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:  # another server worker, its own connection
        assert pool.submit(take_the_slot).result(timeout=30) == "taken"


# --- The report is the report of the data ------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_report_that_reads_otherwise_than_its_data_fails_even_when_signed(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """The page a court reads must say what the verified data says: a verdict turned from fail to pass in the
    report alone, by whoever holds the key or by a faulty renderer, fails the bundle."""
    chat, turns = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    page = files["report.html"]
    failing = '<p class="verdict-line verdict-fail"><span class="verdict">\u2717 Verdict: Fail</span>'.encode()
    assert failing in page

    passed = page.replace(
        failing, '<p class="verdict-line verdict-ok"><span class="verdict">\u2713 Verdict: Pass</span>'.encode(), 1
    )
    longer = page + b"<p>Every quote above verified.</p>\n"
    changed = verify_bundle(rewrite(tmp_path / "p.zip", {**files, "report.html": passed}, resign=keys.signing_key()))
    appended = verify_bundle(rewrite(tmp_path / "a.zip", {**files, "report.html": longer}, resign=keys.signing_key()))

    assert verify_bundle(tmp_path / "m.zip").problems == []
    failed_turn = next(
        line["turn"]["message"] for line in lines(files["turns.jsonl"]) if line["turn"]["verdict"] == "fail"
    )
    assert failed_turn in turns
    assert changed.problems == [
        f"report.html: turn {failed_turn} does not read as the data files say (the page was changed or made otherwise)"
    ]
    assert appended.problems == ["report.html: it goes on past the end of the report of the data files"]


@pytest.mark.django_db
def test_a_bundle_from_before_reports_were_rendered_from_the_data_verifies_with_its_report_unchecked(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    manifest = json.loads(files["manifest.json"])
    files["manifest.json"] = json.dumps({**manifest, "format": "lqai-export/1"}).encode()
    files["report.html"] = b"<p>A page rendered by a Django template.</p>"

    result = verify_bundle(rewrite(tmp_path / "old.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert result.problems == []
    assert any("report.html is not checked: an lqai-export/1 bundle's report" in w for w in result.warnings)
    # ... and so does one whose report was rendered by the report's earlier layout (/3)
    files["manifest.json"] = json.dumps({**manifest, "format": "lqai-export/3"}).encode()
    earlier = verify_bundle(
        rewrite(tmp_path / "earlier.zip", files, resign=keys.signing_key()), public_key=fingerprint()
    )
    assert earlier.problems == []
    assert any("report.html is not checked: an lqai-export/3 bundle's report" in w for w in earlier.warnings)
    # ... and one of /4, laid out before the report showed review decisions and certificates
    files["manifest.json"] = json.dumps({**manifest, "format": "lqai-export/4"}).encode()
    fourth = verify_bundle(rewrite(tmp_path / "fourth.zip", files, resign=keys.signing_key()), public_key=fingerprint())
    assert fourth.problems == []
    assert any("report.html is not checked: an lqai-export/4 bundle's report" in w for w in fourth.warnings)
    files["manifest.json"] = json.dumps({**manifest, "format": "lqai-export/6"}).encode()
    future = verify_bundle(rewrite(tmp_path / "new.zip", files, resign=keys.signing_key()))
    assert future.problems == [
        "manifest.json: format 'lqai-export/6', expected one of lqai-export/1, lqai-export/2, lqai-export/3, "
        "lqai-export/4, lqai-export/5"
    ]


@pytest.mark.django_db
def test_what_a_turn_line_says_of_its_seal_is_checked_against_its_seals(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    chat, turns = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    claimed = lines(files["turns.jsonl"])
    claimed[0]["sequence"] = 9
    files["turns.jsonl"] = jsonl(claimed)

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()))

    assert result.problems == [f"turns.jsonl line 1 (turn {turns[0]}): it says sealed #9, its seals say #1"]


@pytest.mark.django_db
def test_the_report_escapes_what_the_turn_recorded(matter_chat: Chat, user: Any, tmp_path: Path) -> None:
    """Questions, answers and titles are data from users and models: the page shows them, never runs them."""
    matter_chat.title = "<b>Admissions</b>"
    matter_chat.save()
    _, answer = start_turn(chat=matter_chat, content="Is <script>alert(1)</script> a question?", author=user)
    finalize_turn(
        message=answer,
        content='Line one.\n<img src=x onerror="alert(2)">',
        status=Message.Status.COMPLETE,
        claimed_citations=[],
    )
    path = export(matter_chat, tmp_path / "m.zip")

    page = members(path)["report.html"].decode()

    assert verify_bundle(path, public_key=fingerprint()).problems == []
    assert "<script>" not in page
    assert "<img" not in page
    assert "<b>Admissions" not in page
    assert "Is &lt;script&gt;alert(1)&lt;/script&gt; a question?" in page
    assert "Line one.\n&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in page
    assert "Chat “&lt;b&gt;Admissions&lt;/b&gt;” — turn of " in page
