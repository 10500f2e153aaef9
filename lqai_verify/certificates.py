"""The certificate of verification of a turn (issue 52, item 3), shared by the server (``citations.certificates``)
and the offline verifier (``lqai_verify.bundle``). Pure: no Django.

A certificate is a ``statement`` (plain data: the turn, each of its claims with what the machine found and, if a
person decided on it, that sealed decision named by its id and digest, what nobody checked, the court's wording)
and its ``text``, rendered from the statement by :func:`render_text` from a court's template (:data:`COURTS`).
Certificates of a matter form a chain of their own (``certificates:<the turn chain>``); each one's payload
(:func:`certificate_payload`) is its fields and its link in canonical JSON, whose digest and Ed25519 signature are
stored with it. The offline verifier checks the chain (:func:`chain_problems`), that the text is the statement's
rendering, and that every decision the statement names is a decision of the bundle with the same digest and the
same words (:func:`bundle_problems`). Byte by byte: docs/export.md.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lqai_verify import chains
from lqai_verify.record import canonical_json, sha256_hex

CERTIFICATE_FORMAT = "lqai-certificate/1"
CERTIFICATES_CHAIN_PREFIX = "certificates:"

CERTIFICATE_FIELDS = ("id", "message", "turn_seal_sha256", "issuer", "role", "issued_at", "statement", "text")
LINK_FIELDS = ("chain", "sequence", "previous_sha256", "key_fingerprint")
# The fields of a decision a certificate repeats, as sealed in the decision (``lqai_verify.decisions``).
DECISION_FIELDS_NAMED = (
    "id",
    "seal_sha256",
    "decision",
    "source",
    "corrected_text",
    "note",
    "reviewer",
    "role",
    "decided_at",
)


@dataclass(frozen=True, slots=True)
class Court:
    """A court's template: its name and the certification it asks for, in the words of its standing order."""

    key: str
    name: str
    certification: str


DEFAULT_COURT = "default"
# The default is drawn from the standing orders' common language (the first, N.D. Tex. 2023: language drafted by
# generative AI "checked for accuracy, using print reporters or traditional legal databases, by a human being").
COURTS: dict[str, Court] = {
    court.key: court
    for court in (
        Court(
            DEFAULT_COURT,
            "No court-specific order (the standing orders' common wording)",
            "The undersigned certifies that each quotation and citation listed under 2 as confirmed or corrected "
            "was checked for accuracy by a human being, against the source that person names there, and that each "
            "listed as removed will not be filed. No other part of the answer is certified: part 3 lists what no "
            "person checked.",
        ),
        Court(
            "txnd",
            "United States District Court for the Northern District of Texas",
            "The undersigned certifies that the quotations and citations listed under 2 as confirmed or corrected, "
            "drafted with a generative artificial intelligence tool, were checked for accuracy, using print "
            "reporters or traditional legal databases, by a human being, who names the source used beside each; "
            "those listed as removed will not be filed. No other part of the answer is certified: part 3 lists "
            "what no person checked.",
        ),
    )
}


def certificates_chain(turn_chain: str) -> str:
    """The chain a matter's (or matter-less chat's) certificates go to, from its turns' chain."""
    return f"{CERTIFICATES_CHAIN_PREFIX}{turn_chain}"


def certificate_payload(certificate: Mapping[str, Any]) -> bytes:
    """The bytes a certificate's digest and signature cover: its fields and its link, with the format."""
    return canonical_json(
        {"format": CERTIFICATE_FORMAT, **{name: certificate[name] for name in (*CERTIFICATE_FIELDS, *LINK_FIELDS)}}
    )


def certificate_sha256(certificate: Mapping[str, Any]) -> str:
    return sha256_hex(certificate_payload(certificate))


# The claims that quote a document or an opinion (the others cite a case, a statute or a regulation).
QUOTE_KINDS = ("kb_quote", "caselaw_quote")

_DECISION_WORDS = {
    "confirmed": "CONFIRMED against the source",
    "corrected": "CORRECTED",
    "removed": "REMOVED: it will not be filed",
}


def when(value: str) -> str:
    """A sealed ISO 8601 time in words a reader takes in at a glance: ``5 December 2026, 14:12:03 UTC``."""
    moment = datetime.datetime.fromisoformat(value).astimezone(datetime.UTC)
    return f"{moment.day} {moment:%B %Y, %H:%M:%S} UTC"


def _claim_lines(claim: Mapping[str, Any]) -> list[str]:
    lines = [f"{claim['number']}. {claim['kind_words']}: {claim['text']}"]
    if claim["kind"] == "case_citation":
        lines.append(f"   Case found at this citation: {claim['source']}")
    elif claim["kind"] in QUOTE_KINDS:
        lines.append(f"   Source named: {claim['source']}")
    else:
        lines.append(f"   Checked against: {claim['source']}")
    lines.append(f"   Machine's check: {claim['machine']}")
    decision = claim.get("decision")
    if decision is not None:
        lines.append(
            f"   Person's decision: {_DECISION_WORDS[decision['decision']]}, by {decision['reviewer']} "
            f"({decision['role']}), {when(decision['decided_at'])}"
        )
        if decision["source"]:
            lines.append(f"   Source the person consulted: {decision['source']}")
        if decision["corrected_text"]:
            lines.append(f"   Corrected to: {decision['corrected_text']}")
            lines.append(f"   Machine's check of the correction: {claim['correction_check']}")
        if decision["note"]:
            lines.append(f"   Note: {decision['note']}")
        lines.append(f"   Sealed decision {decision['id']} (SHA-256 {decision['seal_sha256']})")
    return lines


def render_text(statement: Mapping[str, Any], *, issuer: str, role: str, issued_at: str, key_fingerprint: str) -> str:
    """The certificate's text, in plain words, from its ``statement`` and who issued it when: the court's
    certification (and the judge's wording, if the matter has one), then 1 what the machine checked and against
    what, 2 what each person checked and decided and when, 3 what nobody checked, then the signature line.
    Deterministic: the offline verifier renders it again and compares."""
    subject = statement["subject"]
    court = statement["court"]
    people = [claim for claim in statement["claims"] if claim.get("decision") is not None]
    machine_only = [claim for claim in statement["claims"] if claim.get("decision") is None]
    lines = [
        "CERTIFICATE OF VERIFICATION",
        f"Date: {when(issued_at)}",
        f"Court: {court['name']}",
        f"Matter: {subject['matter']}" if subject["matter"] else f"Chat: {subject['chat']}",
        f"Answer (turn {subject['turn']}), given {when(subject['answered_at'])}, to the question: "
        f"{subject['question']}",
        f"Record of the answer: seal #{subject['turn_seal_sequence']}, SHA-256 {subject['turn_seal_sha256']}",
        "",
        court["certification"],
    ]
    if statement["judge_wording"]:
        lines += ["", "As the assigned judge requires:", statement["judge_wording"]]
    lines += [
        "",
        "1. WHAT THE MACHINE CHECKED",
        f"The machine (lqai, verification rules {statement['verifier_version']}) compared each quotation with the "
        "text lqai holds of the source it names (a document of the matter, or a court opinion), looked each "
        "case citation up in the opinions lqai holds and, where it is configured to, at CourtListener, and each "
        "statute or regulation cited or quoted in the release of the code its authority library holds. It found "
        f"{len(statement['claims'])} claim(s) in the answer; what it found of each:",
    ]
    for claim in statement["claims"]:
        what = (
            f"{claim['kind_words'].lower()}, {claim['source']}"
            if claim["kind"] in QUOTE_KINDS
            else f"{claim['kind_words'].lower()}, {claim['text']}"
        )
        lines.append(f"- claim {claim['number']} ({what}): {claim['machine']}")
    lines += ["", "2. WHAT A PERSON CHECKED AND DECIDED"]
    if people:
        for claim in people:
            lines += _claim_lines(claim)
    else:
        lines.append("Nobody decided on any claim of this answer.")
    lines += ["", "3. WHAT NOBODY CHECKED"]
    if machine_only:
        lines.append(
            "These claims were checked by the machine only; no person checked them, and this certificate does "
            "not certify them:"
        )
        for claim in machine_only:
            lines += _claim_lines(claim)
    lines += ["", *statement["not_checked"]]
    lines += [
        "",
        f"Issued by {issuer} ({role}), {when(issued_at)}.",
        f"Signed with the record's key {key_fingerprint} (Ed25519); sealed in the matter's record. Check it with "
        "the matter's export: python -m lqai_verify <export.zip>.",
    ]
    return "\n".join(lines) + "\n"


# What a certificate always says nobody checked: lqai checks quotations and citations, never the propositions.
NOT_CHECKED = (
    "Nobody, machine or person, checked through lqai that the sources say what the answer says they say beyond "
    "the words quoted, that a case is still good law, or any sentence of the answer that is not a quotation or a "
    "citation listed above.",
)


#: A certificate as a link of its chain (:mod:`lqai_verify.chains`).
CERTIFICATE_LINK = chains.LinkKind("certificate", sha256=certificate_sha256, payload=certificate_payload)


def chain_problems(
    certificates: Iterable[Mapping[str, Any]],
    *,
    key_of: Callable[[str], Any],
    after: Mapping[str, Any] | None = None,
) -> Iterable[tuple[Mapping[str, Any], str]]:
    """Each problem of one chain's ``certificates`` (in sequence order), as ``(certificate, what)``: a broken
    link, a digest that is not its payload's, a signature not valid or by a key ``key_of(fingerprint)`` does not
    know (:func:`lqai_verify.chains.link_problems`), a text that is not its statement's rendering."""
    certificates = list(certificates)
    yield from chains.link_problems(certificates, kind=CERTIFICATE_LINK, key_of=key_of, after=after)
    for certificate in certificates:
        if _rendered(certificate) != certificate["text"]:
            yield certificate, "its text is not what its statement says"


def _rendered(certificate: Mapping[str, Any]) -> str | None:
    """The certificate's text rendered again from its statement; None when the statement cannot be rendered."""
    try:
        return render_text(
            certificate["statement"],
            issuer=certificate["issuer"],
            role=certificate["role"],
            issued_at=certificate["issued_at"],
            key_fingerprint=certificate["key_fingerprint"],
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        return None


def named_decisions(statement: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The decisions a certificate's statement names, each with its claim (``<table>:<id>``)."""
    return [(claim["claim"], claim["decision"]) for claim in statement["claims"] if claim.get("decision") is not None]


def decision_differences(named: Mapping[str, Any], claim: str, held: Mapping[str, Any] | None) -> list[str]:
    """How a decision a certificate names differs from the sealed decision ``held`` (``None``: not held)."""
    if held is None:
        return [f"it names decision {named.get('id')}, which the record does not hold"]
    differences = [name for name in DECISION_FIELDS_NAMED if named.get(name) != held.get(name) and name != "id"] + (
        ["claim"] if held.get("claim") != claim else []
    )
    if differences:
        return [f"it states decision {named['id']} otherwise than sealed ({', '.join(differences)})"]
    return []


_LINE_SHAPE: dict[str, type | tuple[type, ...]] = {
    **dict.fromkeys(CERTIFICATE_FIELDS, str),
    "statement": dict,
    **chains.LINK_SHAPE,
}


def bundle_problems(
    lines: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    turn_chain: str,
    seal_keys: Mapping[str, Any],
    sealed_turns: Mapping[str, set[str]],
    decisions: Mapping[str, Mapping[str, Any]],
    held: dict[str, Mapping[str, Any]] | None = None,
) -> tuple[int, list[str]]:
    """The offline verifier's check of an export's ``certificates.jsonl``: each line well formed, of the matter's
    certificates chain, in order, its digest, text, link and signature holding (by a key of ``seal_keys``),
    about a turn sealed in the bundle with the seal it names (``sealed_turns``: each turn's seal digests), and
    naming only decisions the bundle holds (``decisions``: the decisions that held, by id) as they were sealed.
    Returns how many certificates held, and the problems, each naming its line and certificate; ``held``, if
    given, is filled with the certificates that held, by id."""
    well_formed, problems = chains.well_formed_lines(
        lines, file="certificates.jsonl", noun="certificate", chain=certificates_chain(turn_chain), shape=_LINE_SHAPE
    )
    by_line = {id(line): number for number, line in well_formed}
    bad: set[int] = set()
    for line, what in chain_problems([line for _, line in well_formed], key_of=seal_keys.get):
        bad.add(id(line))
        problems.append(f"certificates.jsonl line {by_line[id(line)]} (certificate {line['id']}): {what}")
    for number, line in well_formed:
        where = f"certificates.jsonl line {number} (certificate {line['id']})"
        found: list[str] = []
        if line["turn_seal_sha256"] not in sealed_turns.get(line["message"], set()):
            found.append(f"the seal it names of turn {line['message']} is not in this bundle")
        try:
            for claim, named in named_decisions(line["statement"]):
                found += decision_differences(named, claim, decisions.get(str(named.get("id"))))
        except (KeyError, TypeError, AttributeError):
            found.append("its statement is malformed")
        if found:
            bad.add(id(line))
            problems += [f"{where}: {what}" for what in found]
    if held is not None:
        held.update((line["id"], line) for _, line in well_formed if id(line) not in bad)
    return len(well_formed) - len(bad), problems
