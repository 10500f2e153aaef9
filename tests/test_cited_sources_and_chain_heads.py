"""What the record shows of a cited source stays as its quotes were sealed, and a chain keeps its head.

From an outside review (review1) of the append-only record:

- A cited source's title and pages (a document's), case name, citation and pages (an opinion's) are what the
  trace, the signed export and its report show of a sealed quote: once cited they are fixed, below the
  application (``chats.0031``: plain SQL as the application's role, triggers on) and in the model layer
  (``CitedTextGuard.cited_fixed_fields``: ``save()``, ``QuerySet.update()``, the admin).
- A chain's head row (``seal_chain_heads``) is deleted only with its matter, in its purge (``citations.0018``,
  ``SealChainHead``): otherwise the chain's next seal would restart at #1, collide, and leave every later turn
  unsealed. A head deleted below the application anyway (triggers off) is reported by ``verify_ledger``,
  naming its chain.

``_plain`` is a plain SQL statement as the application's own role writes it, triggers enabled.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from chats.models import CaselawOpinion, Chat, Document
from chats.record import purging
from citations.integrity import verify_record
from citations.models import SealChainHead, TurnSeal
from citations.purge import purge_matter
from lqai_verify.bundle import verify_bundle
from tests import factories
from tests.test_export import export, exported_matter, fingerprint, lines, members  # noqa: F401 - fixture
from tests.test_seals import _turn, matter_turns  # noqa: F401 - fixture

REFUSED = "lqai_append_only"


def _plain(sql: str, params: list[Any]) -> int:
    """A statement as the application's role runs it (triggers on); returns the rows it touched."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _below(sql: str, params: list[Any]) -> None:
    """A statement made below the application: triggers off on PostgreSQL (SQLite has none), after the checks
    the test's seals deferred to commit (``citations.0020``), made while their chains were whole."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(sql, params)


def _pages(path: Path) -> dict[str, Any]:
    """Each exported passage's source title and pages, by quote row."""
    return {p["row"]: (p["source_title"], p["pages"]) for p in lines(members(path)["passages.jsonl"])}


# --- A cited source's title and pages ------------------------------------------------------------------------


OPINION_REWRITES = {
    "pages": ("UPDATE caselaw_opinions SET pages = %s::jsonb WHERE id = %s", '[[0, "999"]]'),
    "case_name": ("UPDATE caselaw_opinions SET case_name = %s WHERE id = %s", "Another v. Case"),
    "citation": ("UPDATE caselaw_opinions SET citation = %s WHERE id = %s", "1 U.S. 1"),
}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("column", sorted(OPINION_REWRITES))
def test_plain_sql_cannot_rewrite_what_the_export_shows_of_a_cited_opinion(
    exported_matter: tuple[Chat, list[str]],  # noqa: F811
    tmp_path: Path,
    column: str,
) -> None:
    chat, _ = exported_matter
    opinion = CaselawOpinion.objects.get(opinion_id="fisher-2013")
    before = _pages(export(chat, tmp_path / "before.zip"))
    sql, value = OPINION_REWRITES[column]

    with pytest.raises(IntegrityError, match=f"{REFUSED}: caselaw_opinions row .* is cited: its {column} cannot"):
        _plain(sql, [value, opinion.pk])

    after_path = export(chat, tmp_path / "after.zip")
    assert verify_record().intact
    assert verify_bundle(after_path, public_key=fingerprint()).ok
    assert _pages(after_path) == before


@pytest.mark.postgres
@pytest.mark.django_db
def test_plain_sql_cannot_rewrite_a_cited_documents_title_or_pages_but_may_refresh_the_rest(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    matter_chat: Chat,
    local_opinion: CaselawOpinion,
) -> None:
    document = Document.objects.get(project=matter_chat.project)
    factories.OpinionQuoteFactory.create(message__chat=matter_chat, opinion=local_opinion)
    uncited = factories.DocumentFactory.create(project=matter_chat.project, title="Draft")

    with pytest.raises(IntegrityError, match=f"{REFUSED}: documents row .* is cited: its title and pages cannot"):
        _plain("UPDATE documents SET title = 'Another memo', pages = '[[0, \"42\"]]' WHERE id = %s", [document.pk])
    # The same values are no change; an uncited document, and what the record does not show, may change.
    _plain("UPDATE documents SET title = title, pages = pages WHERE id = %s", [document.pk])
    _plain("UPDATE documents SET title = 'Final', pages = '[[0, \"1\"]]' WHERE id = %s", [uncited.pk])
    _plain(
        "UPDATE caselaw_opinions SET court = 'S. Ct.', date_filed = '2013-06-24', absolute_url = 'https://x.test/' "
        "WHERE id = %s",
        [local_opinion.pk],
    )

    assert Document.objects.get(pk=document.pk).title == "Strict scrutiny memo"
    assert Document.objects.get(pk=uncited.pk).title == "Final"
    assert CaselawOpinion.objects.get(pk=local_opinion.pk).court == "S. Ct."


@pytest.mark.django_db(transaction=True)
def test_the_orm_cannot_rewrite_a_cited_documents_title_or_pages(
    exported_matter: tuple[Chat, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    chat, _ = exported_matter
    document = Document.objects.get(project=chat.project)
    assert document.is_cited()
    before = _pages(export(chat, tmp_path / "before.zip"))

    with pytest.raises(IntegrityError, match=f"{REFUSED}|is cited: its title and pages cannot change"):
        Document.objects.filter(pk=document.pk).update(title="Another memo", pages=[[0, "42"]])
    document.title = "Another memo"
    with pytest.raises(IntegrityError, match="is cited: its title cannot change"):
        document.save()
    with pytest.raises(IntegrityError, match="is cited: its pages cannot change"):
        Document.objects.bulk_update([Document(pk=document.pk, pages=[[0, "42"]])], ["pages"])

    after_path = export(chat, tmp_path / "after.zip")
    assert verify_record().intact
    assert verify_bundle(after_path, public_key=fingerprint()).ok
    assert _pages(after_path) == before


@pytest.mark.django_db
def test_the_orm_keeps_a_cited_opinions_case_name_citation_and_pages_and_refreshes_the_rest(
    matter_chat: Chat, local_opinion: CaselawOpinion
) -> None:
    factories.OpinionQuoteFactory.create(message__chat=matter_chat, opinion=local_opinion)
    uncited = factories.CaselawOpinionFactory.create()
    opinions = CaselawOpinion.objects.filter(pk__in=[local_opinion.pk, uncited.pk])

    for column, value in (("case_name", "Another v. Case"), ("citation", "1 U.S. 1"), ("pages", [[0, "9"]])):
        with pytest.raises(IntegrityError, match=f"is cited: its {column} cannot change"), transaction.atomic():
            opinions.update(**{column: value})
    opinions.update(court="S. Ct.")  # not shown with its quotes: refreshed
    CaselawOpinion.objects.filter(pk=uncited.pk).update(case_name="Renamed v. Case")

    stored = CaselawOpinion.objects.get(pk=local_opinion.pk)
    assert (stored.case_name, stored.citation, stored.pages) == (
        local_opinion.case_name,
        local_opinion.citation,
        local_opinion.pages,
    )
    assert stored.court == "S. Ct."
    assert CaselawOpinion.objects.get(pk=uncited.pk).case_name == "Renamed v. Case"


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["document", "opinion"])
def test_the_admin_shows_what_the_record_shows_of_a_cited_source_read_only(
    admin_client: Client, kind: str, matter_chat: Chat, local_opinion: CaselawOpinion
) -> None:
    document = Document.objects.get(project=matter_chat.project)
    factories.DocumentQuoteFactory.create(message__chat=matter_chat, document=document)
    factories.OpinionQuoteFactory.create(message__chat=matter_chat, opinion=local_opinion)
    cited: Document | CaselawOpinion = document if kind == "document" else local_opinion

    page = admin_client.get(reverse(f"admin:chats_{cited._meta.model_name}_change", args=[cited.pk]))

    assert page.status_code == 200
    assert set(type(cited).cited_guarded_fields()) <= set(page.context["adminform"].readonly_fields)


# --- The chain's head -----------------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_plain_sql_cannot_delete_a_chain_head_and_the_matters_next_turn_is_sealed(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    api_client: APIClient,
    matter_chat: Chat,
) -> None:
    chain = f"matter:{matter_chat.project_id}"
    other = factories.ProjectFactory.create()

    with pytest.raises(IntegrityError, match=f"{REFUSED}: seal_chain_heads rows cannot be deleted.*{chain}"):
        _plain("DELETE FROM seal_chain_heads WHERE chain = %s", [chain])
    with (  # in another matter's purge
        pytest.raises(IntegrityError, match=REFUSED),
        transaction.atomic(),
        purging(other.pk),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM seal_chain_heads WHERE chain = %s", [chain])
    later = _turn(api_client, matter_chat)

    assert SealChainHead.objects.get(chain=chain).sequence == 4
    assert TurnSeal.objects.get(message_id=later["id"]).sequence == 4
    assert verify_record().intact


@pytest.mark.django_db
def test_the_orm_deletes_a_chain_head_only_in_its_matters_purge(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    matter_chat: Chat,
) -> None:
    chain = f"matter:{matter_chat.project_id}"
    other = factories.ProjectFactory.create()

    with pytest.raises(IntegrityError, match=f"{REFUSED}: seal_chain_heads rows cannot be deleted.*{chain}"):
        SealChainHead.objects.filter(chain=chain).delete()
    with pytest.raises(IntegrityError, match=REFUSED):
        SealChainHead.objects.get(chain=chain).delete()
    with pytest.raises(IntegrityError, match=REFUSED), transaction.atomic(), purging(other.pk):
        SealChainHead.objects.filter(chain=chain).delete()
    assert SealChainHead.objects.filter(chain=chain).exists()

    purge_matter(project_id=matter_chat.project_id, purged_by="operator")  # type: ignore[arg-type]

    assert not SealChainHead.objects.exists()
    assert verify_record().intact


@pytest.mark.django_db
def test_verify_ledger_reports_a_chain_whose_head_was_deleted_below_the_application(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    matter_chat: Chat,
) -> None:
    chain = f"matter:{matter_chat.project_id}"
    _below("DELETE FROM seal_chain_heads WHERE chain = %s", [chain])

    result = verify_record()
    out = StringIO()
    with pytest.raises(SystemExit):
        call_command("verify_ledger", stdout=out, stderr=out)

    assert not result.intact
    assert [(p.chain, p.sequence) for p in result.problems] == [(chain, 3)]
    assert f"the chain {chain} has seals up to #3 but no head" in out.getvalue()
