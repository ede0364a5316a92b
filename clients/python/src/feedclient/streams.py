"""Server streams that reopen themselves after a transient end and pick up where they were.

A stream is an iterable object: iterate it (once) to receive, call stop() from any thread
(a signal handler, a timer) to end the iteration cleanly, or use it as a context manager.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, Iterator, Literal, TypeVar

import grpc

from feedclient.errors import ResumeGap, Unavailable, from_rpc_error, status_of
from feedclient.pb import inventory_pb2, order_pb2
from feedclient.resume import OrderCursor, WatchCursor
from feedclient.retry import STREAM_RETRYABLE, Backoff, RetryPolicy

T = TypeVar("T")
M = TypeVar("M")

# Reopen for as long as the server is down up to about a minute (with the default backoff):
# consecutive attempts that receive nothing count, a received message starts the count over.
DEFAULT_RECONNECT = RetryPolicy(attempts=40, backoff=Backoff(0.1, 2.0), retryable=STREAM_RETRYABLE)


class ReconnectingStream(Generic[M, T]):
    """The reconnect loop; subclasses say how to open, what to pass on, and when it is done."""

    what = "stream"

    def __init__(
        self,
        reconnect: RetryPolicy = DEFAULT_RECONNECT,
        reroute: Callable[[grpc.RpcError], bool] | None = None,
    ) -> None:
        self._reconnect = reconnect
        # Cluster mode: told each error; True when it names another node to reopen on at once.
        self._reroute = reroute
        self._stopped = threading.Event()
        # Reentrant: stop() may run in a signal handler on the thread that holds it.
        self._lock = threading.RLock()
        self._call: grpc.Call | None = None
        self._iterating = False
        self.reconnects = 0  # streams opened after the first one

    # --- what subclasses provide -------------------------------------------------------------
    def _open(self) -> grpc.Call:
        raise NotImplementedError

    def _accept(self, message: M) -> T | None:
        raise NotImplementedError

    def _done(self) -> bool:
        return False

    def _on_end(self, code: grpc.StatusCode, err: grpc.RpcError | None) -> bool:
        """A stream ended with `code` (OK: ended by the server without an error). Return
        True to reopen at once (not counted as a failure), False to apply the usual rule
        (reopen after a backoff when retryable), or raise."""
        return False

    # --- the loop ----------------------------------------------------------------------------
    def stop(self) -> None:
        """End the iteration (from any thread): the current call is cancelled, no reopen."""
        self._stopped.set()
        with self._lock:
            call = self._call
        if call is not None:
            call.cancel()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def __enter__(self) -> "ReconnectingStream[M, T]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __iter__(self) -> Iterator[T]:
        if self._iterating:
            raise RuntimeError(f"{self.what} is already being iterated")
        self._iterating = True
        return self._run()

    def _run(self) -> Iterator[T]:
        failures = 0
        opened = 0
        while not self._stopped.is_set():
            call = self._open()
            opened += 1
            if opened > 1:
                self.reconnects += 1
            with self._lock:
                self._call = call
            if self._stopped.is_set():  # stop() ran between the open and the store
                call.cancel()
                return
            code = grpc.StatusCode.OK
            error: grpc.RpcError | None = None
            try:
                for message in call:  # type: ignore[attr-defined]
                    failures = 0
                    item = self._accept(message)
                    if item is not None:
                        yield item
                    if self._done():
                        return
            except grpc.RpcError as err:
                code, _ = status_of(err)
                error = err
            finally:
                with self._lock:
                    self._call = None
                call.cancel()  # no-op on a finished call; frees it when the caller left early
            if self._stopped.is_set():
                return
            if self._on_end(code, error):
                continue
            if error is not None and self._reroute is not None and self._reroute(error):
                failures += 1  # bounded like any reopening, but no backoff: the owner is known
                if failures < self._reconnect.attempts:
                    continue
            if error is not None and code not in self._reconnect.retryable:
                raise from_rpc_error(error, self.what) from error
            failures += 1
            if failures >= self._reconnect.attempts:
                _, details = status_of(error) if error is not None else (code, "ended")
                raise Unavailable(
                    f"{self.what}: no message in {failures} consecutive attempts, last: "
                    f"{code.name}: {details}",
                    code,
                    details,
                    attempts=failures,
                ) from error
            # Interruptible wait: stop() ends it at once.
            self._stopped.wait(self._reconnect.backoff.delay(failures))


class StockWatch(ReconnectingStream[inventory_pb2.StockUpdate, inventory_pb2.StockUpdate]):
    """InventoryService.WatchStock, reopened after UNAVAILABLE/CANCELLED/RESOURCE_EXHAUSTED
    with resume_after_sequence = the highest sequence received: the caller sees every change
    once, in sequence order, with no gap. When the server no longer retains that far back
    (OUT_OF_RANGE), the stream is reopened with snapshot_on_gap (on_gap="snapshot", the
    default: the caller receives KIND_SNAPSHOT rows and KIND_SNAPSHOT_END again and should
    replace its view with them) or ResumeGap is raised (on_gap="raise")."""

    what = "WatchStock"

    def __init__(
        self,
        open_call: Callable[[inventory_pb2.WatchStockRequest], grpc.Call],
        keys: list[inventory_pb2.StockKey],
        *,
        resume_after: int = 0,
        on_gap: Literal["snapshot", "raise"] = "snapshot",
        reconnect: RetryPolicy = DEFAULT_RECONNECT,
        reroute: Callable[[grpc.RpcError], bool] | None = None,
    ) -> None:
        super().__init__(reconnect, reroute)
        if on_gap not in ("snapshot", "raise"):
            raise ValueError('on_gap must be "snapshot" or "raise"')
        self._open_call = open_call
        self._keys = keys
        self._on_gap = on_gap
        self.cursor = WatchCursor(last_sequence=resume_after)

    @property
    def last_sequence(self) -> int:
        """Resume point: pass it as resume_after to a later watch to continue from here."""
        return self.cursor.last_sequence

    def _open(self) -> grpc.Call:
        self.cursor.on_open()
        return self._open_call(self.cursor.request(self._keys))

    def _accept(self, message: inventory_pb2.StockUpdate) -> inventory_pb2.StockUpdate | None:
        return message if self.cursor.accept(message) else None

    def _on_end(self, code: grpc.StatusCode, err: grpc.RpcError | None) -> bool:
        if code != grpc.StatusCode.OUT_OF_RANGE:
            return False
        if self._on_gap == "raise" or self.cursor.snapshot_on_gap:
            _, details = status_of(err) if err is not None else (code, "")
            raise ResumeGap(
                f"{self.what}: cannot resume after sequence {self.cursor.last_sequence}: {details}",
                code,
                details,
            ) from err
        self.cursor.on_out_of_range()
        return True


class OrderFollow(ReconnectingStream[order_pb2.OrderStatusUpdate, order_pb2.OrderStatusUpdate]):
    """OrderService.StreamOrderUpdates until a terminal status (DELIVERED, CANCELLED,
    EXPIRED), reopened after a transient end; a status already passed on is not repeated."""

    what = "StreamOrderUpdates"

    def __init__(
        self,
        open_call: Callable[[order_pb2.OrderSubscriptionRequest], grpc.Call],
        order_id: str,
        *,
        reconnect: RetryPolicy = DEFAULT_RECONNECT,
        reroute: Callable[[grpc.RpcError], bool] | None = None,
    ) -> None:
        super().__init__(reconnect, reroute)
        self._open_call = open_call
        self._order_id = order_id
        self.cursor = OrderCursor()

    def _open(self) -> grpc.Call:
        return self._open_call(order_pb2.OrderSubscriptionRequest(order_id=self._order_id))

    def _accept(self, message: order_pb2.OrderStatusUpdate) -> order_pb2.OrderStatusUpdate | None:
        return message if self.cursor.accept(message) else None

    def _done(self) -> bool:
        return self.cursor.finished
