"""The review pages (issue 52, item 4): a decision on a claim from its card, the certificate of verification of a
turn (issued from the turn, shown as a printable page), a matter's "needs review" queue, and the owner's setting
of a member's role and of the matter's certificate wording.

Each view looks its object up through the API's access rule (``chats.selectors.chats_visible_to``, through
``pages.selectors``: others get 404), parses a form and calls the service that owns the data
(``citations.reviews.record_decision``, ``citations.certificates.issue_certificate``,
``chats.matters.set_member_role``, ``chats.matters.set_certificate_wording``); a member who may not do it gets
403. Forms post with Django's CSRF token; a successful post redirects (POST-redirect-GET); a form with errors
is drawn again with them in words (400), and a refused certificate lists what is open (409).
"""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from chats.matters import NotAMemberRole, NotTheOwner, WordingInvalid, set_certificate_wording, set_member_role
from chats.models import Chat, Message
from chats.selectors import chats_visible_to
from citations.certificates import ClaimsOpen, issue_certificate
from citations.claims import claim_of
from citations.models import Certificate
from citations.review_queue import parse_after, review_queue
from citations.reviews import DecisionInvalid, NoSuchClaim, NotAReviewer, may_decide, record_decision
from pages import selectors
from pages.forms import CertificateWordingForm, DecisionForm, MemberRoleForm
from pages.workspace import _matter_or_404, _owner_only, _render_matter, _user


def _turn_or_404(request: HttpRequest, chat_id: UUID, message_id: UUID) -> Message:
    chat = selectors.visible_chat(request.user, chat_id)
    turn = (
        None
        if chat is None
        else Message.objects.select_related("chat__project")
        .filter(chat=chat, pk=message_id, role=Message.Role.ASSISTANT, finalized_at__isnull=False)
        .first()
    )
    if turn is None:
        raise Http404("No such turn visible to you.")
    return turn


def _deciders_only(request: HttpRequest, chat: Chat) -> None:
    if not may_decide(user=_user(request), chat=chat):
        raise PermissionDenied("Only the matter's owner and its reviewers decide on claims and issue certificates.")


def _card_url(turn: Message, claim_id: UUID) -> str:
    return f"{reverse('pages:chat', args=[turn.chat_id])}#claim-{claim_id}"


@require_POST
@login_required
def decide(request: HttpRequest, chat_id: UUID, message_id: UUID, claim_id: UUID) -> HttpResponse:
    """A decision on one claim, from its card; back to the card."""
    turn = _turn_or_404(request, chat_id, message_id)
    _deciders_only(request, turn.chat)
    claim = claim_of(turn, claim_id)
    if claim is None:
        raise Http404("No such claim of this turn.")
    form = DecisionForm(request.POST)
    if form.is_valid():
        try:
            record_decision(
                message=turn,
                claim_id=claim_id,
                decision=form.cleaned_data["decision"],
                by=_user(request),
                source=form.cleaned_data["source"],
                corrected_text=form.cleaned_data["corrected_text"],
                note=form.cleaned_data["note"],
            )
        except NotAReviewer as exc:
            raise PermissionDenied(str(exc)) from None
        except NoSuchClaim:
            raise Http404("No such claim of this turn.") from None
        except DecisionInvalid as exc:
            for name, error in exc.errors.items():
                form.add_error(name if name in form.fields else None, error)
        else:
            messages.success(
                request, f"Your decision on the claim is recorded and sealed: {form.cleaned_data['decision']}."
            )
            return redirect(_card_url(turn, claim_id))
    context = {"turn": turn, "claim": claim, "form": form, "back": _card_url(turn, claim_id)}
    return render(request, "pages/decision_refused.html", context, status=400)


@require_POST
@login_required
def certify(request: HttpRequest, chat_id: UUID, message_id: UUID) -> HttpResponse:
    """Issue the turn's certificate of verification; to its page, or a page listing what is open (409)."""
    turn = _turn_or_404(request, chat_id, message_id)
    _deciders_only(request, turn.chat)
    try:
        certificate = issue_certificate(message=turn, by=_user(request))
    except NotAReviewer as exc:
        raise PermissionDenied(str(exc)) from None
    except ClaimsOpen as refused:
        context = {"turn": turn, "open": refused.open, "chat_url": reverse("pages:chat", args=[turn.chat_id])}
        return render(request, "pages/certificate_refused.html", context, status=409)
    return redirect("pages:certificate", certificate_id=certificate.pk)


@require_GET
@login_required
def certificate_page(request: HttpRequest, certificate_id: UUID) -> HttpResponse:
    """A certificate as sealed, printable (the browser's Print makes the PDF)."""
    turns = Message.objects.filter(chat__in=chats_visible_to(request.user))
    certificate = (
        Certificate.objects.select_related("message__chat__project")
        .filter(message__in=turns, pk=certificate_id)
        .first()
    )
    if certificate is None:
        raise Http404("No such certificate visible to you.")
    later = Certificate.objects.filter(message_id=certificate.message_id, sequence__gt=certificate.sequence).exists()
    return render(request, "pages/certificate.html", {"certificate": certificate, "superseded": later})


@require_GET
@login_required
def queue_page(request: HttpRequest, project_id: UUID) -> HttpResponse:
    """The matter's "needs review" queue, a keyset page at a time (``?after=``)."""
    project = _matter_or_404(request, project_id)
    after = parse_after(request.GET.get("after"))
    page = review_queue(project_id=project.pk, after=after)
    return render(request, "pages/review_queue.html", {"project": project, "page": page, "first": after is None})


@require_POST
@login_required
def member_role(request: HttpRequest, project_id: UUID, username: str) -> HttpResponse:
    """The owner sets a member's role (member or reviewer)."""
    project = _matter_or_404(request, project_id)
    _owner_only(request, project)
    member = project.members.filter(username=username).first()
    if not isinstance(member, User):
        raise Http404("No such member of this matter.")
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"The role of {username} is member or reviewer.")
        return _render_matter(request, project, status=400)
    try:
        change = set_member_role(project=project, user=member, role=form.cleaned_data["role"], by=_user(request))
    except NotTheOwner as exc:
        raise PermissionDenied(str(exc)) from None
    except NotAMemberRole as exc:
        messages.error(request, str(exc))
        return _render_matter(request, project, status=400)
    messages.success(request, f"{username} is now a {change.role} of this matter.")
    return redirect(f"{reverse('pages:matter', kwargs={'project_id': project.pk})}#members")


@require_POST
@login_required
def certificate_wording(request: HttpRequest, project_id: UUID) -> HttpResponse:
    """The owner sets the court whose template words the matter's certificates, and the judge's own wording."""
    project = _matter_or_404(request, project_id)
    _owner_only(request, project)
    form = CertificateWordingForm(request.POST)
    if form.is_valid():
        try:
            set_certificate_wording(
                project=project,
                court=form.cleaned_data["court"],
                judge_wording=form.cleaned_data["judge_wording"],
                by=_user(request),
            )
        except NotTheOwner as exc:
            raise PermissionDenied(str(exc)) from None
        except WordingInvalid as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "The matter's certificates will use this wording from now on.")
            return redirect(f"{reverse('pages:matter', kwargs={'project_id': project.pk})}#certificate-wording")
    return _render_matter(request, project, status=400, wording_form=form)
