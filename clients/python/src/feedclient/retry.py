"""Retry decisions for unary calls: which status codes are worth another attempt, how long
to wait before it, and the loop that makes the attempts. Pure apart from the call itself
and `sleep`, both of which a test can replace."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable, TypeVar

import grpc

from feedclient.errors import Unavailable, from_rpc_error, status_of

T = TypeVar("T")

# The request may not have reached the server, or its reply was lost: another attempt with
# the same idempotency key is safe (the server replays the first result). CANCELLED is what
# a call gets when it arrives while the server shuts down.
UNARY_RETRYABLE: frozenset[grpc.StatusCode] = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)

# A stream that ends with one of these is opened again from where it was. RESOURCE_EXHAUSTED
# is how the server ends the stream of a reader that fell too far behind.
STREAM_RETRYABLE: frozenset[grpc.StatusCode] = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: initial * multiplier**(n-1), at most `maximum`,
    spread by +-`jitter` (a fraction) so that many clients do not retry in step."""

    initial: float = 0.1
    maximum: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def delay(self, failure: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after the `failure`-th consecutive failure (1-based)."""
        if failure < 1:
            raise ValueError("failure counts from 1")
        base = min(self.maximum, self.initial * self.multiplier ** (failure - 1))
        spread = 1.0 + self.jitter * (2.0 * rand() - 1.0)
        return min(self.maximum, max(0.0, base * spread))


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts a call gets in all, and the wait between them."""

    attempts: int = 6
    backoff: Backoff = field(default_factory=Backoff)
    retryable: frozenset[grpc.StatusCode] = UNARY_RETRYABLE

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")

    def should_retry(self, code: grpc.StatusCode, attempt: int) -> bool:
        """Whether attempt number `attempt` (1-based), which failed with `code`, gets another."""
        return code in self.retryable and attempt < self.attempts


@dataclass(frozen=True)
class RetryEvent:
    """Passed to an `on_retry` callback before each wait."""

    attempt: int
    code: grpc.StatusCode
    details: str
    delay: float
    idempotency_key: str | None = None


OnRetry = Callable[[RetryEvent], None]


def call_with_retry(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    idempotency_key: str | None = None,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `call` until it succeeds, fails with a code that is not retryable (raised as the
    matching FeedError), or runs out of attempts (raised as Unavailable).

    `call` must send the same request every time: for a mutation, with the same
    idempotency key (given here only to be reported)."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except grpc.RpcError as err:
            code, details = status_of(err)
            if code not in policy.retryable:
                raise from_rpc_error(err, what) from err
            if not policy.should_retry(code, attempt):
                raise Unavailable(
                    f"{what}: gave up after {attempt} attempt(s), last: {code.name}: {details}",
                    code,
                    details,
                    attempts=attempt,
                    idempotency_key=idempotency_key,
                ) from err
            delay = policy.backoff.delay(attempt)
            if on_retry is not None:
                on_retry(RetryEvent(attempt, code, details, delay, idempotency_key))
            sleep(delay)
