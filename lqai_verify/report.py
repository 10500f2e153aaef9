"""The export's readable report (``report.html``), rendered from the bundle's data alone.

The server renders it as it exports (``citations.export``), from the very values it writes to the data files;
the verifier renders it again from the data it has checked and compares the two byte for byte
(``lqai-export/2`` and ``/3``). So the page a court or a client reads says exactly what the verified data says:
a verdict, a quote's status or an alteration cannot read otherwise in the report than in the record, whoever
made the bundle. A self-contained page (no script, no external file) that prints to PDF.

Every value from the data is HTML-escaped; the parts are :func:`start` (the subject, the key, the chain),
one :func:`turn` per turn in the order of ``turns.jsonl``, and :func:`end` (the counts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from lqai_verify import record
from lqai_verify.passage_html import excerpt_around, passage_in_context_html
from lqai_verify.statuses import StatusInWords, review_count, status_in_words, verdict_in_words
from lqai_verify.verdict import UNCHECKED, case_claim_status, statute_claim_status, verdict_of
from lqai_verify.verification.page_cites import cited_with_pin, page_cite

#: Characters of the source shown on each side of a quoted passage (as on the trace pages' cards).
CONTEXT_CHARS = 120

_STYLE = """\
  body { font: 11pt/1.45 Georgia, "Times New Roman", serif; color: #111; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; }
  h1 { font-size: 18pt; margin-bottom: .2rem; }
  h2 { font-size: 13pt; margin: 0 0 .3rem; }
  h3 { font-size: 11pt; margin: .8rem 0 .3rem; }
  .meta, .small { color: #444; font-size: 9.5pt; }
  .warning { border: 2px solid #a00; color: #a00; padding: .5rem .8rem; font-weight: bold; margin: 1rem 0; }
  .turn { border-top: 1px solid #999; padding-top: .8rem; margin-top: 1.2rem; break-inside: avoid-page; }
  .verdict { display: inline-block; padding: 0 .4rem; border: 1px solid currentColor; font-family: sans-serif; font-weight: bold; }
  .verdict-ok, .status-ok { color: #1b5e20; }
  .verdict-review, .status-review { color: #7a4d00; }
  .verdict-fail, .status-fail { color: #a00; }
  .verdict-info, .status-info { color: #444; }
  ol.claims > li { margin: .6rem 0; break-inside: avoid-page; }
  .passage-in-context { white-space: pre-wrap; border-left: 3px solid #bbb; padding-left: .6rem; margin: .3rem 0; }
  .passage-in-context mark { background: #fff1a8; color: inherit; text-decoration: underline solid #8a6d00; print-color-adjust: exact; -webkit-print-color-adjust: exact; }
  .passage-in-context .alteration { outline: 1px dotted #6b4b00; }
  .passage-in-context del { color: #7a1f1f; }
  .passage-in-context ins { color: #0b4f1c; font-weight: bold; }
  ol.alterations, ul.context-flags { font-size: 9.5pt; margin: .2rem 0 0 1.2rem; padding: 0; }
  .late { color: #7a4b00; font-weight: bold; }
  .unsealed { color: #a00; font-weight: bold; }
  blockquote { margin: .3rem 0 .3rem 1rem; padding-left: .6rem; border-left: 3px solid #bbb; }
  table { border-collapse: collapse; width: 100%; font-size: 9.5pt; margin: .3rem 0; }
  th, td { border: 1px solid #bbb; padding: .2rem .4rem; text-align: left; vertical-align: top; }
  th { background: #eee; }
  .text { white-space: pre-wrap; }
  .certificate { border: 1px solid #999; padding: .6rem .8rem; margin: .3rem 0 .8rem; }
  @media print { body { margin: 0; max-width: none; } .turn { break-inside: auto; } }
"""  # noqa: E501 - one CSS rule a line


def _e(value: Any) -> str:
    return escape(str(value))


def _time(iso: Any) -> str:
    """``2026-12-03T11:06:45.123456+00:00`` as ``2026-12-03 11:06:45`` (UTC)."""
    return _e(str(iso)[:19].replace("T", " "))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def subject(manifest: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """What the export is of: ``("matter", {"id", "name"})`` or, for a chat outside any matter, ``("chat", {"id",
    "title"})``."""
    matter = manifest.get("matter")
    return ("matter", matter) if matter is not None else ("chat", manifest["chat"])


def start(manifest: Mapping[str, Any]) -> str:
    """The page's head, title and opening: what the export is of, when it was made, the key that signed it and
    where the chain ends (for ``--extends``), from the manifest's fields (its ``counts`` and ``files`` unread)."""
    kind, named = subject(manifest)
    name = _e(named.get("name") if kind == "matter" else named.get("title"))
    fingerprint = _e(manifest["signing_key"])
    head = manifest["chain_head"]
    chain = "" if head is None else f" · chain of {_plural(head['sequence'], 'seal')}"
    outside = " (outside any matter)" if kind == "chat" else ""
    development = (
        '<p class="warning">Signed with a development key derived from the server\'s SECRET_KEY (no '
        "LQAI_LEDGER_KEY was set): this export proves nothing about its origin.</p>\n"
        if manifest["development_key"]
        else ""
    )
    extends = (
        ""
        if head is None
        else f" The chain ends at seal #{_e(head['sequence'])}, digest <code>{_e(head['seal_sha256'])}</code>: keep "
        "this export, and a later one can be checked to hold this record unchanged with <code>--extends</code> and "
        "this file."
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>Record of {name}</title>\n<style>\n{_STYLE}</style>\n</head>\n<body>\n"
        f"<h1>Record of the {kind} “{name}”</h1>\n"
        f'<p class="meta">{kind.capitalize()} {_e(named.get("id"))}{outside} · exported '
        f"{_time(manifest['exported_at'])} UTC · verification rules version {_e(manifest['verifier_version'])}<br>\n"
        f"Signed by the ledger key with fingerprint <code>{fingerprint}</code>{chain}</p>\n"
        f"{development}"
        '<p class="small">Each turn below is sealed: a digest of its question, answer, verdict and every quote, case '
        "citation and consulted source, chained to the turn before it and signed. The bundle this page came from can "
        f"be checked offline with <code>python -m lqai_verify BUNDLE.zip --public-key {fingerprint}</code>, which "
        "re-verifies every quote against its passage and renders this page again from the data it checked: it must "
        f"be this page, byte for byte.{extends}</p>\n"
    )


def turn(
    line: Mapping[str, Any],
    *,
    seal: Mapping[str, Any] | None,
    rows: Sequence[Mapping[str, Any]],
    passages: Mapping[str, Mapping[str, Any]],
    decisions: Sequence[Mapping[str, Any]] = (),
    certificates: Sequence[Mapping[str, Any]] = (),
) -> str:
    """One turn: ``line`` is its line of ``turns.jsonl`` (its turn object, answer and chat title), ``seal`` its
    latest seal if that seal is of its last finalize (else the turn reads NOT SEALED), ``rows`` its rows as in
    ``rows.jsonl``, ``passages`` the bundled passages by row key (:func:`lqai_verify.record.row_key`), for each
    quote's source, pages and passage in context. The verdict reads as the trace pages say it (a turn sealed
    under earlier rules by its claims, saying so), with the count of claims to review; each quote is a card as
    on the pages: its pin cite, its status in words, its passage in context with every alteration marked and
    every omission spelled out. Then, if people reviewed it, each of its ``decisions`` (as in ``decisions.jsonl``,
    in chain order: who, when, what, the source consulted, a correction and a note; one superseded by a later
    decision on its claim says so) and each of its ``certificates`` (as in ``certificates.jsonl``) with its text."""
    facts = line["turn"]
    title = line.get("chat_title") or ""
    quotes = sorted((r for r in rows if r["table"] in record.QUOTE_TABLES), key=lambda r: r["position"])
    cases = sorted((r for r in rows if r["table"] == record.CASE), key=lambda r: r["answer_offset_start"])
    statutes = sorted((r for r in rows if r["table"] == record.STATUTE), key=lambda r: r["position"])
    codes = [
        *(str(r["method"]) for r in quotes),
        *(_case_status(r) for r in cases),
        *(_statute_status(r) for r in statutes),
    ]
    question = facts.get("question")
    parts = [
        f'<section class="turn" id="turn-{_e(facts["message"])}">\n'
        f"<h2>{'Chat “' + _e(title) + '” — ' if title else 'Untitled chat — '}turn of "
        f"{_time(facts['finalized_at'])} UTC</h2>\n"
        f"{_verdict(facts, quotes=quotes, cases=[*cases, *statutes], to_review=review_count(codes))}"
        f'<p class="meta">Status {_e(str(facts.get("status")).capitalize())}'
        f"{' · model ' + _e(facts['model_name']) if facts.get('model_name') else ''} ·\n{_seal(seal)}<br>\n"
        f'<span class="small">turn {_e(facts["message"])}</span></p>\n'
        + (
            f'<h3>Question</h3>\n<blockquote class="text">{_e(question)}</blockquote>\n'
            if question
            else '<h3>Question</h3>\n<p class="small">Asked before questions were recorded with their answers.</p>\n'
        )
        + f'<h3>Answer</h3>\n<div class="text">{_e(line.get("answer", ""))}</div>\n'
    ]
    if quotes:
        cards = "".join(_quote_card(number, row, passages) for number, row in enumerate(quotes, start=1))
        parts.append(f'<h3>Quotes ({len(quotes)})</h3>\n<ol class="claims">\n{cards}</ol>\n')
    parts.append(
        _table(
            "Case citations",
            ("Citation", "Case name as written", "Status", "Detail"),
            [
                (
                    f"{_e(r['citation'])}{_pin(r)}",
                    _e(r.get("case_name") or "—"),
                    _words(status_in_words(_case_status(r))),
                    _e(r.get("detail") or "—"),
                )
                for r in cases
            ],
        )
    )
    parts.append(_statutes(statutes, passages))
    tools = sorted((r for r in rows if r["table"] == record.TOOL), key=lambda r: r["position"])
    parts.append(
        _table(
            "Sources consulted",
            ("Source", "Tool", "Provider"),
            [
                (f"{_e(r['label'])}{_small(r.get('subtitle'))}", _e(r["tool"]), _e(r.get("provider") or "—"))
                for r in tools
            ],
        )
    )
    parts.append(_decisions(decisions, rows))
    parts.append(_certificates(certificates))
    parts.append("</section>\n")
    return "".join(parts)


_DECISION_WORDS = {"confirmed": "confirmed", "corrected": "corrected", "removed": "removed (not to be filed)"}


def _claim_named(key: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """The claim a decision is about, as the reader knows it: its quote or its citation."""
    for row in rows:
        if record.row_key(row) == key:
            if row.get("quote"):
                return f"quote “{row['quote']}”"
            return f"citation {row['citation']}" + (f", {row['pin']}" if row.get("pin") else "")
    return key


def _decisions(decisions: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> str:
    """The people's decisions on the turn's claims, in the order they were made; nothing when there is none."""
    last = {decision["claim"]: decision["id"] for decision in decisions}
    cells = []
    for decision in decisions:
        what = _e(_DECISION_WORDS.get(str(decision["decision"]), decision["decision"]))
        if decision["corrected_text"]:
            what += f"<br>to “{_e(decision['corrected_text'])}”" + _small(
                f"machine's check of it: {decision['correction_check'].get('status', '—')}"
            )
        if last[decision["claim"]] != decision["id"]:
            what += _small("superseded by a later decision")
        cells.append(
            (
                _e(_claim_named(decision["claim"], rows)),
                what,
                f"{_e(decision['reviewer'])} ({_e(decision['role'])}), {_time(decision['decided_at'])} UTC",
                _e(decision["source"] or "—"),
                _e(decision["note"] or "—"),
            )
        )
    return _table("Decisions by people", ("Claim", "Decision", "By, when", "Source consulted", "Note"), cells)


def _certificates(certificates: Sequence[Mapping[str, Any]]) -> str:
    """The turn's certificates of verification, each with its sealed text; nothing when there is none."""
    if not certificates:
        return ""
    parts = [f"<h3>Certificates of verification ({len(certificates)})</h3>\n"]
    for certificate in certificates:
        parts.append(
            f'<p class="meta">Certificate {_e(certificate["id"])} issued by {_e(certificate["issuer"])} '
            f"({_e(certificate['role'])}), {_time(certificate['issued_at'])} UTC · digest "
            f"<code>{_e(certificate['seal_sha256'])}</code></p>\n"
            f'<div class="text certificate">{_e(certificate["text"])}</div>\n'
        )
    return "".join(parts)


def _verdict(
    facts: Mapping[str, Any], *, quotes: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]], to_review: int
) -> str:
    """The verdict in words, as the trace pages say it, with the count of claims to review. ``cases``: the case
    citation and statute rows."""
    claims = verdict_of(methods={str(r["method"]) for r in quotes}, case_statuses={_claim_status(r) for r in cases})
    words = verdict_in_words(facts.get("verdict"), status=str(facts.get("status")), claims=claims)
    earlier = f" ({_e(words.earlier)}.)" if words.earlier else ""
    count = f" {_plural(to_review, 'claim')} to review." if to_review else ""
    return (
        f'<p class="verdict-line verdict-{_e(words.tone)}"><span class="verdict">{_e(words.symbol)} Verdict: '
        f"{_e(words.title)}</span> — {_e(words.explanation)}.{earlier}{count}</p>\n"
    )


def _words(status: StatusInWords) -> str:
    return f'<span class="status-{_e(status.tone)}">{_e(status.symbol)} {_e(status.words)}</span>'


def _pin(row: Mapping[str, Any]) -> str:
    """A case citation's pin cite as written and how it fared, on a line of its own; nothing without one."""
    if not row.get("pin"):
        return ""
    fared = _PIN_WORDS.get(str(row.get("pin_status") or ""), "not checked")
    return _small(f"at {row['pin']}: {fared}")


_PIN_WORDS = {
    "within": "within the opinion's pages",
    "outside": "outside the opinion's pages",
    "unchecked": "not checked (the opinion's last page is unknown)",
}


def _quote_card(number: int, row: Mapping[str, Any], passages: Mapping[str, Mapping[str, Any]]) -> str:
    """One quote as the trace pages' card shows it: where it is from (its pin cite), its status in words, the
    quote, and its passage in context (or why it failed)."""
    status = status_in_words(
        str(row["method"]), alterations=row.get("alterations") or (), reason=str(row.get("unverified_reason") or "")
    )
    passage = passages.get(record.row_key(row)) if row.get("offset_start") is not None else None
    confidence = f", confidence {_e(row['confidence'])}" if row.get("confidence") is not None else ""
    head = f'<li class="claim">\n<p><strong>Claim {number}</strong> · {_words(status)}{confidence}</p>\n'
    if row["method"] == UNCHECKED:  # nothing could check it: its status says why, and there is no passage
        return f'{head}<blockquote class="text">“{_e(row["quote"])}”</blockquote>\n</li>\n'
    if row["method"] == "unverified" or passage is None:
        why = row.get("unverified_reason") or "no source of this matter holds it"
        return (
            f'{head}<blockquote class="text">“{_e(row["quote"])}”</blockquote>\n'
            f"<p>Why it failed: {_e(why)}.</p>\n</li>\n"
        )
    undigested = "" if row.get("passage_sha256") else _small("no passage digest: stored before digests were recorded")
    return (
        f"{head}<p>Quoted from {_e(_cited(row, passage))}{undigested}</p>\n"
        f'<blockquote class="text">“{_e(row["quote"])}”</blockquote>\n'
        f"{_in_context(row, passage)}\n</li>\n"
    )


def _cited(row: Mapping[str, Any], passage: Mapping[str, Any]) -> str:
    """The source and where the quote is in it, as a lawyer cites it: a case's pin cite after its first page
    (``590 F. Supp. 3d 850, 870 (M.D.N.C. 2022)``), else the source then :func:`_where`."""
    title, where = str(passage["source_title"]), _where(row, passage)
    return cited_with_pin(title, where)


def _where(row: Mapping[str, Any], passage: Mapping[str, Any]) -> str:
    """Where the quote is in its source: its pin cite as the export wrote it (a bundle written before pin cites:
    the page cite of the pages its passage spans), and character offsets only when no page is known."""
    cite = passage["pin_cite"] if "pin_cite" in passage else page_cite(passage.get("pages"))
    return cite or f"characters {row['offset_start']}\u2013{row['offset_end']} (no page of the source is known)"


def _in_context(row: Mapping[str, Any], passage: Mapping[str, Any]) -> str:
    """The passage in the bundled text around it (the pages' drawing, without offsets), widened to show the
    whole of what each alteration stands for or omits."""
    alterations = row.get("alterations") or []
    flags = row.get("context_flags") or []
    reach = [edge for a in [*alterations, *flags] for edge in (a["source_start"], a["source_end"])]
    excerpt = excerpt_around(
        passage_start=row["offset_start"],
        passage_end=row["offset_end"],
        text=str(passage["excerpt"]),
        text_start=int(passage["excerpt_start"]),
        context_chars=CONTEXT_CHARS,
        reach=reach,
    )
    return passage_in_context_html(excerpt, alterations, offsets=False, context_flags=flags)


def _table(heading: str, columns: Sequence[str], cells: Sequence[Sequence[str]]) -> str:
    """A titled table of ``cells`` (already HTML), one row each, with its count in the title; nothing when
    there is no row."""
    if not cells:
        return ""
    head = "".join(f"<th>{column}</th>" for column in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>\n" for row in cells)
    return f"<h3>{heading} ({len(cells)})</h3>\n<table>\n<tr>{head}</tr>\n{body}</table>\n"


def _small(text: Any) -> str:
    """``text`` on a line of its own, in small type; nothing when there is none."""
    return f'<br><span class="small">{_e(text)}</span>' if text else ""


def _seal(seal: Mapping[str, Any] | None) -> str:
    if seal is None:
        return '<span class="unsealed">NOT SEALED</span>'
    late = ' <span class="late">(sealed late, after the turn was finalized)</span>' if seal["late"] else ""
    return f"seal #{_e(seal['sequence'])}, sealed {_time(seal['sealed_at'])} UTC{late}"


def end(*, turns: int, rows: int, late: int, unsealed: int) -> str:
    """The closing counts and the end of the page."""
    late_part = f", {late} sealed late" if late else ""
    unsealed_part = f', <span class="unsealed">{unsealed} not sealed</span>' if unsealed else ""
    return (
        f'<p class="meta" style="margin-top:2rem">{_plural(turns, "turn")}, {_plural(rows, "recorded row")}'
        f"{late_part}{unsealed_part}.</p>\n</body>\n</html>\n"
    )


def differences(report: bytes, parts: Sequence[tuple[str, str]]) -> list[str]:
    """How ``report`` (the bundle's ``report.html``) differs from the report rendered from the data, given as
    ``(what, html)`` parts in order: the first part it does not match, named, or text past its end."""
    offset = 0
    for what, html in parts:
        expected = html.encode()
        if report[offset : offset + len(expected)] != expected:
            return [f"report.html: {what} does not read as the data files say (the page was changed or made otherwise)"]
        offset += len(expected)
    if offset != len(report):
        return ["report.html: it goes on past the end of the report of the data files"]
    return []


def _statutes(rows: Sequence[Mapping[str, Any]], passages: Mapping[str, Mapping[str, Any]]) -> str:
    """A turn's statute and regulation citations, cited as a lawyer does with the release checked
    (``9 U.S.C. § 2 (Online@117-80)``), and the quotes attributed to them, each with its status in words and its
    reason; a quote found in a section's text with its passage in that text, in context. Nothing for a turn
    without any (every turn before statute rows were recorded reads as it did)."""
    citations = [r for r in rows if r["kind"] == "citation"]
    quotes = [r for r in rows if r["kind"] == "quote"]
    html = _table(
        "Statutes and regulations cited",
        ("Citation", "Release checked", "Status", "Why"),
        [
            (
                _e(r.get("cited") or r["citation"]) + _small(f"as written: {r['citation']}" if r.get("cited") else ""),
                _release(r),
                _words(status_in_words(_statute_status(r))),
                _e(r["reason"]),
            )
            for r in citations
        ],
    )
    if quotes:
        cards = "".join(_statute_quote_card(number, r, passages) for number, r in enumerate(quotes, start=1))
        html += f'<h3>Statute quotes ({len(quotes)})</h3>\n<ol class="claims">\n{cards}</ol>\n'
    return html


def _release(row: Mapping[str, Any]) -> str:
    """The release a statute row was checked against, in words: its label and whether it is an official edition."""
    if not row.get("release_point"):
        return "none loaded"
    official = {True: "official", False: "not an official edition"}.get(bool(row.get("release_official")), "")
    if row.get("release_official") is None:
        official = ""
    return _e(row.get("release_label") or row["release_point"]) + _small(official)


def _statute_quote_card(number: int, row: Mapping[str, Any], passages: Mapping[str, Mapping[str, Any]]) -> str:
    """One statute quote: what it cites, its status in words, the quote, and its passage in the section's text
    (or why it was not found)."""
    status = status_in_words(_statute_status(row), alterations=row.get("alterations") or ())
    passage = passages.get(record.row_key(row)) if row.get("offset_start") is not None else None
    head = (
        f'<li class="claim">\n<p><strong>Statute quote {number}</strong> · {_words(status)} · cites '
        f"{_e(row.get('cited') or row['citation'])}</p>\n"
        f'<blockquote class="text">“{_e(row["quote"])}”</blockquote>\n<p>{_e(row["reason"])}.</p>\n'
    )
    if passage is None:
        return f"{head}</li>\n"
    return f"{head}{_in_context(row, passage)}\n</li>\n"


def _statute_status(row: Mapping[str, Any]) -> str:
    """A statute row's claim status (``statute_verified``, ``statute_quote_failed``, ...)."""
    return statute_claim_status(str(row["kind"]), str(row["status"]))


def _claim_status(row: Mapping[str, Any]) -> str:
    """A case citation's or a statute row's claim status, as the verdict counts it."""
    return _statute_status(row) if row["table"] == record.STATUTE else _case_status(row)


def _case_status(row: Mapping[str, Any]) -> str:
    """A case citation row's status as the verdict counts it (a row of a bundle before pin statuses has none)."""
    return case_claim_status(str(row["status"]), str(row.get("pin_status") or ""))
