"""``verify_ledger`` over one kept sealed record, timed in several source trees side by side (item 12's data,
built once: a record of a million entries takes longer to build than to check).

``build`` makes the record of item 12 (``benchmarks.dataset``, the ledger backfilled, every turn sealed late,
``VACUUM ANALYZE``) in a database of its own that it keeps; ``time`` runs ``verify_record()`` on it in a fresh
process of each tree given (e.g. a worktree of an earlier commit), alternating, and prints each run's seconds
and peak memory; ``drop`` drops the database. E.g.::

    python -m benchmarks.verify_ledger_bench build --rows 1000000 --database lqai_bench_verify
    python -m benchmarks.verify_ledger_bench time --database lqai_bench_verify --trees /tmp/before,. --repeats 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Run in each tree: verify_record() over the whole record, which must be intact; prints seconds, peak RSS (MB),
# seals and entries.
_TIMED = """
import resource, time, django
django.setup()
from citations.integrity import verify_record
started = time.perf_counter()
result = verify_record()
seconds = time.perf_counter() - started
assert result.intact, [str(problem) for problem in result.problems]
print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, result.seals, result.entries)
"""


def build(*, rows: int, database_url: str) -> None:
    """Item 12's record of ``rows`` source rows in the (new, empty) database of ``database_url``."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lqai.settings_test")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from benchmarks import dataset, run
    from citations.backfill import backfill_ledger
    from citations.seals import seal_late

    call_command("migrate", verbosity=0)
    run.step(f"generating {rows:,} source rows")
    dataset.generate(dataset.Sizes(rows))
    run.step("their ledger entries")
    backfill_ledger()
    run.step("every turn sealed late")
    seal_late(batch_size=2_000)
    with connection.cursor() as cursor:
        dataset.vacuum_analyze(cursor)
    run.step("built")


def time_trees(*, trees: list[Path], database_url: str, repeats: int) -> list[tuple[Path, float, float]]:
    """``verify_record()`` in a fresh process of each tree (its own ``.venv`` if it has one), the trees
    alternating, ``repeats`` rounds: (tree, seconds, peak RSS in MB) of each run."""
    runs = []
    for _ in range(repeats):
        for tree in trees:
            python = tree / ".venv" / "bin" / "python"
            environment = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "lqai.settings_test"}
            output = subprocess.run(  # noqa: S603 - a Python of a tree the operator named, running _TIMED
                [str(python if python.exists() else sys.executable), "-c", _TIMED],
                cwd=tree,
                env=environment,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            seconds, rss, seals, entries = float(output[0]), float(output[1]), output[2], output[3]
            print(f"{tree}: {seconds:.1f} s, {rss:.0f} MB ({int(seals):,} seals, {int(entries):,} entries)")
            runs.append((tree, seconds, rss))
    return runs


def main(argv: list[str] | None = None) -> int:
    from benchmarks import run

    parser = argparse.ArgumentParser(prog="python -m benchmarks.verify_ledger_bench", description=__doc__)
    parser.add_argument("action", choices=("build", "time", "drop"))
    parser.add_argument("--database", required=True, help="the kept database's name")
    parser.add_argument("--rows", type=int, default=100_000, help="build: source rows (default 100000)")
    parser.add_argument("--trees", default=".", help="time: source trees, comma-separated (default: this one)")
    parser.add_argument("--repeats", type=int, default=2, help="time: rounds (default 2)")
    args = parser.parse_args(argv)
    server_url = os.environ.get("DATABASE_URL") or run.DEFAULT_SERVER_URL
    database_url = run.database_url(server_url, args.database)
    if args.action == "build":
        run._admin(server_url, f'CREATE DATABASE "{args.database}"')
        build(rows=args.rows, database_url=database_url)
    elif args.action == "time":
        trees = [Path(tree).resolve() for tree in args.trees.split(",") if tree.strip()]
        time_trees(trees=trees, database_url=database_url, repeats=args.repeats)
    else:
        run._admin(server_url, f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
