"""The trace pages (server-rendered, behind Django's login): a member's matters, and a chat read claim by claim;
and the download of a matter's signed record (or a matter-less chat's), the API's export.

Every chat is looked up through the API's access rule (:func:`chats.selectors.chats_visible_to`): a chat
the user may not read is a 404, as in the API. Asking a question from a chat page goes through the API's
streamed turn (``POST /api/chats/{id}/messages/stream/``, session-authenticated with the CSRF token); when
the turn ends, the page fetches the turn's cards from :func:`turn_fragment`.
"""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from chats.models import Chat, Project
from citations import export
from citations.reviews import may_decide
from pages import selectors
from pages.forms import MatterForm

# The query parameter of the "only what needs review" filter (a link: it works without JavaScript).
REVIEW_PARAMETER = "review"


def _review_only(request: HttpRequest) -> bool:
    return request.GET.get(REVIEW_PARAMETER) == "1"


def _visible_chat_or_404(request: HttpRequest, chat_id: UUID) -> Chat:
    """The chat, if the user may read it (:func:`pages.selectors.visible_chat`); else 404, as the API answers."""
    chat = selectors.visible_chat(request.user, chat_id)
    if chat is None:
        raise Http404("No such chat visible to you.")
    return chat


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    context = {"matters": selectors.matters_of(request.user), "matter_form": MatterForm()}
    return render(request, "pages/home.html", context)


@require_GET
@login_required
def chat_page(request: HttpRequest, chat_id: UUID) -> HttpResponse:
    chat = _visible_chat_or_404(request, chat_id)
    turns = selectors.chat_turns(chat)
    review_only = _review_only(request)
    page = reverse("pages:chat", args=[chat.pk])
    context = {
        "chat": chat,
        "turns": turns,
        "review_only": review_only,
        "review_count": selectors.review_count(turns),
        "all_url": page,
        "review_url": f"{page}?{REVIEW_PARAMETER}=1",
        "stream_url": reverse("chats:message-stream", args=[chat.pk]),
        "turn_url": reverse("pages:turn", args=[chat.pk, UUID(int=0)]),
        "printed_at": timezone.now(),
        "can_decide": may_decide(user=request.user, chat=chat),  # type: ignore[arg-type]  # login_required
    }
    return render(request, "pages/chat.html", context)


@require_GET
@login_required
def turn_fragment(request: HttpRequest, chat_id: UUID, message_id: UUID) -> HttpResponse:
    """One turn of a chat, as the chat page draws it (the page's script swaps it in when a turn ends)."""
    chat = selectors.visible_chat(request.user, chat_id)
    turns = [] if chat is None else selectors.chat_turns(chat, answer_id=message_id)
    if chat is None or not turns:
        raise Http404("No such turn visible to you.")
    context = {
        "chat": chat,
        "turn": turns[0],
        "review_only": _review_only(request),
        "can_decide": may_decide(user=request.user, chat=chat),  # type: ignore[arg-type]  # login_required
    }
    return render(request, "pages/_turn.html", context)


@require_GET
@login_required
def matter_record(request: HttpRequest, project_id: UUID) -> HttpResponseBase:
    """The matter's signed record, downloaded (the API's export, :func:`citations.export.export_file`, with the
    same membership rule); a page saying why, with 429, when an export of the user's or the server's
    ``LQAI_MAX_CONCURRENT_EXPORTS`` are already being prepared."""
    project = selectors.visible_matter(request.user, project_id)
    if project is None:
        raise Http404("No such matter visible to you.")
    return _record(request, project)


@require_GET
@login_required
def chat_record(request: HttpRequest, chat_id: UUID) -> HttpResponseBase:
    """:func:`matter_record` of a chat outside any matter; a chat of a matter goes to its matter's record."""
    chat = _visible_chat_or_404(request, chat_id)
    if chat.project_id is not None:
        return redirect("pages:matter-record", project_id=chat.project_id)
    return _record(request, chat)


def _record(request: HttpRequest, of: Project | Chat) -> HttpResponseBase:
    try:
        bundle = export.export_file(of=of, user_id=request.user.pk)  # type: ignore[arg-type]  # login_required
    except export.ExportBusy as busy:
        response = render(request, "pages/record_busy.html", {"detail": str(busy)}, status=429)
        response["Retry-After"] = str(export.RETRY_AFTER_SECONDS)
        return response
    return FileResponse(
        bundle, as_attachment=True, filename=export.default_filename(of), content_type="application/zip"
    )
