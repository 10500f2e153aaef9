"""Loading a file from the admin (issue 50, item 1): a staff user holding ``authorities.load_authorities``
uploads a USLM title or case-law JSON and it is loaded by the command's service, idempotent, all or nothing,
bounded in size; a staff user without the permission is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from authorities.models import AuthorityFile, AuthorityRelease, StatuteSection
from chats.models import CaselawOpinion

ROOT = Path(__file__).resolve().parent.parent
USC09 = ROOT / "authorities" / "data" / "uslm" / "usc09.xml"
CLUSTER = ROOT / "tests" / "fixtures" / "caselaw" / "courtlistener_cluster_ventresca.json"
LOAD_URL = "admin:authorities_load_file"

pytestmark = pytest.mark.django_db


def _staff(username: str, *, may_load: bool) -> Client:
    user = User.objects.create_user(username=username, password="pw-admin-load", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_authorityrelease"))
    if may_load:
        user.user_permissions.add(Permission.objects.get(codename="load_authorities"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def operator() -> Client:
    return _staff("operator", may_load=True)


def _upload(client: Client, name: str, data: bytes) -> Any:
    return client.post(reverse(LOAD_URL), {"file": SimpleUploadedFile(name, data)})


def _library() -> tuple[int, int, int]:
    return AuthorityRelease.objects.count(), AuthorityFile.objects.count(), StatuteSection.objects.count()


def test_a_staff_user_without_the_permission_is_refused_and_not_offered_the_link(operator: Client) -> None:
    clerk = _staff("clerk", may_load=False)

    assert clerk.get(reverse(LOAD_URL)).status_code == 403
    assert _upload(clerk, "usc09.xml", USC09.read_bytes()).status_code == 403
    assert _library() == (0, 0, 0)
    changelist = reverse("admin:authorities_authorityrelease_changelist")
    assert "Load a file" not in clerk.get(changelist).content.decode()
    assert "Load a file" in operator.get(changelist).content.decode()


def test_a_title_uploaded_is_loaded_and_loading_it_again_adds_nothing(operator: Client) -> None:
    page = operator.get(reverse(LOAD_URL))
    assert page.status_code == 200
    assert 'name="csrfmiddlewaretoken"' in page.content.decode()

    first = _upload(operator, "usc09.xml", USC09.read_bytes())

    assert first.status_code == 302
    assert _library() == (1, 1, 6)
    assert AuthorityFile.objects.get().name == "usc09.xml"
    assert (
        "File usc09.xml: Online@117-80 - 6 sections read, 6 added" in operator.get(first["Location"]).content.decode()
    )
    sections = list(StatuteSection.objects.order_by("id").values())

    again = _upload(operator, "usc09.xml", USC09.read_bytes())

    assert again.status_code == 302
    assert "File usc09.xml: loaded before, skipped" in operator.get(again["Location"]).content.decode()
    assert list(StatuteSection.objects.order_by("id").values()) == sections


def test_case_law_uploaded_is_loaded_into_the_opinions_once(operator: Client) -> None:
    first = _upload(operator, "ventresca.json", CLUSTER.read_bytes())
    first_page = operator.get(first["Location"]).content.decode()
    again = _upload(operator, "ventresca.json", CLUSTER.read_bytes())
    again_page = operator.get(again["Location"]).content.decode()

    assert "File ventresca.json: case law - 1 opinions read, 1 added, 0 stored before" in first_page
    assert "File ventresca.json: case law - 1 opinions read, 0 added, 1 stored before" in again_page
    assert CaselawOpinion.objects.get().citation == "380 U.S. 102"


@pytest.mark.django_db(transaction=True)
def test_a_file_that_breaks_off_is_refused_saying_why_and_leaves_nothing_written(operator: Client) -> None:
    # Cut after the title's <meta>: the release and the file's row would be written before the XML breaks off
    data = USC09.read_bytes()
    broken = data[: data.index(b"</meta>") + 2000]

    response = _upload(operator, "usc09.xml", broken)

    assert response.status_code == 200
    assert "the file is not well-formed XML" in response.content.decode()
    assert _library() == (0, 0, 0)


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("brief.pdf", b"%PDF-1.4", "not a USLM XML or case-law JSON file"),
        ("page.xml", b"<html><body/></html>", "not a USLM title"),
        ("cases.json", b'[{"id": 1}]', "item 1"),
    ],
)
def test_a_file_that_is_not_an_authority_is_refused_saying_why(
    operator: Client, name: str, data: bytes, reason: str
) -> None:
    response = _upload(operator, name, data)

    assert response.status_code == 200
    assert reason in response.content.decode()
    assert _library() == (0, 0, 0)
    assert not CaselawOpinion.objects.exists()


def test_a_file_over_the_bound_is_refused_naming_the_setting(operator: Client, settings: LazySettings) -> None:
    settings.LQAI_MAX_AUTHORITY_UPLOAD_BYTES = 1000

    response = _upload(operator, "usc09.xml", USC09.read_bytes())

    assert response.status_code == 200
    assert "LQAI_MAX_AUTHORITY_UPLOAD_BYTES" in response.content.decode()
    assert _library() == (0, 0, 0)


def test_a_request_declaring_more_than_the_bound_is_refused_before_its_file_is_read(
    operator: Client, settings: LazySettings
) -> None:
    settings.LQAI_MAX_AUTHORITY_UPLOAD_BYTES = 1000
    cfr = (
        ROOT / "authorities" / "data" / "uslm" / "CFR-2018-title27-vol3-uslm.xml"
    )  # 153 KB: over 1000 + the form's room

    response = _upload(operator, cfr.name, cfr.read_bytes())

    assert response.status_code == 200
    assert "The file is over LQAI_MAX_AUTHORITY_UPLOAD_BYTES (1,000 bytes)" in response.content.decode()
    assert _library() == (0, 0, 0)
