"""Whole single-shot API turns while PDF bombs are being refused, against the same turns alone.

Run on its own (``DATABASE_URL=postgres://... python -m benchmarks.upload_bomb_bench``; it creates and drops a
test database ``test_<name>`` beside ``DATABASE_URL``'s). In one process, as one gunicorn ``gthread`` worker
serves requests: ``--turns`` turns one after the other, alone, then the same while two threads upload the
review's two bombs (``tests.pdf_fixture.make_page_tree_bomb``) again and again (each waiting ``--interval``
seconds after each answer: 8 bombs a second by default), ``--rounds`` times in
alternation (the machine is shared: alternating evens out its load); then, for comparison (not
what the server does), while two threads read the bombs' pages with pypdf in the worker itself, as uploads
were read before they were bounded. Prints the turns' median and 90th percentile in each case and each
refusal's time; the figures go in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import django


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="alternations of turns alone and under bombs")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds each bomb thread waits between uploads")
    arguments = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lqai.settings_test")
    django.setup()
    from django.db import connection, connections
    from django.test.utils import setup_test_environment
    from pypdf import PdfReader
    from rest_framework.test import APIClient

    from tests import factories
    from tests.pdf_fixture import make_page_tree_bomb

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        user = factories.UserFactory.create()
        chat = factories.ChatFactory.create(owner=user, project=factories.ProjectFactory.create(owner=user))
        factories.DocumentFactory.create(project=chat.project)
        bombs = [make_page_tree_bomb(fan_out=100, text_operators=400), make_page_tree_bomb(fan_out=250)]

        def client() -> APIClient:
            api = APIClient()
            api.force_authenticate(user=user)
            return api

        def turns() -> list[float]:
            api, took = client(), []
            for _ in range(arguments.turns):
                started = time.perf_counter()
                response = api.post(
                    f"/api/chats/{chat.pk}/messages/", {"content": "What must the court find?"}, format="json"
                )
                took.append(time.perf_counter() - started)
                assert response.status_code == 201, response.content
            return took

        def upload(n: int) -> float:
            from django.core.files.uploadedfile import SimpleUploadedFile

            file = SimpleUploadedFile("bomb.pdf", bombs[n % 2], content_type="application/pdf")
            started = time.perf_counter()
            response = client().post(
                f"/api/projects/{chat.project_id}/documents/", {"title": "Bomb", "file": file}, format="multipart"
            )
            assert response.status_code == 413, response.content
            return time.perf_counter() - started

        def read_in_process(n: int) -> float:
            started = time.perf_counter()
            for page in PdfReader(io.BytesIO(bombs[n % 2])).pages:
                page.extract_text()
                if stop.is_set():
                    break
            return time.perf_counter() - started

        stop = threading.Event()

        def under(load: Callable[[int], float] | None) -> tuple[list[float], list[float]]:
            stop.clear()
            done: list[float] = []

            def loop(offset: int) -> None:
                n = offset
                while not stop.is_set() and load is not None:
                    done.append(load(n))
                    n += 1
                    stop.wait(arguments.interval)
                connections.close_all()

            threads = [threading.Thread(target=loop, args=(i,)) for i in range(2 if load else 0)]
            for thread in threads:
                thread.start()
            took = turns()
            stop.set()
            for thread in threads:
                thread.join()
            return took, done

        turns()  # warm up
        cases: dict[str, tuple[list[float], list[float]]] = {}
        plan = [("alone", None), ("bombs refused", upload)] * arguments.rounds
        for label, load in [*plan, ("what-if: read in the worker", read_in_process)]:
            took, done = under(load)
            cases.setdefault(label, ([], []))
            cases[label][0].extend(took)
            cases[label][1].extend(done)
        for label, (took, done) in cases.items():
            line: dict[str, Any] = {
                "turn median ms": round(statistics.median(took) * 1000, 1),
                "turn p90 ms": round(_percentile(took, 0.9) * 1000, 1),
            }
            if done:
                line["load operations"] = len(done)
                line["load median s"] = round(statistics.median(done), 2)
                line["load max s"] = round(max(done), 2)
            print(label, line)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
