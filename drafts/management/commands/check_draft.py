"""``manage.py check_draft PATH --matter ID [--user NAME] [--json OUT] [--no-record]``: read a draft, check what it
cites and quotes, list it, and record the check as a turn of the draft's chat in the matter."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse
from tqdm import tqdm

from chats.models import Project
from chats.selectors import projects_visible_to
from drafts.checking import Check, check_draft
from drafts.errors import UnreadableDraft
from drafts.finding import STEPS, DraftFindings, Finding, find_in_draft
from drafts.reading import read_draft
from drafts.recording import draft_record, record_checked_draft


class Command(BaseCommand):
    help = (
        "Read a draft brief (DOCX, PDF with a text layer, plain text or Markdown) for a matter and list every case "
        "citation, statute or regulation citation and quotation in it, each with its page and the authority it is "
        "tied to, checked (docs/drafts.md says each status in words), then the table of authorities and the verdict. "
        "Writes nothing but --json (and the opinions CourtListener returns, when COURTLISTENER_API_TOKEN is set)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="the draft: .docx, .pdf, .txt or .md")
        parser.add_argument("--matter", type=UUID, required=True, help="the matter (project) id the draft is for")
        parser.add_argument("--json", type=Path, dest="json_out", help="also write the findings as JSON to this file")
        parser.add_argument(
            "--user", help="who checks the draft (the turn's author): the matter's owner or a member; default its owner"
        )
        parser.add_argument(
            "--no-record", action="store_true", help="only check and list: record no turn (writes nothing but --json)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        matter: UUID = options["matter"]
        json_out: Path | None = options["json_out"]
        project = Project.objects.filter(pk=matter).first()
        if project is None:
            raise CommandError(f"No matter {matter}: pass a project id (see the admin's Projects).")
        if json_out is not None and not json_out.parent.is_dir():
            raise CommandError(f"--json {json_out}: the directory {json_out.parent} does not exist.")
        author = None if options["no_record"] else _author(project, options["user"])
        data = _read_bytes(path)
        with tqdm(total=1 + len(STEPS), unit="step", file=sys.stderr, desc="check_draft", disable=None) as bar:
            try:
                draft = read_draft(data=data, name=path.name)
            except UnreadableDraft as exc:
                raise CommandError(f"{path}: {exc}") from None
            bar.update()

            def step_done(step: str) -> None:
                bar.set_postfix_str(step)
                bar.update()

            result = find_in_draft(draft, on_step=step_done)
            bar.reset(total=len(result.findings))
            bar.set_description("checking")
            checked = check_draft(found=result, matter=project, on_checked=lambda count: bar.update(count))
        for finding, check in zip(result.findings, checked.checks, strict=True):
            self.stdout.write(_line(finding, check, result))
        self._write_table(result, checked.authority_statuses())
        record: dict[str, object] = checked.record(matter=str(matter))
        if author is not None:
            recorded = record_checked_draft(
                matter=project, author=author, data=data, name=path.name, draft=draft, checked=checked
            )
            record = draft_record(recorded.check)
            self.stdout.write(
                f"Recorded as turn {recorded.message.pk} of chat {recorded.check.chat_id} (draft check "
                f"{recorded.check.pk}); trace page: {reverse('pages:chat', args=[recorded.check.chat_id])}; "
                f"the draft's page: {record['page']}"
            )
            if record["changes"] is not None:
                changes: Any = record["changes"]
                self.stdout.write(
                    f"Since the previous check: {len(changes['fixed'])} fixed, {len(changes['new'])} new, "
                    f"{len(changes['still_open'])} still open"
                )
        if json_out is not None:
            _write_json(json_out, record)
        counts = {
            kind: sum(f.kind == kind for f in result.findings)
            for kind in ("case_citation", "statute_citation", "quote")
        }
        uncited = sum(f.kind == "quote" and f.authority is None for f in result.findings)
        self.stdout.write(
            f"check_draft: {path.name}: {counts['case_citation']} case citations, {counts['statute_citation']} statute "
            f"and regulation citations, {counts['quote']} quotations ({uncited} without a citation), "
            f"{len(result.authorities)} authorities; {sum(c.needs_review for c in checked.checks)} to review; "
            f"verdict {record['verdict']}"
        )

    def _write_table(self, result: DraftFindings, statuses: list[str]) -> None:
        self.stdout.write("Table of authorities:")
        for entry, status in zip(result.authorities, statuses, strict=True):
            pages = ", ".join(entry.pages) or "no page numbers"
            name = f"{entry.name}, " if entry.name else ""
            self.stdout.write(f"  {entry.kind:<10} {name}{entry.cite}: {pages} ({status})")


def _author(project: Project, username: str | None) -> Any:
    """The user the check is recorded for: ``username`` if she is active and the matter's owner or a member, else
    (no ``--user``) the matter's owner."""
    if username is None:
        return project.owner
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None or not projects_visible_to(user).filter(pk=project.pk).exists():
        raise CommandError(f"--user {username}: no such active user is the owner or a member of matter {project.pk}.")
    return user


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, read no further than one byte past the upload limit (the reader refuses it then)."""
    try:
        with path.open("rb") as file:
            return file.read(settings.LQAI_MAX_UPLOAD_BYTES + 1)
    except OSError as exc:
        raise CommandError(f"{path}: cannot be read ({exc.strerror or exc}).") from None


def _line(finding: Finding, check: Check, result: DraftFindings) -> str:
    page = f"p. {finding.page}" if finding.page is not None else "p. -"
    where = f" (footnote {finding.footnote})" if finding.footnote else ""
    if finding.authority is not None:
        to = f" -> {result.authorities[finding.authority].cite}"
    else:
        to = " -> no citation" if finding.kind == "quote" else " -> no full citation before it"
    text = " ".join(finding.text.split())
    text = text if len(text) <= 100 else text[:97] + "..."
    mark = "!" if check.needs_review else " "
    return f"{mark} {page:<8} {finding.kind:<17} {finding.form:<16} {text}{to}{where}: {check.status}: {check.detail}"


def _write_json(out: Path, record: dict[str, object]) -> None:
    # Written beside the target and renamed into place: an interrupted run leaves no half-written file.
    with tempfile.NamedTemporaryFile("w", dir=out.parent, prefix=f".{out.name}.", delete=False, encoding="utf-8") as f:
        try:
            json.dump(record, f, ensure_ascii=False, indent=2)
        except BaseException:
            os.unlink(f.name)
            raise
    os.replace(f.name, out)
