"""The trace pages (server-rendered, behind Django's login): a member's matters, and a chat read claim by claim.

Every chat is looked up through the API's access rule (:func:`chats.selectors.chats_visible_to`): a chat
the user may not read is a 404, as in the API. Asking a question from a chat page goes through the API's
streamed turn (``POST /api/chats/{id}/messages/stream/``, session-authenticated with the CSRF token); when
the turn ends, the page fetches the turn's cards from :func:`turn_fragment`.
"""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from pages import selectors

# The query parameter of the "only what needs review" filter (a link: it works without JavaScript).
REVIEW_PARAMETER = "review"


def _review_only(request: HttpRequest) -> bool:
    return request.GET.get(REVIEW_PARAMETER) == "1"


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "pages/home.html", {"matters": selectors.matters_of(request.user)})


@require_GET
@login_required
def chat_page(request: HttpRequest, chat_id: UUID) -> HttpResponse:
    chat = selectors.visible_chat(request.user, chat_id)
    if chat is None:
        raise Http404("No such chat visible to you.")
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
    return render(request, "pages/_turn.html", {"chat": chat, "turn": turns[0], "review_only": _review_only(request)})
