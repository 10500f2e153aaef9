"""The workspace pages: a lawyer opens a matter, starts its chats, uploads, reads and deletes its documents,
adds and removes its members and invites a colleague by a one-time link, without the admin or a shell.

Each view parses a form and calls the service that owns the data (``chats.matters``, ``chats.services``,
``chats.documents``, ``chats.invitations``); the rules are theirs and the API's. A matter is looked up through
:func:`pages.selectors.visible_matter` (anyone not its owner or a member gets 404); what only the owner may do
(members, invitations) is a 403 for a member. Every form posts with Django's CSRF token, and a successful post
redirects (POST-redirect-GET), saying what happened through the messages framework. A form with errors is
drawn again with them, in words, next to its fields (400; 413 for a document over a size limit).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chats import invitations
from chats.accounts import AccountExists
from chats.documents import DocumentKept, DocumentTooLarge, UnreadableDocument, delete_document, upload_document
from chats.matters import NoSuchMember, NotTheOwner, add_member, create_project, remove_member
from chats.models import Invitation, Project
from chats.services import create_chat
from pages import selectors
from pages.forms import ChatForm, DocumentUploadForm, MatterForm, MemberForm, SignUpForm

# The session key under which a new invitation's link waits for the owner's next view of the matter: the link
# is shown once, and only its digest is stored.
NEW_INVITATION_LINK = "lqai_new_invitation_link"
# The session key holding the invitation link the visitor opened, until she has joined.
OPENED_INVITATION = "lqai_invitation_token"
# The backend that logs in a colleague who just made her account (two are configured: django-axes' and Django's).
LOGIN_BACKEND = "django.contrib.auth.backends.ModelBackend"


def _user(request: HttpRequest) -> User:
    user: User = request.user  # type: ignore[assignment]  # login_required: never anonymous here
    return user


def _matter_or_404(request: HttpRequest, project_id: UUID) -> Project:
    project = selectors.visible_matter(request.user, project_id)
    if project is None:
        raise Http404("No such matter visible to you.")
    return project


def _owner_only(request: HttpRequest, project: Project) -> None:
    if project.owner_id != request.user.pk:
        raise PermissionDenied("Only the matter's owner can do this.")


def _render_matter(request: HttpRequest, project: Project, *, status: int = 200, **forms: Any) -> HttpResponse:
    is_owner = project.owner_id == request.user.pk
    context = {
        "page": selectors.matter_page(project, for_owner=is_owner),
        "is_owner": is_owner,
        "chat_form": forms.get("chat_form") or ChatForm(),
        "upload_form": forms.get("upload_form") or DocumentUploadForm(),
        "member_form": forms.get("member_form") or MemberForm(),
        "new_invitation_link": request.session.pop(NEW_INVITATION_LINK, None) if is_owner else None,
        "invitation_days": settings.LQAI_INVITATION_DAYS,
    }
    return render(request, "pages/matter.html", context, status=status)


@require_POST
@login_required
def matter_create(request: HttpRequest) -> HttpResponse:
    form = MatterForm(request.POST)
    if not form.is_valid() or not form.cleaned_data["name"].strip():
        if form.is_valid():
            form.add_error("name", "A matter needs a name.")
        context = {"matters": selectors.matters_of(request.user), "matter_form": form}
        return render(request, "pages/home.html", context, status=400)
    project = create_project(owner=_user(request), name=form.cleaned_data["name"].strip())
    messages.success(request, f"Matter {project.name!r} opened. You are its owner.")
    return redirect("pages:matter", project_id=project.pk)


@require_GET
@login_required
def matter_page(request: HttpRequest, project_id: UUID) -> HttpResponse:
    return _render_matter(request, _matter_or_404(request, project_id))


@require_POST
@login_required
def chat_create(request: HttpRequest, project_id: UUID) -> HttpResponse:
    project = _matter_or_404(request, project_id)
    form = ChatForm(request.POST)
    if not form.is_valid():
        return _render_matter(request, project, status=400, chat_form=form)
    chat = create_chat(owner=_user(request), project=project, title=form.cleaned_data["title"].strip())
    return redirect("pages:chat", chat_id=chat.pk)


@require_POST
@login_required
def document_upload(request: HttpRequest, project_id: UUID) -> HttpResponse:
    """Any member uploads a document, with the API's bounds and errors (:func:`chats.documents.upload_document`)."""
    project = _matter_or_404(request, project_id)
    form = DocumentUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _render_matter(request, project, status=400, upload_form=form)
    file = form.cleaned_data["file"]
    try:
        document = upload_document(
            project=project,
            title=form.cleaned_data["title"],
            file=file,
            size=file.size,
            content_type=file.content_type or "",
        )
    except (UnreadableDocument, DocumentTooLarge) as refused:
        form.add_error("file", str(refused))
        status = 413 if isinstance(refused, DocumentTooLarge) else 400
        return _render_matter(request, project, status=status, upload_form=form)
    messages.success(request, f"Document {document.title!r} added.")
    return redirect("pages:matter", project_id=project.pk)


@require_GET
@login_required
def document_page(request: HttpRequest, project_id: UUID, document_id: UUID) -> HttpResponse:
    project = _matter_or_404(request, project_id)
    document = selectors.matter_document(project, document_id)
    if document is None:
        raise Http404("No such document in this matter.")
    context = {"project": project, "document": document, "parts": selectors.document_pages(document)}
    return render(request, "pages/document.html", context)


@require_POST
@login_required
def document_delete(request: HttpRequest, project_id: UUID, document_id: UUID) -> HttpResponse:
    """Any member deletes a document no answer quotes; one that is quoted stays, and the page says why."""
    project = _matter_or_404(request, project_id)
    document = project.documents.defer("content").filter(pk=document_id).first()
    if document is None:
        raise Http404("No such document in this matter.")
    try:
        delete_document(document=document)
    except DocumentKept as refused:
        messages.error(request, f"Not deleted: {refused}")
    else:
        messages.success(request, f"Document {document.title!r} deleted.")
    return redirect("pages:matter", project_id=project.pk)


@require_POST
@login_required
def member_add(request: HttpRequest, project_id: UUID) -> HttpResponse:
    project = _matter_or_404(request, project_id)
    _owner_only(request, project)
    form = MemberForm(request.POST)
    colleague = None
    if form.is_valid():
        colleague = User.objects.filter(username=form.cleaned_data["username"], is_active=True).first()
        if colleague is None:
            form.add_error(
                "username", "No active user has this username. A colleague without an account: invite her by a link."
            )
    if colleague is None:
        return _render_matter(request, project, status=400, member_form=form)
    try:
        added = add_member(project=project, user=colleague, by=request.user)  # type: ignore[arg-type]
    except NotTheOwner as exc:
        raise PermissionDenied(str(exc)) from None
    if added:
        messages.success(request, f"{colleague.username} is now a member of this matter.")
    else:
        messages.info(request, f"{colleague.username} was in this matter already.")
    return redirect("pages:matter", project_id=project.pk)


@require_POST
@login_required
def member_remove(request: HttpRequest, project_id: UUID, username: str) -> HttpResponse:
    project = _matter_or_404(request, project_id)
    _owner_only(request, project)
    try:
        remove_member(project=project, username=username, by=request.user)  # type: ignore[arg-type]
    except NotTheOwner as exc:
        raise PermissionDenied(str(exc)) from None
    except NoSuchMember:
        raise Http404("No such member of this matter.") from None
    messages.success(request, f"{username} is no longer a member of this matter.")
    return redirect("pages:matter", project_id=project.pk)


@require_POST
@login_required
def invitation_create(request: HttpRequest, project_id: UUID) -> HttpResponse:
    """The owner makes a one-time link; it is shown once, on the matter's page she is sent back to."""
    project = _matter_or_404(request, project_id)
    _owner_only(request, project)
    try:
        made = invitations.create_invitation(project=project, by=request.user)  # type: ignore[arg-type]
    except NotTheOwner as exc:
        raise PermissionDenied(str(exc)) from None
    request.session[NEW_INVITATION_LINK] = request.build_absolute_uri(
        reverse("pages:invitation", kwargs={"token": made.token})
    )
    return redirect(f"{reverse('pages:matter', kwargs={'project_id': project.pk})}#invitations")


@require_POST
@login_required
def invitation_revoke(request: HttpRequest, project_id: UUID, invitation_id: UUID) -> HttpResponse:
    project = _matter_or_404(request, project_id)
    _owner_only(request, project)
    invitation = Invitation.objects.select_related("project").filter(pk=invitation_id, project=project).first()
    if invitation is None:
        raise Http404("No such invitation of this matter.")
    try:
        invitations.revoke_invitation(invitation=invitation, by=request.user)  # type: ignore[arg-type]
    except NotTheOwner as exc:
        raise PermissionDenied(str(exc)) from None
    messages.success(request, "The invitation link was withdrawn: it no longer works.")
    return redirect(f"{reverse('pages:matter', kwargs={'project_id': project.pk})}#invitations")


def _invitation_ended(request: HttpRequest, why: str) -> HttpResponse:
    return render(request, "pages/invitation_ended.html", {"why": why}, status=410)


@require_GET
def invitation_link(request: HttpRequest, token: str) -> HttpResponse:
    """An invitation link, opened: an unknown one is a 404, a used, expired or withdrawn one a 410 saying which;
    a live one is kept in the visitor's session and she is sent on to :func:`invitation_join`, so that the token
    appears in no later request's path (the log of a refused sign-up, a page's referrer), as Django's
    password-reset link does."""
    try:
        invitations.open_invitation(token=token)
    except invitations.NoSuchInvitation:
        raise Http404("No such invitation.") from None
    except invitations.InvitationEnded as ended:
        return _invitation_ended(request, str(ended))
    request.session[OPENED_INVITATION] = token
    return redirect("pages:invitation-join")


@require_http_methods(["GET", "POST"])
def invitation_join(request: HttpRequest) -> HttpResponse:
    """The invitation the visitor opened (:func:`invitation_link`). Someone signed in joins the matter with a
    button (a POST: a mail scanner or link preview opening the link uses nothing up); a visitor makes her account
    with the sign-up form (Django's password validators), joins, is signed in and sent to the matter. Without an
    opened invitation, a 404; once it ended, a 410 saying why."""
    token = request.session.get(OPENED_INVITATION)
    if not isinstance(token, str):
        raise Http404("Open the invitation link again.")
    try:
        invitation = invitations.open_invitation(token=token)
    except invitations.NoSuchInvitation:
        raise Http404("No such invitation.") from None
    except invitations.InvitationEnded as ended:
        return _invitation_ended(request, str(ended))
    form = SignUpForm(request.POST if request.method == "POST" and not request.user.is_authenticated else None)
    if request.method == "GET":
        return _render_invitation(request, invitation, form)
    try:
        if request.user.is_authenticated:
            project = invitations.accept_invitation(token=token, user=_user(request))
        elif form.is_valid():
            user, project = invitations.sign_up_with_invitation(
                token=token, username=form.cleaned_data["username"], password=form.cleaned_data["password"]
            )
            login(request, user, backend=LOGIN_BACKEND)
        else:
            return _render_invitation(request, invitation, form, status=400)
    except invitations.InvitationEnded as ended:
        return _invitation_ended(request, str(ended))
    except invitations.AlreadyInTheMatter as already:
        messages.info(request, str(already))
        return redirect("pages:matter", project_id=invitation.project_id)
    except AccountExists as exists:
        form.add_error("username", f"{exists} Choose another, or sign in with it (below) to join.")
        return _render_invitation(request, invitation, form, status=400)
    except ValidationError as invalid:
        for field, field_messages in invalid.message_dict.items():
            for message in field_messages:
                form.add_error(field, message)
        return _render_invitation(request, invitation, form, status=400)
    request.session.pop(OPENED_INVITATION, None)
    messages.success(request, f"You joined the matter {project.name!r}.")
    return redirect("pages:matter", project_id=project.pk)


def _render_invitation(
    request: HttpRequest, invitation: Invitation, form: SignUpForm, *, status: int = 200
) -> HttpResponse:
    context = {"invitation": invitation, "form": form, "login_url": f"{reverse('login')}?next={request.path}"}
    return render(request, "pages/invitation.html", context, status=status)
