"""``python -m lqai_verify BUNDLE.zip [--public-key FINGERPRINT_OR_KEY] [--extends EARLIER.zip] [--max-mb N]``:
check a matter export, or a matter-less chat's, offline (and that it extends an earlier export of the same).

Exit 0: everything verified. 1: a mismatch (each printed with the file, line and turn it concerns).
2: the file is not a bundle (not a zip, no manifest, or larger unpacked than ``--max-mb``), or the arguments
are wrong.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lqai_verify.bundle import DEFAULT_MAX_BYTES, BundleError, Verification, extension_problems, verify_bundle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lqai_verify", description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path, help="the export (a .zip from export_matter or the API)")
    parser.add_argument(
        "--public-key",
        help="the signing key expected: its fingerprint (64 hex digits) or the base64 public key; a bundle "
        "signed by any other key fails",
    )
    parser.add_argument(
        "--extends",
        type=Path,
        metavar="EARLIER.zip",
        help="an earlier export of the same matter (or chat): this one must hold its whole chain unchanged "
        "(nothing cut from the end, rewritten or re-sealed since)",
    )
    parser.add_argument(
        "--max-mb",
        type=int,
        default=DEFAULT_MAX_BYTES // 2**20,
        help="the most the bundle's files may unpack to, in MiB (default %(default)s: some 80,000 turns); a larger "
        "bundle is refused before anything is unpacked",
    )
    args = parser.parse_args(argv)
    if args.max_mb <= 0:
        parser.error("--max-mb must be a positive number of MiB")
    max_bytes = args.max_mb * 2**20
    try:
        result = verify_bundle(args.bundle, public_key=args.public_key, max_bytes=max_bytes)
        if args.extends is not None:
            earlier = verify_bundle(args.extends, max_bytes=max_bytes)
            result.problems += extension_problems(result, earlier, earlier_name=str(args.extends))
    except (BundleError, ValueError) as exc:
        print(f"lqai_verify: {exc}", file=sys.stderr)
        return 2
    for warning in result.warnings:
        print(f"lqai_verify: warning: {warning}", file=sys.stderr)
    if result.ok:
        print(f"lqai_verify: OK: {result.summary()}")
        if args.extends is not None:
            print(
                f"lqai_verify: OK: it extends {args.extends} (exported {earlier.exported_at}, signed by "
                f"{earlier.fingerprint}): {_held(earlier)} unchanged"
            )
        return 0
    print(f"lqai_verify: FAILED: {len(result.problems)} problem(s) in {args.bundle}", file=sys.stderr)
    for problem in result.problems:
        print(f"  {problem}", file=sys.stderr)
    print(f"lqai_verify: checked {result.summary()}", file=sys.stderr)
    return 1


def _held(earlier: Verification) -> str:
    return "an empty chain" if earlier.head is None else f"its seals #1 to #{earlier.head[0]}"


if __name__ == "__main__":
    sys.exit(main())
