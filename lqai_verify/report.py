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
from lqai_verify.verification.page_cites import page_cite

_STYLE = """\
  body { font: 11pt/1.45 Georgia, "Times New Roman", serif; color: #111; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; }
  h1 { font-size: 18pt; margin-bottom: .2rem; }
  h2 { font-size: 13pt; margin: 0 0 .3rem; }
  h3 { font-size: 11pt; margin: .8rem 0 .3rem; }
  .meta, .small { color: #444; font-size: 9.5pt; }
  .warning { border: 2px solid #a00; color: #a00; padding: .5rem .8rem; font-weight: bold; margin: 1rem 0; }
  .turn { border-top: 1px solid #999; padding-top: .8rem; margin-top: 1.2rem; break-inside: avoid-page; }
  .verdict { display: inline-block; padding: 0 .4rem; border: 1px solid #333; font-family: sans-serif; font-size: 9pt; }
  .verdict-fail { border-color: #a00; color: #a00; }
  .late { color: #7a4b00; font-weight: bold; }
  .unsealed { color: #a00; font-weight: bold; }
  blockquote { margin: .3rem 0 .3rem 1rem; padding-left: .6rem; border-left: 3px solid #bbb; }
  table { border-collapse: collapse; width: 100%; font-size: 9.5pt; margin: .3rem 0; }
  th, td { border: 1px solid #bbb; padding: .2rem .4rem; text-align: left; vertical-align: top; }
  th { background: #eee; }
  .text { white-space: pre-wrap; }
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
) -> str:
    """One turn: ``line`` is its line of ``turns.jsonl`` (its turn object, answer and chat title), ``seal`` its
    latest seal if that seal is of its last finalize (else the turn reads NOT SEALED), ``rows`` its rows as in
    ``rows.jsonl``, ``passages`` the bundled passages by row key (:func:`lqai_verify.record.row_key`), for each
    quote's source title and pages."""
    facts = line["turn"]
    title = line.get("chat_title") or ""
    verdict = facts.get("verdict") or "none"
    parts = [
        f'<section class="turn" id="turn-{_e(facts["message"])}">\n'
        f"<h2>{_e(title) + ' — ' if title else ''}turn of {_time(facts['finalized_at'])} UTC</h2>\n"
        f'<p class="meta">Verdict <span class="verdict{" verdict-fail" if verdict == "fail" else ""}">{_e(verdict)}'
        f"</span> · status {_e(str(facts.get('status')).capitalize())}"
        f"{' · model ' + _e(facts['model_name']) if facts.get('model_name') else ''} ·\n{_seal(seal)}<br>\n"
        f'<span class="small">turn {_e(facts["message"])}</span></p>\n'
        f'<h3>Question</h3>\n<blockquote class="text">{_e(facts.get("question") or "(no question recorded)")}'
        "</blockquote>\n"
        f'<h3>Answer</h3>\n<div class="text">{_e(line.get("answer", ""))}</div>\n'
    ]
    quotes = sorted((r for r in rows if r["table"] in record.QUOTE_TABLES), key=lambda r: r["position"])
    parts.append(
        _table(
            "Quotes",
            ("#", "Quote", "Source", "Status", "Alterations"),
            [
                (str(number), f"“{_e(row['quote'])}”", _source(row, passages), _status(row), _alterations(row))
                for number, row in enumerate(quotes, start=1)
            ],
        )
    )
    cases = sorted((r for r in rows if r["table"] == record.CASE), key=lambda r: r["answer_offset_start"])
    parts.append(
        _table(
            "Case citations",
            ("Citation", "Case name as written", "Status", "Detail"),
            [
                (
                    _e(r["citation"]),
                    _e(r.get("case_name") or "—"),
                    _e(str(r["status"]).replace("_", " ")),
                    _e(r.get("detail") or "—"),
                )
                for r in cases
            ],
        )
    )
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
    parts.append("</section>\n")
    return "".join(parts)


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


def _source(row: Mapping[str, Any], passages: Mapping[str, Mapping[str, Any]]) -> str:
    passage = passages.get(record.row_key(row)) if row.get("offset_start") is not None else None
    if passage is None:
        return "(no source of this matter)"
    # Its pin cite, as the export wrote it; a bundle written before pin cites cites its pages.
    cite = (passage["pin_cite"] or "") if "pin_cite" in passage else page_cite(passage.get("pages"))
    span = f"characters {row['offset_start']}\u2013{row['offset_end']}"
    return f"{_e(passage['source_title'])}{', ' + _e(cite) if cite else ''}{_small(span)}"


def _status(row: Mapping[str, Any]) -> str:
    if row["method"] == "unverified":
        return f"<strong>failed</strong>: {_e(row.get('unverified_reason') or '')}"
    undigested = "" if row.get("passage_sha256") else _small("no passage digest: stored before digests were recorded")
    return f"{_e(str(row['method']).replace('_', ' '))}, confidence {_e(row['confidence'])}{undigested}"


def _alterations(row: Mapping[str, Any]) -> str:
    alterations = row.get("alterations") or []
    if not alterations:
        return "none"
    return "<br>".join(
        f"{_e(a['kind'])}{' (' + _e(a['detail']) + ')' if a.get('detail') else ''}: “{_e(a['quote_text'])}”"
        for a in alterations
    )


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
