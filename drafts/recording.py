"""A checked draft recorded as a turn of its own kind, and what changed since the previous check.

:func:`record_draft` reads and checks a draft (:mod:`drafts.reading`, :mod:`drafts.finding`,
:mod:`drafts.checking`), then records it through the chat domain's services like any turn:
``chats.services.start_turn`` (kind ``draft``: the question names the file, its format and its SHA-256, and the
author is the user) and ``chats.services.finalize_turn`` with the draft's text as the answer and each quotation
checked against an opinion or a matter's document as a claimed quote of that source. The finalize writes the quote
rows (placed in the draft's text), checks the draft's case citations into the turn's case-citation rows, gives the
turn its verdict by the one rule, and its ``post_finalize`` receivers write the ledger entries and the seal. A
:class:`~drafts.models.DraftCheck` beside the turn keeps the file's name, format, digest and page map and every
finding as checked. All of it in one transaction: a draft that cannot be read writes nothing.

:func:`draft_changes` compares a check with the previous check of the same draft (its chat): the findings that
needed review and no longer do (fixed), those that newly do (new), and those that still do (open), matched by
kind, words and authority, never by offsets (a revision moves everything).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.urls import reverse

from chats.models import Chat, Message, Project, fit
from chats.services import ClaimedCitation, FinalizedTurn, create_chat, finalize_turn, start_turn
from drafts.checking import CheckedDraft, check_draft, quoted_words
from drafts.finding import find_in_draft
from drafts.models import DraftCheck
from drafts.reading import read_draft
from drafts.text import DraftText

if TYPE_CHECKING:
    from courtlistener import CourtListener

CHAT_TITLE = "Draft: {name}"


class NotInMatter(ValueError):
    """The chat named for a draft is not a chat of the draft's matter."""


@dataclass(frozen=True, slots=True)
class RecordedDraft:
    """A draft checked and recorded: its check's record, the turn (``finalized.message``) and the checked draft."""

    check: DraftCheck
    finalized: FinalizedTurn
    checked: CheckedDraft

    @property
    def message(self) -> Message:
        return self.finalized.message


def record_draft(
    *,
    matter: Project,
    author: AbstractBaseUser,
    data: bytes,
    name: str,
    chat: Chat | None = None,
    courtlistener_client: CourtListener | None = None,
    on_checked: Callable[[int], object] | None = None,
) -> RecordedDraft:
    """Read, check and record the draft ``data`` (file name ``name``) of ``matter`` as a ``draft`` turn by
    ``author`` (the caller has checked that she may use the matter): :func:`record_checked_draft` after the draft
    is read (:class:`drafts.errors.UnreadableDraft` for a file that cannot be read, and nothing written) and checked
    (before any transaction: the check may ask CourtListener)."""
    _check_chat(matter=matter, chat=chat)
    draft = read_draft(data=data, name=name)
    checked = check_draft(
        found=find_in_draft(draft), matter=matter, courtlistener_client=courtlistener_client, on_checked=on_checked
    )
    return record_checked_draft(
        matter=matter, author=author, data=data, name=name, draft=draft, checked=checked, chat=chat
    )


def record_checked_draft(
    *,
    matter: Project,
    author: AbstractBaseUser,
    data: bytes,
    name: str,
    draft: DraftText,
    checked: CheckedDraft,
    chat: Chat | None = None,
) -> RecordedDraft:
    """Record ``draft`` (read from ``data``, file name ``name``), as ``checked`` for ``matter``, as a ``draft``
    turn by ``author``: in ``chat`` if given (a chat of ``matter``, else :class:`NotInMatter`), else in the chat of
    the last check of a draft of the same name in the matter, else in a new chat. The turn (through
    ``start_turn`` and ``finalize_turn``), its rows, ledger entries and seal, and the :class:`DraftCheck` are
    written in one transaction."""
    _check_chat(matter=matter, chat=chat)
    name = fit(DraftCheck, "file_name", name)  # as stored, and as the draft's chat is found by
    digest = hashlib.sha256(data).hexdigest()
    record = checked.record(matter=str(matter.pk))
    with transaction.atomic():
        # One check of the matter's drafts at a time finds or opens a draft's chat: two first checks of one file at
        # once would open two chats. The matter's row is taken first, as a matter's purge takes it (one lock order).
        Project.objects.select_for_update(no_key=True).filter(pk=matter.pk).exists()
        chat = chat or _chat_of(matter=matter, author=author, name=name)
        question = _question_of(name=name, draft=draft, digest=digest)
        _question, answer = start_turn(chat=chat, content=question, author=author, kind=Message.Kind.DRAFT)
        # The finalize checks the draft's case citations again, inside this transaction (so that a failure leaves
        # nothing): the draft's check before it stored what CourtListener returned, so this reads the local store,
        # and asks CourtListener only about what it could not answer then.
        finalized = finalize_turn(
            message=answer, content=draft.text, status=Message.Status.COMPLETE, claimed_citations=_claims(checked)
        )
        check = DraftCheck.objects.create(
            message=answer,
            chat=chat,
            project=matter,
            file_name=name,
            format=draft.kind,
            file_sha256=digest,
            pages=[list(page) for page in draft.pages],
            findings=record["findings"],
            authorities=record["authorities"],
        )
    return RecordedDraft(check=check, finalized=finalized, checked=checked)


def _check_chat(*, matter: Project, chat: Chat | None) -> None:
    if chat is not None and chat.project_id != matter.pk:
        raise NotInMatter(f"chat {chat.pk} is not a chat of matter {matter.pk}")


def _chat_of(*, matter: Project, author: AbstractBaseUser, name: str) -> Chat:
    """The chat of the draft named ``name`` in ``matter`` (its last check's), or a new one."""
    last = DraftCheck.objects.filter(project=matter, file_name=name).order_by("-created_at", "-id").first()
    if last is not None:
        return last.chat
    return create_chat(owner=author, project=matter, title=fit(Chat, "title", CHAT_TITLE.format(name=name)))


def _question_of(*, name: str, draft: DraftText, digest: str) -> str:
    """The turn's question, sealed with it: the file checked, its format, its pages and its SHA-256."""
    pages = f"{len(draft.pages)} pages" if draft.pages else "no page numbers"
    return f"Check the draft {name} ({draft.kind}, {pages}, SHA-256 {digest})."


def _claims(checked: CheckedDraft) -> list[ClaimedCitation]:
    """Each quotation checked against an opinion or a matter's document, as a claimed quote of that source, and
    each quotation nothing could check (no citation, a citation nothing resolved) as a claim with its
    ``unchecked_reason`` (the finalize records it as an ``unchecked`` row, so the turn reads ``review``), in the
    draft's order (the finalize places each in the draft's text in that order). A quotation of a statute is
    neither: the finalize's statute check records it."""
    claims = []
    for finding, check in zip(checked.found.findings, checked.checks, strict=True):
        if finding.kind != "quote":
            continue
        quote = quoted_words(finding.text)
        if check.opinion_id is not None or check.document_id is not None:
            claims.append(ClaimedCitation(quote=quote, opinion_id=check.opinion_id, document_id=check.document_id))
        elif check.unchecked_reason:
            claims.append(ClaimedCitation(quote=quote, unchecked_reason=check.unchecked_reason))
    return claims


def draft_record(check: DraftCheck) -> dict[str, Any]:
    """The JSON of docs/drafts.md read back from the record (no re-check): the check's id, matter, verdict (its
    turn's: every quotation is a row of the turn, those nothing could check ``unchecked``), findings and table of
    authorities, its turn, chat, page, file and what changed since the previous check of the draft
    (:func:`draft_changes`, null for the first)."""
    changes = draft_changes(check)
    return {
        "id": str(check.pk),
        "matter": str(check.project_id),
        "verdict": check.message.verdict,
        "turn_verdict": check.message.verdict,
        "findings": check.findings,
        "authorities": check.authorities,
        "turn": str(check.message_id),
        "chat": str(check.chat_id),
        "page": reverse("draft_pages:draft", args=[check.pk]),
        "file_name": check.file_name,
        "format": check.format,
        "file_sha256": check.file_sha256,
        "pages": check.pages,
        "created_at": check.created_at.isoformat(),
        "changes": None if changes is None else changes.as_json(),
    }


@dataclass(frozen=True, slots=True)
class DraftChanges:
    """What changed between ``previous`` and a check: findings that needed review before and no longer do or are
    gone (``fixed``), that need review now and did not (``new``), that need review in both (``still_open``). Each
    finding as the check that holds it has it (``fixed``: the previous check's)."""

    previous: DraftCheck
    fixed: list[dict[str, Any]] = field(default_factory=list)
    new: list[dict[str, Any]] = field(default_factory=list)
    still_open: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "previous": str(self.previous.pk),
            "previous_turn": str(self.previous.message_id),
            "fixed": [_brief_finding(f) for f in self.fixed],
            "new": [_brief_finding(f) for f in self.new],
            "still_open": [_brief_finding(f) for f in self.still_open],
        }


def draft_changes(check: DraftCheck) -> DraftChanges | None:
    """What changed since the check before ``check`` in its chat (see :class:`DraftChanges`), or None for a
    draft's first check. Findings are matched by :func:`finding_key` (a finding the draft has several times
    counts as often)."""
    earlier = Q(created_at__lt=check.created_at) | Q(created_at=check.created_at, id__lt=check.pk)
    previous = DraftCheck.objects.filter(earlier, chat_id=check.chat_id).order_by("-created_at", "-id").first()
    if previous is None:
        return None
    before = _open(previous.findings, previous.authorities)
    now = _open(check.findings, check.authorities)
    counted_before = Counter({key: len(found) for key, found in before.items()})
    counted_now = Counter({key: len(found) for key, found in now.items()})
    fixed = _take(before, counted_before - counted_now)
    new = _take(now, counted_now - counted_before)
    still_open = _take(now, counted_now & counted_before)
    return DraftChanges(previous=previous, fixed=fixed, new=new, still_open=still_open)


def finding_key(finding: dict[str, Any], authorities: Sequence[dict[str, Any]]) -> tuple[str, str, str]:
    """A finding's identity across revisions: its kind, its words (spacing and case aside) and its authority's
    cite (a quotation with no citation has none)."""
    index = finding.get("authority")
    cite = str(authorities[index]["cite"]) if isinstance(index, int) and 0 <= index < len(authorities) else ""
    return (str(finding["kind"]), " ".join(str(finding["text"]).split()).casefold(), cite)


_Key = tuple[str, str, str]


def _open(
    findings: Sequence[dict[str, Any]], authorities: Sequence[dict[str, Any]]
) -> dict[_Key, list[dict[str, Any]]]:
    """The findings that need review, by key (in draft order)."""
    out: dict[_Key, list[dict[str, Any]]] = {}
    for finding in findings:
        if finding.get("needs_review"):
            key = finding_key(finding, authorities)
            out.setdefault(key, []).append(finding | {"authority_cite": key[2]})
    return out


def _take(findings: dict[_Key, list[dict[str, Any]]], counts: Counter[_Key]) -> list[dict[str, Any]]:
    """As many findings of each key as ``counts`` says, in draft order."""
    taken = [finding for key, count in counts.items() for finding in findings[key][:count]]
    return sorted(taken, key=lambda finding: int(finding["start"]))


def _brief_finding(finding: dict[str, Any]) -> dict[str, Any]:
    return {
        key: finding.get(key)
        for key in ("kind", "text", "start", "end", "page", "status", "needs_review", "detail", "authority_cite")
    }
