"""The page of a checked draft, for lawyers: its verdict, what changed since the previous check, every finding and
the table of authorities, read from the record (:func:`drafts.recording.draft_record`, no re-check). Access is the
matter's, as on the trace pages: anyone else gets 404."""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from drafts.recording import draft_record
from drafts.selectors import draft_checks_visible_to
from lqai_verify.statuses import verdict_in_words


@require_GET
@login_required
def draft_page(request: HttpRequest, draft_id: UUID) -> HttpResponse:
    check = get_object_or_404(draft_checks_visible_to(request.user), pk=draft_id)
    record = draft_record(check)
    findings = record["findings"]
    context = {
        "check": check,
        "record": record,
        "verdict": verdict_in_words(record["verdict"]),
        "findings": findings,
        "to_review": sum(bool(f["needs_review"]) for f in findings),
        "changes": record["changes"],
        "trace_url": reverse("pages:chat", args=[check.chat_id]),
    }
    return render(request, "drafts/check.html", context)
