"""The shape of a key's secret, what is kept of it, and the names no created key may take.

Owns the secret's format (`ork_<id>_<random>`: the id finds the key's row, the whole secret is checked against
its digest in constant time), the digest kept (SHA-256: the secret is 32 random bytes, so nothing can be
learnt from its digest and no slow hash or pepper is needed), and the CSRF token of a browser session
(derived from its cookie, which a page's script cannot read). Randomness comes in as arguments.
"""

from __future__ import annotations

import hashlib
import hmac
import re

PREFIX = "ork_"
_SECRET = re.compile(r"^ork_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$")
# The bootstrap token (ORCHESTRATOR_API_TOKEN), an open API's callers, and in-process callers act under these
# names; a created key may not take one, so an event's actor always says which it was.
BOOTSTRAP = "bootstrap"
ANONYMOUS = "anonymous"
RESERVED_NAMES = frozenset({BOOTSTRAP, ANONYMOUS, "local"})
KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


def key_secret(key_id: str, random_part: str) -> str:
    """A key's secret from its id (12 hex digits) and 32 random bytes as base64url (43 characters)."""
    secret = f"{PREFIX}{key_id}_{random_part}"
    if not _SECRET.fullmatch(secret):
        raise ValueError("a key id is 12 hex digits and its random part 43 base64url characters")
    return secret


def key_id_of(secret: str) -> str | None:
    """The id a presented secret names, or None when it is not shaped like a key's secret."""
    found = _SECRET.fullmatch(secret)
    return found.group(1) if found else None


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def matches(secret: str, kept: bytes) -> bool:
    """Whether `secret` is the one whose digest was kept, compared in constant time."""
    return hmac.compare_digest(digest(secret), kept)


def csrf_of(cookie: str) -> str:
    """The CSRF token of a browser session: its page sends it in a header with every command, which a page
    on another origin cannot, since it can read neither the cookie nor this token."""
    return hashlib.sha256(b"orchestrator-csrf:" + cookie.encode()).hexdigest()
