"""Exceptions raised by the client: one class per way a call can fail that a caller handles
differently. Every one keeps the gRPC status code and message, and chains the RpcError."""

from __future__ import annotations

import grpc


class FeedError(Exception):
    """A call to the feed server failed."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None, details: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.details = details


class InvalidRequest(FeedError):
    """INVALID_ARGUMENT: the request is malformed; retrying it cannot help."""


class StockShortage(FeedError):
    """FAILED_PRECONDITION: not enough stock (or a state that forbids the change); not retried."""


class NotFound(FeedError):
    """NOT_FOUND: no such reservation, order or level."""


class IdempotencyConflict(FeedError):
    """ALREADY_EXISTS: the idempotency key was used before with a different request."""


class AuthError(FeedError):
    """UNAUTHENTICATED or PERMISSION_DENIED: missing or bad token, or a scope the token lacks."""


class Unavailable(FeedError):
    """The server could not be reached (or kept failing transiently) within the attempts allowed.

    `attempts` is how many calls were made; for a mutation, `idempotency_key` is the key every
    attempt carried: retry later with the same key and the change is still applied at most once.
    """

    def __init__(
        self,
        message: str,
        code: grpc.StatusCode | None = None,
        details: str = "",
        attempts: int = 0,
        idempotency_key: str | None = None,
    ) -> None:
        super().__init__(message, code, details)
        self.attempts = attempts
        self.idempotency_key = idempotency_key


class ResumeGap(FeedError):
    """OUT_OF_RANGE on a stock watch resume, with gap recovery turned off (on_gap="raise")."""


_BY_CODE: dict[grpc.StatusCode, type[FeedError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.FAILED_PRECONDITION: StockShortage,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: IdempotencyConflict,
    grpc.StatusCode.UNAUTHENTICATED: AuthError,
    grpc.StatusCode.PERMISSION_DENIED: AuthError,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.OUT_OF_RANGE: ResumeGap,
}


def status_of(err: grpc.RpcError) -> tuple[grpc.StatusCode, str]:
    """The status code and message of an RpcError (UNKNOWN when it carries none)."""
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else None
    return (code or grpc.StatusCode.UNKNOWN), (details or "")


def from_rpc_error(err: grpc.RpcError, what: str) -> FeedError:
    """The FeedError for a failed call; `what` names the operation in the message."""
    code, details = status_of(err)
    cls = _BY_CODE.get(code, FeedError)
    return cls(f"{what}: {code.name}: {details}", code, details)
