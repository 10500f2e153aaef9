"""Offline verification of a signed lqai matter export (``python -m lqai_verify BUNDLE.zip``).

Depends on the standard library, ``cryptography`` and the project's own ``lqai_verify.verification`` (a pure
standard-library package): the same quote verification the server ran. :mod:`lqai_verify.record` defines
the byte formats that the server seals and signs (the server imports it, so both sides share one
definition); :mod:`lqai_verify.bundle` checks a bundle. See docs/export.md.
"""
