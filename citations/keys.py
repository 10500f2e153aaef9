"""The ledger key: the Ed25519 key that signs turn seals and matter exports.

``LQAI_LEDGER_KEY`` (the base64 of the 32-byte private key) comes from the environment, never from the
database; the settings refuse to start without it unless ``DEBUG`` is on, in which case a development key
is derived from ``SECRET_KEY`` (HKDF-SHA256) and :func:`is_development_key` says so, for every export to
say it too. Seals made under earlier keys verify with ``LQAI_LEDGER_RETIRED_PUBLIC_KEYS``.
"""

from __future__ import annotations

from functools import cache

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from lqai_verify import record

_DEVELOPMENT_INFO = b"lqai ledger development key"


def is_development_key() -> bool:
    """Whether the record is signed by the development key (DEBUG, no ``LQAI_LEDGER_KEY``): it proves nothing."""
    return not settings.LQAI_LEDGER_KEY


@cache
def _signing_key(configured: str, secret_key: str) -> Ed25519PrivateKey:
    if configured:
        return record.private_key_from_b64(configured)
    seed = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_DEVELOPMENT_INFO).derive(secret_key.encode())
    return Ed25519PrivateKey.from_private_bytes(seed)


def signing_key() -> Ed25519PrivateKey:
    """The current ledger key (read from the settings at each call, cached per value)."""
    return _signing_key(settings.LQAI_LEDGER_KEY, settings.SECRET_KEY)


@cache
def _fingerprint(configured: str, secret_key: str) -> str:
    return record.fingerprint(_signing_key(configured, secret_key).public_key())


def current_fingerprint() -> str:
    return _fingerprint(settings.LQAI_LEDGER_KEY, settings.SECRET_KEY)


def public_keys() -> dict[str, Ed25519PublicKey]:
    """Every public key a seal may be signed by, by fingerprint: the current key's and the retired ones."""
    keys = {current_fingerprint(): signing_key().public_key()}
    for value in settings.LQAI_LEDGER_RETIRED_PUBLIC_KEYS:
        key = record.public_key_from_b64(value)
        keys[record.fingerprint(key)] = key
    return keys
