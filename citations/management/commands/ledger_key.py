"""``manage.py ledger_key``: print a new ledger key (for ``LQAI_LEDGER_KEY``) and its public key's fingerprint."""

from __future__ import annotations

import base64
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from django.core.management.base import BaseCommand

from lqai_verify import record


class Command(BaseCommand):
    help = (
        "Print a new Ed25519 ledger key as LQAI_LEDGER_KEY=<base64>, its public key and the public key's "
        "fingerprint (hex SHA-256 of its raw bytes). Store the key in your secret store, never in the "
        "database or the repository; give recipients of exports the fingerprint. Writes nothing."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        key = Ed25519PrivateKey.generate()
        raw = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        public = key.public_key()
        self.stdout.write(f"LQAI_LEDGER_KEY={base64.b64encode(raw).decode('ascii')}")
        self.stdout.write(f"public key: {record.public_key_b64(public)}")
        self.stdout.write(f"fingerprint: {record.fingerprint(public)}")
