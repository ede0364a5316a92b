"""Idempotency keys: one per logical operation, generated when the caller brings none,
and carried unchanged by every retry of that operation."""

from __future__ import annotations

import uuid

KEY_PREFIX = "py"


def new_idempotency_key(prefix: str = KEY_PREFIX) -> str:
    """A fresh random key, e.g. "py-0f3c...": 128 random bits, well under the server's id
    length limit."""
    return f"{prefix}-{uuid.uuid4().hex}"


def key_or_new(key: str | None) -> str:
    """The caller's key when given (non-empty), else a fresh one."""
    return key if key else new_idempotency_key()
