"""The sealed form of a person's review decision on a claim (issue 52), shared by the server
(``citations.reviews``, ``verify_ledger``) and the offline verifier (``lqai_verify.bundle``). Pure: no Django.

A decision is one object of :data:`DECISION_FIELDS` (its claim named as its row is in a turn's seal,
``<table>:<id>``). Decisions of a matter form a chain of their own (``reviews:<the turn chain>``): each one's
payload (:func:`decision_payload`) is the decision with its place (chain, sequence, its predecessor's digest) and
the key's fingerprint, in canonical JSON; its digest (``seal_sha256``) and Ed25519 signature cover that payload.
:func:`chain_problems` checks a chain's decisions in order: each digest recomputed (a changed field names the
decision), each link, each signature. Byte by byte: docs/export.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lqai_verify import chains
from lqai_verify.record import canonical_json, sha256_hex

DECISION_FORMAT = "lqai-review-decision/1"
DECISIONS_CHAIN_PREFIX = "reviews:"
DECISIONS = ("confirmed", "corrected", "removed")

# What a decision says, sealed: which claim of which turn, what was decided (with the source checked, the
# corrected text and the machine's check of it, the note), by whom in which role, when, on which seal of the turn.
DECISION_FIELDS = (
    "id",
    "message",
    "claim",
    "decision",
    "source",
    "corrected_text",
    "correction_check",
    "note",
    "reviewer",
    "role",
    "decided_at",
    "turn_seal_sha256",
)
# Where it is in its chain, and with which key it was signed.
LINK_FIELDS = ("chain", "sequence", "previous_sha256", "key_fingerprint")


def decisions_chain(turn_chain: str) -> str:
    """The chain a matter's (or matter-less chat's) decisions go to, from its turns' chain (``matter:<id>``)."""
    return f"{DECISIONS_CHAIN_PREFIX}{turn_chain}"


def decision_payload(decision: Mapping[str, Any]) -> bytes:
    """The bytes a decision's digest and signature cover: its fields and its link, with the format."""
    return canonical_json(
        {"format": DECISION_FORMAT, **{name: decision[name] for name in (*DECISION_FIELDS, *LINK_FIELDS)}}
    )


def decision_sha256(decision: Mapping[str, Any]) -> str:
    return sha256_hex(decision_payload(decision))


#: A decision as a link of its chain (:mod:`lqai_verify.chains`).
DECISION_LINK = chains.LinkKind("decision", sha256=decision_sha256, payload=decision_payload)


def chain_problems(
    decisions: Iterable[Mapping[str, Any]],
    *,
    key_of: Callable[[str], Any],
    after: Mapping[str, Any] | None = None,
) -> Iterable[tuple[Mapping[str, Any], str]]:
    """Each problem of one chain's ``decisions`` (in sequence order), as ``(decision, what)``: a digest that is
    not its payload's (the decision changed since it was sealed), a link that does not follow the decision
    before it (``after``: the last of the previous page; none for the chain's first), a signature that is not
    valid or by a key ``key_of(fingerprint)`` does not know (``None``): :func:`lqai_verify.chains.link_problems`."""
    return chains.link_problems(decisions, kind=DECISION_LINK, key_of=key_of, after=after)


_LINE_SHAPE: dict[str, type | tuple[type, ...]] = {
    **dict.fromkeys(DECISION_FIELDS, str),
    "correction_check": dict,
    **chains.LINK_SHAPE,
}


def bundle_problems(
    lines: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    turn_chain: str,
    seal_keys: Mapping[str, Any],
    sealed_rows: Mapping[str, set[str]],
    held: dict[str, Mapping[str, Any]] | None = None,
) -> tuple[int, list[str]]:
    """The offline verifier's check of an export's ``decisions.jsonl`` (its numbered ``lines``): each line
    well formed, of the matter's decisions chain, in order, its digest, link and signature holding (by a key of
    ``seal_keys``), and about a claim the bundle's seals hold (``sealed_rows``: each sealed turn's row keys).
    Returns how many decisions held, and the problems, each naming its line and decision; ``held``, if given, is
    filled with the decisions that held, by id (what a certificate may name)."""
    well_formed, problems = chains.well_formed_lines(
        lines, file="decisions.jsonl", noun="decision", chain=decisions_chain(turn_chain), shape=_LINE_SHAPE
    )
    by_line = {id(line): number for number, line in well_formed}
    bad: set[int] = set()
    for line, what in chain_problems([line for _, line in well_formed], key_of=seal_keys.get):
        bad.add(id(line))
        problems.append(f"decisions.jsonl line {by_line[id(line)]} (decision {line['id']}): {what}")
    for number, line in well_formed:
        if line["claim"] not in sealed_rows.get(line["message"], set()):
            bad.add(id(line))
            problems.append(
                f"decisions.jsonl line {number} (decision {line['id']}): its claim {line['claim']} is not a sealed "
                f"row of turn {line['message']} in this bundle"
            )
    if held is not None:
        held.update((line["id"], line) for _, line in well_formed if id(line) not in bad)
    return len(well_formed) - len(bad), problems
