"""Print where the development server's trace pages, admin and API are, and the demo login."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from demo.seed import DEMO_PASSWORD, DEMO_USERNAME


class Command(BaseCommand):
    help = "Print the admin URL, the API URLs and the demo login (used by `make serve`)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="where the server listens")

    def handle(self, *args: Any, base_url: str, **options: Any) -> None:
        base = base_url.rstrip("/")
        self.stdout.write(f"Trace pages:    {base}/   (your matters; sign in at {base}/accounts/login/)")
        self.stdout.write(f"Admin:          {base}/admin/   (ledger: {base}/admin/citations/citationledgerentry/)")
        self.stdout.write(f"API schema:     {base}/api/schema/   (interactive docs: {base}/api/docs/; signed in)")
        self.stdout.write(f"Get a token:    curl -X POST {base}/api/auth/token/ -H 'Content-Type: application/json' \\")
        self.stdout.write("""                  -d '{"username": "...", "password": "..."}'""")
        self.stdout.write(f"Chats API:      {base}/api/chats/")
        if User.objects.filter(username=DEMO_USERNAME).exists():
            self.stdout.write(f"Demo login:     {DEMO_USERNAME} / {DEMO_PASSWORD}")
        else:
            self.stdout.write("Demo login:     none yet: run `make demo` first to seed the demo matter and user")
