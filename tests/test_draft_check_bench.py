"""``make bench`` item 16's pieces at a tiny size (never timed here): a brief made by the bench is read, checked and
recorded as a turn in the bench's matter, as a lawyer's upload is, and a second run of it is a revision."""

from __future__ import annotations

import pytest

from benchmarks import draft_check_bench as bench
from drafts.models import DraftCheck

pytestmark = pytest.mark.django_db


def test_the_bench_records_its_brief_as_a_turn_and_a_rerun_as_a_revision() -> None:
    bench.seed_library()
    matter = bench.bench_matter()
    data = bench.brief(2)

    bench._record(data, matter, pages=2)
    bench._record(data, matter, pages=2)

    checks = list(DraftCheck.objects.filter(project=matter).order_by("created_at"))
    assert len(checks) == 2
    assert checks[0].chat_id == checks[1].chat_id
    assert checks[0].message.kind == "draft"
    assert any(f["kind"] == "quote" for f in checks[0].findings)
    assert bench.bench_matter() == matter  # idempotent
