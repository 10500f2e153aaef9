"""The pages of drafts, for lawyers: a draft uploaded into a matter (checked in the request, its progress streamed
to the page), and a checked draft's page read from the record (:func:`drafts.recording.draft_record`, no re-check):
its text with a numbered marker at each finding and its card beside it, the draft's own page numbers, "only what
needs review", what changed since the previous check, the table of authorities (to copy into the brief) and the
printable report. Access is the matter's, as on the trace pages: anyone else gets 404. A quotation's card draws its
passage with the one drawing of :mod:`lqai_verify.passage_html`, as the trace pages and the export do.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django import forms
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_POST

from chats.models import CaselawOpinion, Document, DocumentQuote, OpinionQuote, Project
from chats.pages import span_pin_cite
from chats.selectors import projects_visible_to
from chats.throttles import TurnRateThrottle
from drafts import selectors
from drafts.checking import Check, CheckedDraft, check_draft, check_draft_in_steps, status_words
from drafts.errors import UnreadableDraft
from drafts.finding import find_in_draft
from drafts.reading import KINDS, read_draft
from drafts.recording import draft_record, record_checked_draft
from lqai_verify import passage_html
from lqai_verify.statuses import StatusInWords, status_in_words, verdict_in_words
from lqai_verify.verification.page_cites import pin_in_source

logger = logging.getLogger(__name__)

# The query parameter of the "only what needs review" filter (a link: it works without JavaScript).
REVIEW_PARAMETER = "review"
# Characters of the source shown on each side of a quoted passage on a card (as on the trace pages).
CARD_CONTEXT_CHARS = 120
# The table of authorities' parts, in the order a brief has them.
TOA_PARTS = (("Cases", ("case",)), ("Statutes and regulations", ("statute", "regulation")), ("Other authorities", ()))
KIND_WORDS = {"case_citation": "Case citation", "statute_citation": "Statute citation", "quote": "Quotation"}
FORMAT_WORDS = {"docx": "Word (DOCX)", "pdf": "PDF", "text": "plain text", "markdown": "Markdown"}
FORM_WORDS = {"short": "short form", "id": "id.", "supra": "supra", "block": "block quote"}


class DraftUploadForm(forms.Form):
    file = forms.FileField(
        label="Draft (DOCX, PDF with a text layer, text or Markdown)",
        allow_empty_file=False,
        widget=forms.ClearableFileInput(attrs={"accept": ",".join(sorted(KINDS))}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "draft_%s")
        super().__init__(*args, **kwargs)


@dataclass
class Card:
    """One finding of the draft: its marker in the text and its card."""

    number: int
    finding: dict[str, Any]
    status: StatusInWords
    words: str
    authority: dict[str, Any] | None
    marker_offset: int
    passage_html: SafeString | None = None
    source: str = ""
    pin: str = ""
    source_after: str = ""  # what follows the pin cite: the case's parenthetical (``pin_in_source``)

    @property
    def anchor(self) -> str:
        return f"finding-{self.number}"

    @property
    def marker_anchor(self) -> str:
        return f"marker-{self.number}"

    @property
    def kind_words(self) -> str:
        kind = KIND_WORDS.get(str(self.finding["kind"]), str(self.finding["kind"]))
        form = FORM_WORDS.get(str(self.finding.get("form", "")))
        return f"{kind}, {form}" if form else kind

    @property
    def needs_review(self) -> bool:
        return bool(self.finding["needs_review"])


@dataclass(frozen=True)
class Part:
    """A piece of the draft's text: its text, the start of one of its pages (``page``) or of a footnote
    (``footnote``), or a finding's marker."""

    text: str = ""
    page: str = ""
    footnote: str = ""
    card: Card | None = None


@dataclass
class ToaEntry:
    entry: dict[str, Any]
    words: str
    status: StatusInWords
    cards: list[Card] = field(default_factory=list)  # the findings citing it, to open their cards

    @property
    def title(self) -> str:
        name, cite = str(self.entry.get("name") or ""), str(self.entry["cite"])
        return f"{name}, {cite}" if name and name not in cite else cite

    @property
    def pages(self) -> str:
        pages = [str(p) for p in self.entry.get("pages") or []]
        return ", ".join(pages)


@dataclass
class ToaPart:
    title: str
    entries: list[ToaEntry] = field(default_factory=list)


def _visible_check_or_404(request: HttpRequest, draft_id: UUID) -> Any:
    return get_object_or_404(selectors.draft_checks_visible_to(request.user).select_related("project"), pk=draft_id)


@require_GET
@login_required
def draft_page(request: HttpRequest, draft_id: UUID) -> HttpResponse:
    check = _visible_check_or_404(request, draft_id)
    record = draft_record(check)
    review_only = request.GET.get(REVIEW_PARAMETER) == "1"
    text = check.message.content
    cards = _cards(check, record, text)
    page_url = reverse("draft_pages:draft", args=[check.pk])
    context = {
        "check": check,
        "record": record,
        "project": check.project,
        "format_words": FORMAT_WORDS.get(check.format, check.format),
        "verdict": verdict_in_words(record["verdict"]),
        "cards": cards,
        "parts": _parts(text, check.pages, cards),
        "to_review": sum(card.needs_review for card in cards),
        "review_only": review_only,
        "all_url": page_url,
        "review_url": f"{page_url}?{REVIEW_PARAMETER}=1",
        "changes": _changes_in_words(record["changes"]),
        "toa": _table_of_authorities(record["authorities"], cards),
        "trace_url": reverse("pages:chat", args=[check.chat_id]),
        "json_url": reverse("drafts:draft", args=[check.pk]),
        "printed_at": timezone.now(),
    }
    return render(request, "drafts/check.html", context)


def _cards(check: Any, record: dict[str, Any], text: str) -> list[Card]:
    """Each finding's card, numbered in the order of its marker in the draft, its marker after it (after a closing
    quotation mark); a quotation recorded as a quote row gets its passage drawn in its source."""
    authorities = record["authorities"]
    passages = _quote_passages(check, record["findings"])
    cards = []
    # Numbered in the order of their markers (a quotation in a citation's parenthetical ends before its citation).
    in_order = sorted(record["findings"], key=lambda f: (_marker_offset(text, int(f["end"])), int(f["start"])))
    for number, finding in enumerate(in_order, start=1):
        index = finding.get("authority")
        authority = authorities[index] if isinstance(index, int) and 0 <= index < len(authorities) else None
        of_a_statute = finding["kind"] == "statute_citation" or (
            authority is not None and finding["kind"] != "quote" and authority["kind"] in ("statute", "regulation")
        )
        card = Card(
            number=number,
            finding=finding,
            status=status_in_words(str(finding["status"]), alterations=finding.get("alterations") or ()),
            # In words as the page says them now (the record's own words are those of the day it was checked).
            words=status_words(
                str(finding["status"]), of_a_statute=of_a_statute, alterations=finding.get("alterations") or ()
            ),
            authority=authority,
            marker_offset=_marker_offset(text, int(finding["end"])),
        )
        drawn = passages.get(int(finding["start"]))
        if drawn is not None:
            card.passage_html, card.source, card.pin, card.source_after = drawn
        cards.append(card)
    return cards


_CLOSING = "\"'\u201d\u2019"


def _marker_offset(text: str, end: int) -> int:
    end = min(max(end, 0), len(text))
    while end < len(text) and text[end] in _CLOSING:
        end += 1
    return end


def _quote_passages(check: Any, findings: list[dict[str, Any]]) -> dict[int, tuple[SafeString, str, str, str]]:
    """The passage of each quotation the turn recorded as a quote row (its place in the draft the row's), by the
    start of its finding: drawn in its source with its alterations, and the source's name, page cite and what
    follows it as ``pin_in_source`` writes them together. Four queries, whatever the number of quotations: the
    rows of each kind, then each source's text once."""
    rows: list[DocumentQuote | OpinionQuote] = [
        *DocumentQuote.objects.filter(message=check.message).select_related("document").defer("document__content"),
        *OpinionQuote.objects.filter(message=check.message).select_related("opinion").defer("opinion__text"),
    ]
    # Each source's text read once, however many quotations of it the draft has.
    texts: dict[tuple[str, Any], str] = {
        ("document", pk): text
        for pk, text in Document.objects.filter(
            pk__in={r.document_id for r in rows if isinstance(r, DocumentQuote)}
        ).values_list("pk", "content")
    } | {
        ("opinion", pk): text
        for pk, text in CaselawOpinion.objects.filter(
            pk__in={r.opinion_id for r in rows if isinstance(r, OpinionQuote)}
        ).values_list("pk", "text")
    }
    starts = sorted(int(f["start"]) for f in findings if f["kind"] == "quote")
    out: dict[int, tuple[SafeString, str, str, str]] = {}
    for row in rows:
        source: Document | CaselawOpinion | None = row.document if isinstance(row, DocumentQuote) else row.opinion
        at, start, end = row.answer_offset_start, row.source_offset_start, row.source_offset_end
        if source is None or at is None or start is None or end is None:
            continue
        finding_start = next((s for s in starts if abs(s - at) <= 1), None)
        if finding_start is None:
            continue
        text = texts[("document" if isinstance(source, Document) else "opinion", source.pk)]
        intact = (
            hashlib.sha256(text[start:end].encode()).hexdigest() == row.passage_sha256 if row.passage_sha256 else None
        )
        excerpt = passage_html.excerpt_around(
            passage_start=start,
            passage_end=end,
            text=text,
            text_start=0,
            context_chars=CARD_CONTEXT_CHARS,
            reach=[int(a[k]) for a in row.alterations for k in ("source_start", "source_end") if k in a],
        )
        excerpt = passage_html.Excerpt(
            passage_html.ExcerptSpan(start, end, intact),
            excerpt.start,
            excerpt.text,
            more_before=excerpt.more_before,
            more_after=excerpt.more_after,
        )
        drawn = SafeString(
            passage_html.passage_in_context_html(
                excerpt, row.alterations, offsets=False, context_flags=row.context_flags
            )
        )
        citation = source.citation if isinstance(source, CaselawOpinion) else None
        name = (
            source.title
            if isinstance(source, Document)
            else ", ".join(p for p in (source.case_name, source.citation) if p)
        )
        pin = span_pin_cite(source.pages, start, end, citation=citation) or ""
        out[finding_start] = (drawn, *pin_in_source(name, pin))
    return out


def _parts(text: str, pages: list[list[Any]], cards: list[Card]) -> list[Part]:
    """The draft's text cut at the start of each of its pages (its own numbers), at the start of the paragraph of
    a footnote holding a finding (labelled with its number: the record keeps a finding's footnote, not where the
    footnote's text begins) and at each finding's marker."""
    cuts: list[tuple[int, int, Part]] = [(int(start), 0, Part(page=str(label))) for start, label in pages]
    labelled: set[str] = set()
    for card in sorted(cards, key=lambda c: int(c.finding["start"])):
        footnote = str(card.finding.get("footnote") or "")
        if footnote and footnote not in labelled:
            labelled.add(footnote)
            paragraph = text.rfind("\n", 0, int(card.finding["start"])) + 1
            cuts.append((paragraph, 0, Part(footnote=footnote)))
    cuts += [(card.marker_offset, 1, Part(card=card)) for card in cards]
    parts: list[Part] = []
    at = 0
    for offset, _order, part in sorted(
        cuts, key=lambda cut: (cut[0], cut[1], cut[2].card.number if cut[2].card else 0)
    ):
        if offset > at:
            parts.append(Part(text=text[at:offset]))
            at = offset
        parts.append(part)
    if at < len(text):
        parts.append(Part(text=text[at:]))
    return parts


def _changes_in_words(changes: dict[str, Any] | None) -> dict[str, Any] | None:
    """What changed since the previous check, each finding with its kind and status in words."""
    if changes is None:
        return None
    worded = dict(changes)
    for key in ("fixed", "new", "still_open"):
        worded[key] = [
            f
            | {
                "kind_words": KIND_WORDS.get(str(f["kind"]), str(f["kind"])),
                "words": status_words(str(f["status"]), of_a_statute=f["kind"] == "statute_citation"),
            }
            for f in changes[key]
        ]
    return worded


def _table_of_authorities(authorities: list[dict[str, Any]], cards: list[Card]) -> list[ToaPart]:
    """The table of authorities in a brief's parts (cases; statutes and regulations; other), each entry in
    alphabetical order with its status in words, every page of the draft citing it and the findings citing it."""
    parts = [ToaPart(title) for title, _ in TOA_PARTS]
    citing: dict[int, list[Card]] = {}
    for card in cards:
        index = card.finding.get("authority")
        if card.finding["kind"] != "quote" and isinstance(index, int):
            citing.setdefault(index, []).append(card)
    for index, entry in enumerate(authorities):
        kind = str(entry["kind"])
        at = next((i for i, (_, kinds) in enumerate(TOA_PARTS) if kind in kinds), len(TOA_PARTS) - 1)
        status = str(entry["status"])
        words = status_words(status, of_a_statute=kind in ("statute", "regulation"))
        parts[at].entries.append(
            ToaEntry(entry=entry, words=words, status=status_in_words(status), cards=citing.get(index, []))
        )
    for part in parts:
        part.entries.sort(key=lambda e: e.title.casefold())
    return [part for part in parts if part.entries]


def matter_drafts(project: Project) -> list[dict[str, Any]]:
    """The matter's drafts for its page: each draft (its chat) with its last check's file name, time, verdict in
    words and how many findings need review, newest first."""
    out = []
    for check in selectors.last_checks_of(project):
        out.append(
            {
                "check": check,
                "verdict": verdict_in_words(check.message.verdict),
                "to_review": sum(bool(f.get("needs_review")) for f in check.findings),
                "findings": len(check.findings),
                "checks": getattr(check, "checks_count", 1),
            }
        )
    return out


def _matter_or_404(request: HttpRequest, project_id: UUID) -> Project:
    project = projects_visible_to(request.user).filter(pk=project_id).first()
    if project is None:
        raise Http404("No such matter visible to you.")
    return project


def _throttled(request: HttpRequest) -> float | None:
    """The API's turn rate (:class:`chats.throttles.TurnRateThrottle`) for a draft checked from the pages: the
    seconds to wait when over it, else None."""
    throttle = TurnRateThrottle()
    if throttle.allow_request(request, None):  # type: ignore[arg-type]  # reads only request.user and its META
        return None
    return throttle.wait() or 1.0


@require_POST
@login_required
def draft_upload(request: HttpRequest, project_id: UUID) -> HttpResponseBase:
    """Any member checks a draft in the matter, with the API's bounds and errors (:func:`record_checked_draft`
    after the draft is read, found and checked). A refused file is shown again on the upload form with the reason
    (400, 413 over ``LQAI_MAX_UPLOAD_BYTES``, 429 over the turn rate) and nothing is written. Without JavaScript
    the check runs in the request and the answer is a redirect to the draft's page; the page's script posts with
    ``stream=1`` and reads :func:`_progress` as the check runs."""
    project = _matter_or_404(request, project_id)
    form = DraftUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _upload_page(request, project, form, status=400)
    wait = _throttled(request)
    if wait is not None:
        form.add_error(
            "file",
            "You have checked too many drafts and asked too many questions lately: "
            f"try again in {int(wait) + 1} seconds.",
        )
        return _upload_page(request, project, form, status=429)
    file = form.cleaned_data["file"]
    if file.size > settings.LQAI_MAX_UPLOAD_BYTES:
        form.add_error("file", f"The file is too large: at most {settings.LQAI_MAX_UPLOAD_BYTES} bytes.")
        return _upload_page(request, project, form, status=413)
    data = file.read(settings.LQAI_MAX_UPLOAD_BYTES + 1)
    name = file.name or ""
    author: AbstractBaseUser = request.user  # type: ignore[assignment]  # login_required
    try:
        draft = read_draft(data=data, name=name)
    except UnreadableDraft as exc:
        form.add_error("file", str(exc))
        return _upload_page(request, project, form, status=400)
    if request.POST.get("stream") == "1":
        response = StreamingHttpResponse(
            _progress(project=project, author=author, data=data, name=name, draft=draft),
            content_type="application/x-ndjson",
        )
        response["Cache-Control"] = "no-store"
        response["X-Accel-Buffering"] = "no"
        return response
    found = find_in_draft(draft)
    checked = check_draft(found=found, matter=project)
    recorded = record_checked_draft(matter=project, author=author, data=data, name=name, draft=draft, checked=checked)
    return redirect("draft_pages:draft", draft_id=recorded.check.pk)


def _progress(*, project: Project, author: AbstractBaseUser, data: bytes, name: str, draft: Any) -> Iterator[bytes]:
    """The check of a read draft as lines of JSON, sent as it goes: ``found`` with every finding (kind, words,
    page) once the draft is read through; ``step`` as each step of the check ends, with ``checked`` for each
    finding whose status is then final (the quotations, once checked against their sources); after the last step
    and the check recorded, ``checked`` for the rest (the citations, once their pin cites are compared with the
    quotations' pages) and ``done`` with the draft's page; ``error`` if the check fails, and nothing written (the
    record is one transaction).

    It runs in the response, in the request's own thread (no thread is started: nothing outlives the request),
    as a streamed turn does. A reader who leaves while it is checked (the server's next write fails and the
    generator is closed) has nothing recorded, as with a refused file; the record is written before the last
    statuses are sent, so that one who leaves once the check is done keeps it."""

    def line(event: dict[str, Any]) -> bytes:
        return (json.dumps(event) + "\n").encode()

    def checked(index: int, check: Check) -> bytes:
        return line({"event": "checked", "index": index, "words": check.words, "needs_review": check.needs_review})

    found = find_in_draft(draft)
    yield line(
        {
            "event": "found",
            "findings": [
                {"kind": KIND_WORDS.get(f.kind, f.kind), "text": f.text[:200], "page": f.page} for f in found.findings
            ],
        }
    )
    sent: set[int] = set()
    try:
        steps = check_draft_in_steps(found=found, matter=project)
        while True:
            try:
                step = next(steps)
            except StopIteration as finished:
                result: CheckedDraft = finished.value
                break
            yield line({"event": "step", "words": step.words, "count": step.count})
            for index, check in sorted(step.final.items()):
                sent.add(index)
                yield checked(index, check)
        recorded = record_checked_draft(
            matter=project, author=author, data=data, name=name, draft=draft, checked=result
        )
    except Exception:
        # The response has begun: the failure can only be said in the stream. Logged with its traceback.
        logger.exception("draft check of %r in matter %s failed", name, project.pk)
        yield line({"event": "error", "detail": "The check failed and nothing was recorded: try again."})
        return
    for index, check in enumerate(result.checks):
        if index not in sent:
            yield checked(index, check)
    yield line({"event": "done", "url": reverse("draft_pages:draft", args=[recorded.check.pk])})


def _upload_page(request: HttpRequest, project: Project, form: DraftUploadForm, *, status: int) -> HttpResponse:
    return render(request, "drafts/upload.html", {"project": project, "form": form}, status=status)


@require_GET
@login_required
def draft_upload_form(request: HttpRequest, project_id: UUID) -> HttpResponse:
    """The upload form alone (the matter's page has it too)."""
    return _upload_page(request, _matter_or_404(request, project_id), DraftUploadForm(), status=200)
