"""API-key checks: where the key comes from, when the server may bind, and the bearer comparison.

The key is compared in constant time and never logged or stored: the store and the rate limiter
only ever see a short fingerprint of it (`key_id`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os

API_KEY_ENV = "SAO_API_KEY"
ANONYMOUS = "anonymous"


def resolve_api_key(flag_value: str | None) -> str | None:
    """`--api-key` if given, else `SAO_API_KEY`, else None (an empty value counts as none)."""
    key = flag_value if flag_value is not None else os.environ.get(API_KEY_ENV)
    return key or None


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address or `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to listen beyond this machine without a key.

    Raises:
        ValueError: `host` is not loopback and no key is set.
    """
    if api_key is None and not is_loopback(host):
        raise ValueError(
            f"--host {host}: refusing to listen beyond loopback without an API key "
            f"(give --api-key or set {API_KEY_ENV})"
        )


def key_id(key: str | None) -> str:
    """A short, non-reversible label for a key (for rate limits and the store)."""
    if key is None:
        return ANONYMOUS
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def bearer_matches(authorization: str | None, api_key: str) -> bool:
    """Whether an `Authorization` header carries `Bearer <api_key>` (constant-time comparison)."""
    if not authorization:
        return False
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode("utf-8"), api_key.encode("utf-8"))
