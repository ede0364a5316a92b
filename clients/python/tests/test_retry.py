"""Retry decisions and the retry loop, with fake RpcErrors and a recorded sleep."""

import grpc
import pytest

from feedclient.errors import InvalidRequest, StockShortage, Unavailable
from feedclient.retry import (
    STREAM_RETRYABLE,
    UNARY_RETRYABLE,
    Backoff,
    RetryPolicy,
    call_with_retry,
)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details="fake"):
        super().__init__(details)
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


def failing_then(results):
    """A call that raises/returns the given items in order, and counts its calls."""
    calls = []

    def call():
        item = results[len(calls)]
        calls.append(item)
        if isinstance(item, Exception):
            raise item
        return item

    return call, calls


def test_backoff_grows_exponentially_and_is_capped():
    b = Backoff(initial=0.1, maximum=1.0, multiplier=2.0, jitter=0.0)
    assert [b.delay(n) for n in range(1, 7)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_backoff_jitter_stays_within_bounds():
    b = Backoff(initial=1.0, maximum=10.0, multiplier=2.0, jitter=0.2)
    assert b.delay(1, rand=lambda: 0.0) == pytest.approx(0.8)
    assert b.delay(1, rand=lambda: 1.0) == pytest.approx(1.2)
    assert b.delay(1, rand=lambda: 0.5) == pytest.approx(1.0)
    # Never above the cap, even with jitter.
    assert b.delay(10, rand=lambda: 1.0) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        b.delay(0)


def test_which_codes_are_retried():
    p = RetryPolicy(attempts=3)
    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
        assert p.should_retry(code, 1)
        assert p.should_retry(code, 2)
        assert not p.should_retry(code, 3), "the last attempt is not followed by another"
    for code in (
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INTERNAL,
    ):
        assert not p.should_retry(code, 1)
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in STREAM_RETRYABLE
    assert grpc.StatusCode.RESOURCE_EXHAUSTED not in UNARY_RETRYABLE
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


def test_retries_transient_failures_then_returns_the_reply():
    call, calls = failing_then(
        [
            FakeRpcError(grpc.StatusCode.UNAVAILABLE),
            FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED),
            "reply",
        ]
    )
    slept, events = [], []
    policy = RetryPolicy(attempts=5, backoff=Backoff(0.5, 4.0, 2.0, jitter=0.0))
    out = call_with_retry(
        call, policy, what="Reserve", idempotency_key="k-1", on_retry=events.append, sleep=slept.append
    )
    assert out == "reply"
    assert len(calls) == 3
    assert slept == pytest.approx([0.5, 1.0])
    assert [(e.attempt, e.code) for e in events] == [
        (1, grpc.StatusCode.UNAVAILABLE),
        (2, grpc.StatusCode.DEADLINE_EXCEEDED),
    ]
    assert all(e.idempotency_key == "k-1" for e in events)


def test_not_retryable_is_raised_at_once_as_its_own_exception():
    call, calls = failing_then([FakeRpcError(grpc.StatusCode.FAILED_PRECONDITION, "short by 3")])
    with pytest.raises(StockShortage) as info:
        call_with_retry(call, RetryPolicy(attempts=5), what="Reserve", sleep=lambda s: None)
    assert len(calls) == 1
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "short by 3" in str(info.value)
    assert isinstance(info.value.__cause__, FakeRpcError)

    call, calls = failing_then([FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT)])
    with pytest.raises(InvalidRequest):
        call_with_retry(call, RetryPolicy(attempts=5), what="Reserve", sleep=lambda s: None)
    assert len(calls) == 1


def test_gives_up_after_the_attempts_and_reports_the_key():
    call, calls = failing_then([FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused")] * 3)
    slept = []
    with pytest.raises(Unavailable) as info:
        call_with_retry(call, RetryPolicy(attempts=3), what="Reserve", idempotency_key="k-9", sleep=slept.append)
    assert len(calls) == 3
    assert len(slept) == 2, "no wait after the last attempt"
    assert info.value.attempts == 3
    assert info.value.idempotency_key == "k-9"
    assert "connection refused" in str(info.value)
