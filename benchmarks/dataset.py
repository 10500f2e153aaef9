"""Synthetic chat data for the ledger benchmarks, generated in PostgreSQL with ``generate_series``.

Parents (users, projects, chats, messages, documents, opinions) get deterministic ids (``md5(prefix || n)``)
so that children can name them without lookups; source rows get random ``gen_random_uuid()`` ids, like
production before time-ordered keys (uuid4), so their id order is unrelated to their physical order. With
``keys="v7"`` the rows a turn writes get time-ordered ids instead, as production now gives them
(``chats.ids``): messages a deterministic version 7 id carrying their ``created_at`` (so children can still
name them), source rows ``uuid_generate_v7()``. A message's rows are
contiguous on disk, as a turn's rows are (one ``bulk_create`` per turn). The source rows split 40% KB
quotes, 30% caselaw quotes, 30% tool sources (half ``caselaw``, half ``mcp``). Every row has a shape the
ledger can hold: the quote tables' constraints refuse any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

USERS = 20
KEYS = ("v4", "v7")
# A version 7 UUID from a time in milliseconds (``ms``) and a seed text: the time, the version nibble, then
# md5(seed) bits with the variant nibble set; deterministic, so children compute their parent's id.
_V7_FROM = (
    "(lpad(to_hex({ms}), 12, '0') || '7' || substr(md5({seed}), 1, 3) || '8' || substr(md5({seed}), 4, 15))::uuid"
)
_EPOCH_2024_MS = 1_704_067_200_000


def message_id_sql(number: str, *, keys: str, turn_seconds: int = 60) -> str:
    """SQL for the id of message ``number`` (an SQL expression): turn ``number / 2`` is ``turn_seconds`` after the
    previous one from 2024-01-01, and with ``keys="v7"`` its id carries that time."""
    if keys == "v4":
        return f"md5('m' || ({number}))::uuid"
    ms = f"({_EPOCH_2024_MS}::bigint + ({number})::bigint / 2 * {turn_seconds * 1000})"
    return _V7_FROM.format(ms=ms, seed=f"'m' || ({number})")


def source_id_sql(*, keys: str) -> str:
    return "gen_random_uuid()" if keys == "v4" else "uuid_generate_v7()"


@dataclass(frozen=True, slots=True)
class Sizes:
    """Row counts of a dataset of ``rows`` source rows."""

    rows: int
    # Seconds from one turn to the next, from 2024-01-01: the months the dataset spans (``months``), so the
    # ledger's monthly partitions it fills.
    turn_seconds: int = 60

    @property
    def turn_interval(self) -> str:
        """SQL for the interval from one turn to the next."""
        return f"interval '{self.turn_seconds} seconds'"

    @property
    def projects(self) -> int:
        return max(10, self.rows // 1_000)

    @property
    def chats(self) -> int:
        return max(20, self.rows // 20)

    @property
    def assistant_messages(self) -> int:
        return max(10, self.rows // 4)  # about 4 source rows per turn

    @property
    def documents(self) -> int:
        return self.projects * 10

    @property
    def opinions(self) -> int:
        return max(100, self.rows // 100)

    @property
    def kb(self) -> int:
        return self.rows * 4 // 10

    @property
    def caselaw(self) -> int:
        return self.rows * 3 // 10

    @property
    def tool(self) -> int:
        return self.rows - self.kb - self.caselaw

    @property
    def valid(self) -> int:
        """Rows the ledger holds: all of them (the quote tables refuse the shapes it cannot hold)."""
        return self.rows


def spanning(rows: int, *, months: int) -> Sizes:
    """A dataset of ``rows`` source rows whose turns spread evenly over ``months`` calendar months from January
    2024 (the last turn in the last of them): the same months at every size, a turn further apart."""
    if months < 1:
        raise ValueError("months must be at least 1")
    end = datetime(2024 + months // 12, months % 12 + 1, 1, tzinfo=UTC)
    seconds = int((end - datetime(2024, 1, 1, tzinfo=UTC)).total_seconds())
    turns = Sizes(rows).assistant_messages
    return Sizes(rows, turn_seconds=max(1, seconds // turns))


def months(sizes: Sizes) -> int:
    """How many calendar months the turns of a dataset of ``sizes`` span, from January 2024."""
    last = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=sizes.turn_seconds * (sizes.assistant_messages - 1))
    return (last.year - 2024) * 12 + last.month


def generate_parents(cursor: Any, sizes: Sizes, *, keys: str = "v4") -> None:
    """Users, projects, chats, messages (a user and an assistant message per turn), documents, opinions."""
    p, c, a = sizes.projects, sizes.chats, sizes.assistant_messages
    cursor.execute(
        "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
        "is_active, date_joined) SELECT '!', false, 'bench' || g, '', '', '', false, true, now() "
        "FROM generate_series(1, %s) g",
        [USERS],
    )
    cursor.execute("SELECT min(id) FROM auth_user")
    first_user = cursor.fetchone()[0]
    cursor.execute(
        "INSERT INTO projects (id, name, owner_id, created_at) "
        "SELECT md5('p' || g)::uuid, 'Matter ' || g, %s + g %% %s, timestamptz '2023-01-01' "
        "FROM generate_series(0, %s) g",
        [first_user, USERS, p - 1],
    )
    # One chat in fifty is matter-less.
    cursor.execute(
        "INSERT INTO chats (id, project_id, owner_id, title, created_at) "
        "SELECT md5('c' || g)::uuid, CASE WHEN g %% 50 = 49 THEN NULL ELSE md5('p' || (g %% %s))::uuid END, "
        "%s + g %% %s, 'Chat ' || g, timestamptz '2023-06-01' FROM generate_series(0, %s) g",
        [p, first_user, USERS, c - 1],
    )
    # Message 2k is turn k's user message, 2k+1 its assistant message, turn_seconds apart from 2024-01-01.
    every = sizes.turn_interval
    cursor.execute(
        "INSERT INTO messages (id, chat_id, role, content, status, finalized_at, created_at, updated_at) "
        f"SELECT {message_id_sql('g', keys=keys, turn_seconds=sizes.turn_seconds).replace('%', '%%')}, "
        "md5('c' || ((g / 2) %% %s))::uuid, "
        "CASE WHEN g %% 2 = 0 THEN 'user' ELSE 'assistant' END, 'bench turn', 'complete', "
        f"timestamptz '2024-01-01' + (g / 2) * {every}, timestamptz '2024-01-01' + (g / 2) * {every}, "
        f"timestamptz '2024-01-01' + (g / 2) * {every} FROM generate_series(0, %s) g",
        [c, 2 * a - 1],
    )
    cursor.execute(
        "INSERT INTO documents (id, project_id, title, content, created_at) "
        "SELECT md5('d' || g)::uuid, md5('p' || (g / 10))::uuid, 'Memo ' || g, 'bench document text', "
        "timestamptz '2023-06-01' FROM generate_series(0, %s) g",
        [sizes.documents - 1],
    )
    cursor.execute(
        "INSERT INTO caselaw_opinions (id, provider, cluster_id, opinion_id, case_name, citation, court, "
        "absolute_url, text, retrieved_at) SELECT md5('o' || g)::uuid, 'courtlistener', 'c' || g, 'o' || g, "
        "'Doe v. Roe ' || g, '570 U.S. 297', 'Supreme Court', '', 'bench opinion text', timestamptz '2023-06-01' "
        "FROM generate_series(0, %s) g",
        [sizes.opinions - 1],
    )


def generate_sources(
    cursor: Any, sizes: Sizes, *, fraction: tuple[float, float] = (0.0, 1.0), keys: str = "v4"
) -> None:
    """The source rows of the three tables whose number within their table falls in ``fraction`` of it
    (so a dataset can grow in steps: its first tenth, then the rest)."""
    a, p, c = sizes.assistant_messages, sizes.projects, sizes.chats
    for table, count in (("kb", sizes.kb), ("caselaw", sizes.caselaw), ("tool", sizes.tool)):
        first, last = int(count * fraction[0]), int(count * fraction[1]) - 1
        if last < first:
            continue
        # Row g of a table belongs to turn (g * a) / count: each turn gets its share, contiguously.
        turn = f"((g::bigint * {a}) / {count})"
        message = message_id_sql(f"2 * {turn} + 1", keys=keys, turn_seconds=sizes.turn_seconds)
        new_id = source_id_sql(keys=keys)
        created = f"timestamptz '2024-01-01' + {turn} * {sizes.turn_interval}"
        if table == "kb":
            # The quoted document belongs to the turn's chat's project.
            document = f"md5('d' || ((({turn} %% {c}) %% {p}) * 10 + g %% 10))::uuid"
            cursor.execute(
                "INSERT INTO message_citations (id, message_id, document_id, quote, source_offset_start, "
                "source_offset_end, verification_method, verification_confidence, created_at) "
                f"SELECT {new_id}, {message}, {document}, 'bench quote', 0, 11, "
                "CASE WHEN g %% 5 = 0 THEN 'tolerant_match' "
                f"ELSE 'exact_match' END, CASE WHEN g %% 5 = 0 THEN 0.950 ELSE 1.000 END, {created} "
                "FROM generate_series(%s, %s) g",
                [first, last],
            )
        elif table == "caselaw":
            cursor.execute(
                "INSERT INTO message_caselaw_citations (id, message_id, opinion_id, quote, source_offset_start, "
                "source_offset_end, verification_method, verification_confidence, created_at) "
                f"SELECT {new_id}, {message}, md5('o' || (g %% {sizes.opinions}))::uuid, 'bench quote', "
                "0, 11, CASE WHEN g %% 4 = 0 THEN 'tolerant_match' ELSE 'exact_match' END, "
                f"CASE WHEN g %% 4 = 0 THEN 0.98 ELSE 1.0 END, {created} FROM generate_series(%s, %s) g",
                [first, last],
            )
        else:
            cursor.execute(
                "INSERT INTO message_tool_sources (id, message_id, source_kind, tool, provider, label, subtitle, "
                "url, external_ref, created_at) "
                f"SELECT {new_id}, {message}, CASE WHEN g %% 2 = 0 THEN 'caselaw' ELSE 'mcp' END, "
                "CASE WHEN g %% 2 = 0 THEN 'caselaw_search' ELSE 'mcp_docs' END, "
                "CASE WHEN g %% 2 = 0 THEN 'courtlistener' ELSE NULL END, 'Source ' || g, '', '', g::text, "
                f"{created} FROM generate_series(%s, %s) g",
                [first, last],
            )


def generate(sizes: Sizes, *, fraction: tuple[float, float] = (0.0, 1.0), keys: str = "v4") -> None:
    """The parents and the source rows in ``fraction`` of a dataset of ``sizes``, in one transaction: the
    messages are inserted finalized, and a turn's rows are added only by the transaction that finalized it
    (``chats.0032``)."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        generate_parents(cursor, sizes, keys=keys)
        generate_sources(cursor, sizes, fraction=fraction, keys=keys)


def vacuum_analyze(cursor: Any) -> None:
    """Fresh statistics and visibility maps (index-only scans), as a settled production table has."""
    cursor.execute("VACUUM ANALYZE")
