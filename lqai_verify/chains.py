"""What the review decisions' and the certificates' chains share (``lqai_verify.decisions``,
``lqai_verify.certificates``): each is a chain of signed links, each link's payload its fields with its place
(chain, sequence, its predecessor's digest) and key, and each is exported one link a line. Pure: no Django.

:func:`link_problems` checks one chain's links in order (each place, digest and signature);
:func:`well_formed_lines` sorts an export's lines into those of the chain and the problems of the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lqai_verify.record import signature_valid

# The place and seal every link carries beside its own fields.
LINK_SHAPE: dict[str, type | tuple[type, ...]] = {
    "chain": str,
    "sequence": int,
    "previous_sha256": str,
    "key_fingerprint": str,
    "seal_sha256": str,
    "signature": str,
}


@dataclass(frozen=True, slots=True)
class LinkKind:
    """A kind of link: its name in words (``decision``), and its digest and signed payload, recomputed."""

    noun: str
    sha256: Callable[[Mapping[str, Any]], str]
    payload: Callable[[Mapping[str, Any]], bytes]


def link_problems(
    links: Iterable[Mapping[str, Any]],
    *,
    kind: LinkKind,
    key_of: Callable[[str], Any],
    after: Mapping[str, Any] | None = None,
) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Each problem of one chain's ``links`` (in sequence order), as ``(link, what)``: a place that does not follow
    the link before it (``after``: the last of the previous page; none for the chain's first), a digest that is not
    its payload's (the link changed since it was sealed), a signature that is not valid or by a key
    ``key_of(fingerprint)`` does not know (``None``)."""
    previous = after
    noun = kind.noun
    for link in links:
        expected_sequence = 1 if previous is None else previous["sequence"] + 1
        if link["sequence"] != expected_sequence:
            gap = f"{noun}s are missing" if link["sequence"] > expected_sequence else "the chain forks"
            yield link, f"{noun} #{link['sequence']} follows #{expected_sequence - 1}: {gap}"
        elif link["previous_sha256"] != ("" if previous is None else previous["seal_sha256"]):
            yield link, f"its previous digest is not the digest of the {noun} before it"
        if kind.sha256(link) != link["seal_sha256"]:
            yield link, f"its digest is not that of its fields: the {noun} was changed after it was sealed"
        key = key_of(link["key_fingerprint"])
        if key is None:
            yield link, f"signed by an unknown key {link['key_fingerprint'][:16]}..."
        elif not signature_valid(key, link["signature"], kind.payload(link)):
            yield link, "its signature is not valid"
        previous = link


def well_formed_lines(
    lines: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    file: str,
    noun: str,
    chain: str,
    shape: Mapping[str, type | tuple[type, ...]],
) -> tuple[list[tuple[int, Mapping[str, Any]]], list[str]]:
    """The numbered ``lines`` of the export's ``file`` that have every field of ``shape`` with its type and are of
    ``chain``, and the problems of the others, each naming its line."""
    well_formed: list[tuple[int, Mapping[str, Any]]] = []
    problems: list[str] = []
    for number, line in lines:
        where = f"{file} line {number}"
        wrong = [name for name, of_type in shape.items() if not isinstance(line.get(name), of_type)]
        if wrong or isinstance(line.get("sequence"), bool):
            problems.append(f"{where}: malformed: {', '.join(wrong) or 'sequence'} missing or of the wrong type")
        elif line["chain"] != chain:
            problems.append(f"{where} ({noun} {line['id']}): a {noun} of another chain ({line['chain']})")
        else:
            well_formed.append((number, line))
    return well_formed, problems
