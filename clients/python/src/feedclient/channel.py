"""The gRPC channel and the per-call metadata: plaintext or TLS (a CA file, optionally a
client certificate for mutual TLS), and a bearer token."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence, Union

import grpc

PathOrBytes = Union[str, Path, bytes]

# Reconnect quickly after the server comes back (gRPC's default starts at 1 s and grows to
# 120 s, which would keep failing calls fast long after a restart).
DEFAULT_CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
)


def _read(value: PathOrBytes | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


def make_channel(
    server: str,
    *,
    tls_ca: PathOrBytes | None = None,
    tls_cert: PathOrBytes | None = None,
    tls_key: PathOrBytes | None = None,
    tls: bool | None = None,
    options: Sequence[tuple[str, object]] = (),
) -> grpc.Channel:
    """A channel to `server` ("host:port"). TLS is used when a CA (PEM file path or bytes)
    or a client certificate is given, or with tls=True (then the system's CAs are trusted).
    `options` are added to (and override) DEFAULT_CHANNEL_OPTIONS."""
    merged = dict(DEFAULT_CHANNEL_OPTIONS)
    merged.update(dict(options))
    opts = list(merged.items())
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert and tls_key go together (mutual TLS)")
    use_tls = tls if tls is not None else (tls_ca is not None or tls_cert is not None)
    if not use_tls:
        return grpc.insecure_channel(server, options=opts)
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(tls_ca),
        private_key=_read(tls_key),
        certificate_chain=_read(tls_cert),
    )
    return grpc.secure_channel(server, creds, options=opts)


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """`authorization: Bearer <token>` (nothing without a token)."""
    if not token:
        return ()
    return (("authorization", f"Bearer {token}"),)
