"""The demo a newcomer runs with ``make demo``.

It seeds a demo matter (a user, a project, KB documents, the bundled public-domain opinions, and the trimmed
copy of 9 U.S.C. the tests load), runs real chat turns through the HTTP API in-process (single-shot, streamed
with the caselaw tool, streamed with a statute looked up, one interrupted then resumed), creates a few older
turns whose ledger entries are missing and repairs them with ``backfill_ledger``, and prints each turn's ledger
entries. Last, the record proves itself: the older turns are sealed late, the matter's chain is checked with
``verify_ledger``, exported with ``export_matter`` and the export verified offline by ``python -m lqai_verify``.

Re-runnable: the previous run's demo matter is purged (``citations.purge``, the one way a matter's permanent
record goes, leaving a tombstone) and seeded afresh, so a second run neither fails nor duplicates anything. A
matter holding anything the demo did not make (a turn asked by hand in a demo chat, say) is kept whole instead,
renamed, beside the fresh one. Each run issues a new API token for the demo user (they expire).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken

from authorities.loading import load_uslm
from chats.assistant import FinalAnswer, ScriptedBackend, TextDelta
from chats.documents import save_document
from chats.models import (
    UNVERIFIED,
    CaseCitation,
    CaselawOpinion,
    Chat,
    Document,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
    SourceKind,
)
from chats.services import ClaimedCitation
from citations import keys
from citations.models import CitationLedgerEntry, MatterPurge
from citations.purge import purge_matter
from demo.models import DemoMade
from lqai_verify.verification import verify_quote

OPINIONS_DIR = Path(__file__).resolve().parent.parent / "chats" / "data" / "opinions"
# OLRC's usc09.xml (release point Online@117-80) trimmed to six sections (the copy the tests load too).
STATUTE_TITLE = Path(__file__).resolve().parent.parent / "authorities" / "data" / "uslm" / "usc09.xml"

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-password"  # noqa: S105 - a local demo login, printed for the newcomer
DEMO_PROJECT = "Election law research (demo)"

KB_DOCUMENTS = {
    "Alabama AGO 2018-046: substituting a candidate on the general election ballot": "alabama-ago-2018-046.txt",
    "Kentucky OAG 18-011: giving voters the list of certified write-in candidates": "kentucky-oag-18-011-2018.txt",
}


@dataclass(frozen=True)
class SeedOpinion:
    file: str
    opinion_id: str
    case_name: str
    citation: str
    court: str
    date_filed: dt.date


OPINIONS = (
    SeedOpinion(
        "fisher-v-university-of-texas-2013-slip.txt",
        "fisher-2013",
        "Fisher v. University of Texas at Austin",
        "570 U.S. 297 (2013)",
        "Supreme Court of the United States",
        dt.date(2013, 6, 24),
    ),
    SeedOpinion(
        "hogarth-v-bell-edn-c-2025.txt",
        "hogarth-2025",
        "Hogarth v. Bell",
        "No. 5:24-CV-481-FL (E.D.N.C. 2025)",
        "U.S. District Court, Eastern District of North Carolina",
        dt.date(2025, 3, 28),
    ),
    SeedOpinion(
        "democracy-nc-v-nc-board-of-elections-mdnc-2022.txt",
        "democracy-nc-2022",
        "Democracy North Carolina v. North Carolina State Board of Elections",
        "590 F. Supp. 3d 850 (M.D.N.C. 2022)",
        "U.S. District Court, Middle District of North Carolina",
        dt.date(2022, 3, 10),
    ),
)

SINGLE_SHOT_QUESTION = (
    "May a political party substitute a candidate on the general election ballot "
    "when it did not nominate one in the primary?"
)
STREAMED_QUESTION = "Does the First Amendment protect a voter who photographs a marked ballot?"
STATUTE_QUESTION = "Is a written agreement to arbitrate in a maritime contract enforceable under 9 U.S.C. § 2?"
INTERRUPTED_QUESTION = "May election officers give voters the list of certified write-in candidates?"
WRONG_NAME_QUESTION = "Which case requires a searching examination of race-conscious admissions?"
# A scripted answer (the offline backend cites cases as the opinions name them): a real reporter citation,
# 570 U.S. 297, under the name of a case that is not the one at that volume and page.
WRONG_NAME_ANSWER = (
    "Strict scrutiny requires a searching examination of a race-conscious admissions plan: "
    "Grutter v. Bollinger, 570 U.S. 297 (2013)."
)

PIN_CITE_QUESTION = "May a State limit whom a voter who needs help chooses to assist him?"
# A scripted answer quoting Democracy N.C. with a pin cite: the quote is on the reporter's page 870 (the text
# carries the reporter's own markers), so its card reads "590 F. Supp. 3d at 870" and the pin is checked there.
PIN_CITE_QUOTE = "However, a 208-voter's choice is not unlimited."
PIN_CITE_ANSWER = (
    f"Not without limit: \u201c{PIN_CITE_QUOTE}\u201d Democracy North Carolina v. North Carolina State Board of "
    "Elections, 590 F. Supp. 3d 850, 870 (M.D.N.C. 2022)."
)

ALTERED_QUESTION = "When is there a vacancy in a party's nomination?"
# A scripted answer quoting the Alabama opinion with a trailing omission that drops its limiting "only if ...":
# the quote is found, but the verifier cannot vouch for it (altered), and the omitted text is shown.
ALTERED_QUOTE = "a vacancy in the nomination can occur . . . ."
ALTERED_ANSWER = f"The Attorney General notes that \u201c{ALTERED_QUOTE}\u201d"


DEMO_CHAT_TITLE = "Demo: ballots and candidates"
OLDER_TURNS_CHAT_TITLE = "Older turns (before the ledger)"


@dataclass(frozen=True)
class DemoMatter:
    user: User
    token: str
    token_expiry: dt.datetime | None
    project: Project


def seed() -> DemoMatter:
    """Create (or find) the demo user, matter, KB documents and opinions."""
    with transaction.atomic():
        user, created = User.objects.get_or_create(
            username=DEMO_USERNAME, defaults={"email": "demo@example.com", "is_staff": True, "is_superuser": True}
        )
        if created or not user.check_password(DEMO_PASSWORD):
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
        token_row, token = AuthToken.objects.create(user=user)
        project, _ = Project.objects.get_or_create(name=DEMO_PROJECT, owner=user)
        for title, file in KB_DOCUMENTS.items():
            document = Document.objects.filter(project=project, title=title).first()
            document = document or Document(project=project, title=title)
            document.content = (OPINIONS_DIR / file).read_text(encoding="utf-8")
            save_document(document=document)
        for opinion in OPINIONS:
            stored = CaselawOpinion.objects.filter(provider="local", opinion_id=opinion.opinion_id).first()
            if stored is not None and stored.is_cited():
                continue  # what the record shows of a cited opinion (its text, citation, pages) stays as quoted
            CaselawOpinion.objects.update_or_create(
                provider="local",
                opinion_id=opinion.opinion_id,
                defaults={
                    "cluster_id": opinion.opinion_id,
                    "case_name": opinion.case_name,
                    "citation": opinion.citation,
                    "court": opinion.court,
                    "date_filed": opinion.date_filed,
                    "text": (OPINIONS_DIR / opinion.file).read_text(encoding="utf-8"),
                },
            )
    # The statute library is shared, not the matter's: loaded once, a later run finds it loaded and reads nothing.
    load_uslm(path=STATUTE_TITLE)
    return DemoMatter(user=user, token=token, token_expiry=token_row.expiry, project=project)


@dataclass(frozen=True)
class KeptMatter:
    """A previous demo matter kept whole, and why: the chats holding what the demo did not make (each with how
    many of its messages the demo did not make; 0 for an empty chat made by hand), the documents added by hand,
    its legal hold."""

    project: Project
    chats: list[tuple[Chat, int]]
    documents: int
    legal_hold: bool


@dataclass(frozen=True)
class PreviousRuns:
    """What :func:`purge_previous_run` did with each previous demo matter."""

    purged: list[MatterPurge]
    kept: list[KeptMatter]


def record_made(*, project: Project) -> None:
    """Record every chat and message now in the demo matter ``project`` as the demo's (:class:`DemoMade`), for
    the next run's :func:`purge_previous_run`. Call it when the run that seeded ``project`` ends or stops: the
    matter is that run's own (seeded by it, or an empty one reused), so all it holds then is the run's."""
    chats = list(Chat.objects.filter(project=project).values_list("pk", flat=True))
    messages = list(Message.objects.filter(chat__project=project).values_list("pk", flat=True))
    DemoMade.objects.bulk_create(
        [DemoMade(project_id=project.pk, object_id=pk) for pk in chats + messages], ignore_conflicts=True
    )


def purge_previous_run() -> PreviousRuns:
    """Replace the previous runs' demo matters (named :data:`DEMO_PROJECT`, of the demo user, with chats).

    One the demo made entirely (every chat and message in it recorded by :func:`record_made`, checked message
    by message, and no document but the demo's) is purged: its turns are a permanent record, so they go only
    with their matter, through ``citations.purge``, which leaves a tombstone. One that holds anything else (a
    turn asked by hand, even in a demo chat; a chat or a document of someone's), or is on legal hold, is kept
    whole, renamed, so that this run seeds a fresh demo matter beside it: a rerun never loses a person's work."""
    purged: list[MatterPurge] = []
    kept: list[KeptMatter] = []
    previous_matters = Project.objects.filter(
        name=DEMO_PROJECT, owner__username=DEMO_USERNAME, chats__isnull=False
    ).distinct()
    for previous in previous_matters.order_by("created_at"):
        found = _not_made_by_the_demo(previous)
        if found is None:
            purged.append(purge_matter(project_id=previous.pk, purged_by=DEMO_USERNAME))
            DemoMade.objects.filter(project_id=previous.pk).delete()
            continue
        previous.name = f"{DEMO_PROJECT}, kept {timezone.now():%Y-%m-%d %H:%M:%S} (holds work not made by the demo)"
        previous.save(update_fields=["name"])
        kept.append(found)
    return PreviousRuns(purged=purged, kept=kept)


def _not_made_by_the_demo(project: Project) -> KeptMatter | None:
    """What ``project`` holds that the demo did not make (see :class:`KeptMatter`); ``None`` if nothing, and it is
    not on legal hold."""
    made = DemoMade.objects.filter(project_id=project.pk).values("object_id")
    per_chat = Counter(
        Message.objects.filter(chat__project=project).exclude(pk__in=made).values_list("chat_id", flat=True)
    )
    chats_by_hand = set(Chat.objects.filter(project=project).exclude(pk__in=made).values_list("pk", flat=True))
    chats = Chat.objects.filter(pk__in=chats_by_hand | per_chat.keys()).order_by("created_at")
    documents = project.documents.exclude(title__in=KB_DOCUMENTS).count()
    if not chats and not documents and not project.legal_hold:
        return None
    return KeptMatter(
        project=project,
        chats=[(chat, per_chat[chat.pk]) for chat in chats],
        documents=documents,
        legal_hold=project.legal_hold,
    )


# --- talking to the API in-process -------------------------------------------------------------


def api_client(matter: DemoMatter) -> Client:
    return Client(headers={"Authorization": f"Bearer {matter.token}"}, SERVER_NAME="localhost")


def post_json(client: Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, data=json.dumps(body), content_type="application/json")
    if response.status_code >= 400:
        raise RuntimeError(f"POST {path} answered {response.status_code}: {response.content.decode()[:500]}")
    return dict(response.json())


def sse_events(chunks: Iterator[bytes]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Parse a text/event-stream body into (event, data) pairs as a browser's EventSource would."""
    buffer = ""
    for chunk in chunks:
        buffer += chunk.decode("utf-8")
        while "\n\n" in buffer:
            raw, buffer = buffer.split("\n\n", 1)
            event, data = "message", ""
            for line in raw.splitlines():
                if line.startswith("event:"):
                    event = line[len("event:") :].strip()
                elif line.startswith("data:"):
                    data += line[len("data:") :].strip()
            yield event, (json.loads(data) if data else {})


def stream(
    client: Client, path: str, body: dict[str, Any], *, stop_after: Callable[[str], bool] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """POST to a streaming endpoint and read its events; with ``stop_after``, disconnect after the
    first event it accepts, as a client that goes away mid-answer."""
    response = client.post(path, data=json.dumps(body), content_type="application/json")
    if response.status_code >= 400:
        raise RuntimeError(f"POST {path} answered {response.status_code}: {response.content.decode()[:500]}")
    events: list[tuple[str, dict[str, Any]]] = []
    try:
        for event, data in sse_events(iter(response.streaming_content)):  # type: ignore[attr-defined]
            events.append((event, data))
            if stop_after is not None and stop_after(event):
                break
    finally:
        response.close()
    return events


# --- older turns, finalized before the ledger existed -----------------------------------------


def create_turns_without_ledger(matter: DemoMatter, *, count: int = 3) -> Chat:
    """Older turns whose rows exist but whose ledger entries do not (as before the ledger shipped).

    Rows are written directly, not through ``finalize_turn``: these turns never sent the signal.
    """
    chat = Chat.objects.create(project=matter.project, owner=matter.user, title=OLDER_TURNS_CHAT_TITLE)
    document = Document.objects.filter(project=matter.project).order_by("title").first()
    opinion = CaselawOpinion.objects.get(provider="local", opinion_id="fisher-2013")
    if document is None:
        raise RuntimeError("the demo matter has no KB document: seed() must run first")
    quotes = [
        "A political party may not substitute an individual on the general election ballot",
        "This opinion of the Attorney General is issued in response to your request.",
    ]
    # Straight apostrophe and "admissions" whole, where the slip opinion has a curly one and "admis-\nsions":
    # verifies as a tolerant match, with offsets spanning the original passage.
    opinion_quote = "the University's consideration of race in admissions violated the Equal Protection Clause"
    for index in range(count):
        # One transaction per turn, as a finalize writes it: a turn's rows are added only by the transaction
        # that finalized it (chats.0032).
        with transaction.atomic():
            when = timezone.now() - dt.timedelta(days=90 - index)
            Message.objects.create(
                chat=chat, role=Message.Role.USER, content=f"Older question {index + 1}", created_at=when
            )
            message = Message.objects.create(
                chat=chat,
                role=Message.Role.ASSISTANT,
                content=f"Older answer {index + 1}",
                status=Message.Status.COMPLETE,
                finalized_at=when,
                created_at=when,
            )
            match = verify_quote(quotes[index % len(quotes)], document.content)
            if match is not None:
                DocumentQuote.objects.create(
                    message=message,
                    document=document,
                    quote=quotes[index % len(quotes)],
                    source_offset_start=match.start,
                    source_offset_end=match.end,
                    verification_method=match.method,
                    verification_confidence=round(match.confidence, 3),
                    created_at=when,
                )
            opinion_match = verify_quote(opinion_quote, opinion.text)
            if opinion_match is not None:
                OpinionQuote.objects.create(
                    message=message,
                    opinion=opinion,
                    quote=opinion_quote,
                    source_offset_start=opinion_match.start,
                    source_offset_end=opinion_match.end,
                    verification_method=opinion_match.method,
                    verification_confidence=opinion_match.confidence,
                    created_at=when,
                )
            MessageToolSource.objects.create(
                message=message,
                source_kind=SourceKind.MCP,
                tool="docket_lookup",
                provider="example-mcp",
                label=f"Docket entry {index + 1}",
                external_ref=f"docket-{index + 1}",
                created_at=when,
            )
    return chat


# --- printing ------------------------------------------------------------------------------------


def source_label(entry: CitationLedgerEntry) -> str:
    if entry.message_citation is not None:
        document = entry.message_citation.document
        return f"KB: {document.title}" if document is not None else "KB: (no document of this matter)"
    if entry.message_caselaw_citation is not None:
        opinion = entry.message_caselaw_citation.opinion
        return f"{opinion.case_name}, {opinion.citation}" if opinion is not None else "(no known opinion)"
    if entry.message_tool_source is not None:
        source = entry.message_tool_source
        return f"{source.tool}: {source.label}"
    if entry.message_case_citation is not None:
        case = entry.message_case_citation
        return f"cited: {case.case_name}, {case.citation}"
    if entry.message_statute_citation is not None:
        statute = entry.message_statute_citation
        return f"{statute.kind}: {statute.cited or statute.citation}"
    return "?"


def ledger_table(message: Message) -> list[str]:
    entries = (
        CitationLedgerEntry.objects.filter(message=message)
        .select_related(
            "message_citation__document",
            "message_caselaw_citation__opinion",
            "message_tool_source",
            "message_case_citation",
            "message_statute_citation",
        )
        .order_by("source_kind", "verification_status", "id")
    )
    rows = [
        (
            e.source_kind,
            e.verification_status,
            "-" if e.confidence is None else f"{e.confidence:.3f}",
            e.provider or "-",
            source_label(e)[:70],
        )
        for e in entries
    ]
    if not rows:
        return ["    (no ledger entries)"]
    header = ("kind", "status", "confidence", "provider", "source")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return [
        ("    " + "  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row))).rstrip()
        for row in [header, tuple("-" * w for w in widths), *rows]
    ]


# --- the run ---------------------------------------------------------------------------------------


@dataclass
class DemoTurn:
    label: str
    question: str
    message_id: str
    events: list[str]
    unverified_count: int


def _streamed_turn(client: Client, base: str, question: str, *, label: str) -> DemoTurn:
    """One streamed turn asking ``question`` in the chat whose messages are at ``base``, read to its end."""
    events = stream(client, f"{base}stream/", {"content": question})
    done = _event_data(events, "done")
    return DemoTurn(label, question, done["message_id"], [e for e, _ in events], len(done["unverified_citations"]))


def _scripted_turn(
    client: Client,
    base: str,
    label: str,
    question: str,
    *,
    answer: str,
    claims: tuple[ClaimedCitation, ...] = (),
) -> DemoTurn:
    """One single-shot turn asking ``question`` whose answer is scripted: ``answer``, claiming ``claims``."""
    with (
        override_settings(LQAI_ASSISTANT_BACKEND="chats.assistant.ScriptedBackend"),
        ScriptedBackend.scripted(TextDelta(answer), FinalAnswer(citations=claims)),
    ):
        body = post_json(client, base, {"content": question})
    return DemoTurn(label, question, body["message"]["id"], [], len(body["message"]["unverified_citations"]))


def run_turns(matter: DemoMatter) -> tuple[list[DemoTurn], Chat]:
    """Run the demo's turns through the HTTP API, in-process, as a client would."""
    client = api_client(matter)
    chat = post_json(client, "/api/chats/", {"title": DEMO_CHAT_TITLE, "project": str(matter.project.pk)})
    base = f"/api/chats/{chat['id']}/messages/"
    turns: list[DemoTurn] = []

    single = post_json(client, base, {"content": SINGLE_SHOT_QUESTION})
    failed = len(single["message"]["unverified_citations"])
    turns.append(DemoTurn("single-shot", SINGLE_SHOT_QUESTION, single["message"]["id"], [], failed))

    turns.append(_streamed_turn(client, base, STREAMED_QUESTION, label="streamed, caselaw tool"))
    turns.append(_streamed_turn(client, base, STATUTE_QUESTION, label="streamed, a statute looked up"))

    # The client goes away after the first words of the answer (the caselaw tool has already run).
    interrupted = stream(client, f"{base}stream/", {"content": INTERRUPTED_QUESTION}, stop_after=lambda e: e == "delta")
    message_id = _event_data(interrupted, "start")["message_id"]
    status_after_disconnect = Message.objects.get(pk=message_id).status
    resumed = stream(client, f"{base}{message_id}/resume/", {})
    resumed_done = _event_data(resumed, "done")
    turns.append(
        DemoTurn(
            f"streamed, disconnected ({status_after_disconnect}), then resumed",
            INTERRUPTED_QUESTION,
            message_id,
            [e for e, _ in interrupted] + ["| resume:"] + [e for e, _ in resumed],
            len(resumed_done["unverified_citations"]),
        )
    )

    # An answer that cites a real case under a wrong name: the check finds the case at that citation and
    # reports the mismatch, and the turn's verdict is fail.
    wrong_name = "single-shot, a scripted answer citing a real case under a wrong name"
    turns.append(_scripted_turn(client, base, wrong_name, WRONG_NAME_QUESTION, answer=WRONG_NAME_ANSWER))
    # An answer quoting an opinion that carries its reporter's pages, with a pin cite on the quoted page.
    democracy = CaselawOpinion.objects.get(provider="local", opinion_id="democracy-nc-2022")
    turns.append(
        _scripted_turn(
            client,
            base,
            "single-shot, a scripted answer quoting an opinion with a pin cite",
            PIN_CITE_QUESTION,
            answer=PIN_CITE_ANSWER,
            claims=(ClaimedCitation(quote=PIN_CITE_QUOTE, opinion_id=democracy.pk),),
        )
    )
    # An answer whose quote omits the limiting clause that follows it: altered, and the turn to review.
    alabama = Document.objects.get(project=matter.project, title__startswith="Alabama AGO 2018-046")
    turns.append(
        _scripted_turn(
            client,
            base,
            "single-shot, a scripted answer whose quote drops a limiting clause",
            ALTERED_QUESTION,
            answer=ALTERED_ANSWER,
            claims=(ClaimedCitation(quote=ALTERED_QUOTE, document_id=alabama.pk),),
        )
    )
    return turns, Chat.objects.get(pk=chat["id"])


SERVE_URL = "http://127.0.0.1:8000"  # where `make serve` listens
EXPORT_NAME = "demo-matter.zip"  # written in ``settings.VAR_DIR``
OFFLINE_TIMEOUT = 120  # seconds for ``python -m lqai_verify`` on the demo's export (it takes well under one)
SHOWN_WARNINGS = 2  # the verifier's warnings the demo prints (the rest are counted)


@dataclass(frozen=True)
class ProvenRecord:
    """What :func:`prove_record` did: each step's summary line, the export, and the offline verifier's exit
    code (0: verified)."""

    lines: list[str]
    export: Path
    fingerprint: str
    offline_exit: int


def command_summary(command: str, *args: Any, stderr: TextIO | None = None, **options: Any) -> str:
    """Run a management command and return the last line it printed (its summary); its errors and progress go
    to ``stderr`` (this process's by default)."""
    output = io.StringIO()
    call_command(command, *args, stdout=output, stderr=stderr or sys.stderr, **options)
    return output.getvalue().strip().splitlines()[-1]


def prove_record(matter: DemoMatter) -> ProvenRecord:
    """Seal the matter's unsealed turns late (``seal_turns``), check its chain (``verify_ledger``, which exits
    with 1 on a broken chain), export it to ``settings.VAR_DIR / EXPORT_NAME`` (``export_matter``), and verify
    the export offline in a child process (``python -m lqai_verify --public-key``), as its recipient would."""
    project = str(matter.project.pk)
    export = Path(settings.VAR_DIR) / EXPORT_NAME
    export.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        command_summary("seal_turns", matter=project),
        command_summary("verify_ledger", matter=project),
        command_summary("export_matter", project, out=export),
    ]
    fingerprint = keys.current_fingerprint()
    offline = subprocess.run(  # noqa: S603 - this interpreter, this project's verifier, arguments from here
        [sys.executable, "-m", "lqai_verify", str(export), "--public-key", fingerprint],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=OFFLINE_TIMEOUT,
        check=False,
    )
    lines += offline.stdout.splitlines()
    reported = offline.stderr.splitlines()
    warnings = [line for line in reported if line.startswith("lqai_verify: warning:")]
    lines += [line for line in reported if line not in warnings] + warnings[:SHOWN_WARNINGS]
    if len(warnings) > SHOWN_WARNINGS:
        lines.append(f"... and {len(warnings) - SHOWN_WARNINGS} more warning(s) (`python -m lqai_verify` lists them)")
    return ProvenRecord(lines, export, fingerprint, offline.returncode)


def page_url(chat: Chat) -> str:
    """The address of ``chat``'s trace page under `make serve`."""
    return f"{SERVE_URL}{reverse('pages:chat', args=[chat.pk])}"


def _event_data(events: list[tuple[str, dict[str, Any]]], name: str) -> dict[str, Any]:
    for event, data in events:
        if event == name:
            return data
    raise RuntimeError(f"the stream sent no {name!r} event: {[e for e, _ in events]}")


def describe_turn(turn: DemoTurn) -> list[str]:
    message = Message.objects.get(pk=turn.message_id)
    kb = DocumentQuote.objects.filter(message=message).exclude(verification_method=UNVERIFIED).count()
    caselaw = OpinionQuote.objects.filter(message=message).exclude(verification_method=UNVERIFIED).count()
    sources = MessageToolSource.objects.filter(message=message).count()
    lines = [
        f"Turn: {turn.label}",
        f"  Q: {turn.question}",
        f"  status={message.status}  verdict={message.verdict}  verified quotes: kb={kb} caselaw={caselaw}  "
        f"tool sources={sources}  unverified={turn.unverified_count}",
    ]
    if turn.events:
        lines.append(f"  events: {' '.join(_compress(turn.events))}")
    for quote in DocumentQuote.objects.filter(message=message, verification_method="altered").select_related(
        "document"
    ):
        content = quote.document.content if quote.document is not None else ""
        for alteration in quote.alterations:
            if alteration.get("alters"):
                omits = content[alteration["source_start"] : alteration["source_end"]]
                lines.append(
                    f"  altered quote {quote.quote!r}: {alteration['quote_text']!r} omits {omits!r} "
                    f"({alteration['alters']})"
                )
    for case in CaseCitation.objects.filter(message=message).select_related("opinion"):
        lines.append(f"  case citation {case.citation!r} written as {case.case_name!r}: {case.status} ({case.detail})")
    lines.append("  ledger:")
    return lines + ledger_table(message)


def _compress(events: list[str]) -> list[str]:
    """``delta delta delta`` -> ``delta x3``, to keep the event trace readable."""
    out: list[str] = []
    for event in events:
        if out and out[-1].split(" x")[0] == event:
            head, _, count = out[-1].partition(" x")
            out[-1] = f"{head} x{int(count or 1) + 1}"
        else:
            out.append(event)
    return out
