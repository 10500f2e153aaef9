"""Offline verification of a signed lqai matter export (``python -m lqai_verify BUNDLE.zip``).

A package that installs on its own (``pip install ./lqai_verify``, or the wheel ``make verifier`` builds) and
needs nothing but the standard library and ``cryptography``: never Django or the server's apps.
:mod:`lqai_verify.verification` holds the quote-verification rules, which the server imports from here, so a
recipient re-runs the very rules that verified each quote; :mod:`lqai_verify.record` defines the byte formats
the server seals and signs (the server imports it too); :mod:`lqai_verify.bundle` checks a bundle and
:mod:`lqai_verify.report` renders its report. See docs/export.md, "Verifying an export".
"""
