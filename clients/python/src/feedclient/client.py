"""Client: the typed entry point. Unary calls get a deadline and retries (mutations always
with one idempotency key for all their attempts); the two server streams reconnect by
themselves. The raw stubs are there too (`client.inventory`, `client.orders`)."""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Literal, TypeVar

import grpc

from feedclient.channel import PathOrBytes, auth_metadata, make_channel
from feedclient.keys import key_or_new
from feedclient.pb import InventoryServiceStub, OrderServiceStub, inventory_pb2, order_pb2
from feedclient.retry import OnRetry, RetryPolicy, call_with_retry
from feedclient.streams import DEFAULT_RECONNECT, OrderFollow, StockWatch
from feedclient.values import KeyLike, LineLike, as_keys, as_lines

R = TypeVar("R")

_ADJUST_MODES = {"delta": inventory_pb2.ADJUST_MODE_DELTA, "set": inventory_pb2.ADJUST_MODE_SET}


class Client:
    """A connection to one feed server.

    server:   "host:port".
    tls_ca:   PEM CA file (path or bytes) to verify the server with; turns TLS on.
    tls_cert, tls_key: client certificate and key for mutual TLS.
    token:    bearer token sent as `authorization: Bearer <token>` on every call.
    timeout:  deadline of each unary attempt, in seconds.
    retry:    attempts and backoff of unary calls (default: 6 attempts, 0.1 s doubling to 2 s).
    reconnect: attempts and backoff of stream reopening (consecutive attempts receiving nothing).
    channel:  an existing channel to use instead (then server and the TLS settings are unused).
    """

    def __init__(
        self,
        server: str,
        tls_ca: PathOrBytes | None = None,
        token: str | None = None,
        timeout: float = 10.0,
        *,
        tls_cert: PathOrBytes | None = None,
        tls_key: PathOrBytes | None = None,
        retry: RetryPolicy = RetryPolicy(),
        reconnect: RetryPolicy = DEFAULT_RECONNECT,
        channel_options: Iterable[tuple[str, object]] = (),
        channel: grpc.Channel | None = None,
    ) -> None:
        self.server = server
        self.timeout = timeout
        self.retry = retry
        self.reconnect = reconnect
        self._metadata = auth_metadata(token)
        self._owns_channel = channel is None
        self.channel = channel or make_channel(
            server, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key, options=tuple(channel_options)
        )
        self.inventory = InventoryServiceStub(self.channel)
        self.orders = OrderServiceStub(self.channel)

    def close(self) -> None:
        if self._owns_channel:
            self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ------------------------------------------------------------------------------
    def _policy(self, attempts: int | None) -> RetryPolicy:
        return self.retry if attempts is None else dataclasses.replace(self.retry, attempts=attempts)

    def _unary(
        self,
        method: Callable[..., R],
        request: object,
        what: str,
        *,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> R:
        key = getattr(request, "idempotency_key", None) or None

        def attempt() -> R:
            return method(request, timeout=self.timeout, metadata=self._metadata)

        return call_with_retry(
            attempt, self._policy(attempts), what=what, idempotency_key=key, on_retry=on_retry
        )

    # --- stock -----------------------------------------------------------------------------------
    def get_stock(self, keys: Iterable[KeyLike], *, attempts: int | None = None) -> inventory_pb2.GetStockResponse:
        """Levels of many keys in one call (a key with an empty location: every location)."""
        req = inventory_pb2.GetStockRequest(keys=as_keys(keys))
        return self._unary(self.inventory.GetStock, req, "GetStock", attempts=attempts)

    def adjust_stock(
        self,
        sku: str,
        quantity: int,
        *,
        location: str = "",
        mode: Literal["delta", "set"] = "delta",
        reason: str = "",
        allow_backorder: bool | None = None,
        idempotency_key: str | None = None,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> inventory_pb2.AdjustStockResponse:
        """on_hand += quantity (mode="delta") or on_hand = quantity (mode="set")."""
        if mode not in _ADJUST_MODES:
            raise ValueError('mode must be "delta" or "set"')
        req = inventory_pb2.AdjustStockRequest(
            sku=sku,
            location=location,
            mode=_ADJUST_MODES[mode],
            quantity=quantity,
            reason=reason,
            idempotency_key=key_or_new(idempotency_key),
        )
        if allow_backorder is not None:
            req.allow_backorder = allow_backorder
        return self._unary(self.inventory.AdjustStock, req, "AdjustStock", attempts=attempts, on_retry=on_retry)

    def reserve(
        self,
        lines: Iterable[LineLike],
        *,
        ttl_ms: int = 0,
        reservation_id: str = "",
        order_id: str = "",
        idempotency_key: str | None = None,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> inventory_pb2.ReserveResponse:
        """Hold stock for all lines or none. Retries UNAVAILABLE / DEADLINE_EXCEEDED (and the
        CANCELLED of a shutting-down server) with the same idempotency key, generated when
        none is given: a hold is never made twice. StockShortage when stock is short,
        InvalidRequest for bad input, Unavailable (carrying the key) when attempts run out."""
        req = inventory_pb2.ReserveRequest(
            lines=[line.to_pb() for line in as_lines(lines)],
            ttl_ms=ttl_ms,
            reservation_id=reservation_id,
            order_id=order_id,
            idempotency_key=key_or_new(idempotency_key),
        )
        return self._unary(self.inventory.Reserve, req, "Reserve", attempts=attempts, on_retry=on_retry)

    def commit(
        self,
        reservation_id: str,
        *,
        idempotency_key: str | None = None,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> inventory_pb2.CommitResponse:
        req = inventory_pb2.CommitRequest(
            reservation_id=reservation_id, idempotency_key=key_or_new(idempotency_key)
        )
        return self._unary(self.inventory.Commit, req, "Commit", attempts=attempts, on_retry=on_retry)

    def release(
        self,
        reservation_id: str,
        *,
        reason: str = "",
        idempotency_key: str | None = None,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> inventory_pb2.ReleaseResponse:
        req = inventory_pb2.ReleaseRequest(
            reservation_id=reservation_id, reason=reason, idempotency_key=key_or_new(idempotency_key)
        )
        return self._unary(self.inventory.Release, req, "Release", attempts=attempts, on_retry=on_retry)

    def get_reservation(self, reservation_id: str) -> inventory_pb2.Reservation:
        req = inventory_pb2.GetReservationRequest(reservation_id=reservation_id)
        return self._unary(self.inventory.GetReservation, req, "GetReservation")

    def watch_stock(
        self,
        keys: Iterable[KeyLike] = (),
        *,
        resume_after: int = 0,
        on_gap: Literal["snapshot", "raise"] = "snapshot",
        reconnect: RetryPolicy | None = None,
    ) -> StockWatch:
        """Stock updates of `keys` (SKU strings or StockKey; none: every level): with
        resume_after=0 a snapshot (KIND_SNAPSHOT rows, KIND_SNAPSHOT_END) then every change,
        else every change after that sequence. Reconnects by itself without gap or duplicate;
        iterate it, and stop() it (from any thread) to end."""

        def open_call(req: inventory_pb2.WatchStockRequest) -> grpc.Call:
            return self.inventory.WatchStock(req, metadata=self._metadata)

        return StockWatch(
            open_call,
            as_keys(keys),
            resume_after=resume_after,
            on_gap=on_gap,
            reconnect=reconnect or self.reconnect,
        )

    # --- orders ----------------------------------------------------------------------------------
    def create_order(
        self,
        customer_id: str,
        lines: Iterable[LineLike],
        *,
        total_amount: float = 0.0,
        hold_ttl_ms: int = 0,
        idempotency_key: str | None = None,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> order_pb2.CreateOrderResponse:
        req = order_pb2.CreateOrderRequest(
            customer_id=customer_id,
            lines=[line.to_order_pb() for line in as_lines(lines)],
            total_amount=total_amount,
            hold_ttl_ms=hold_ttl_ms,
            idempotency_key=key_or_new(idempotency_key),
        )
        return self._unary(self.orders.CreateOrder, req, "CreateOrder", attempts=attempts, on_retry=on_retry)

    def pay_order(
        self,
        order_id: str,
        payment_reference: str = "",
        *,
        idempotency_key: str | None = None,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> order_pb2.OrderResponse:
        req = order_pb2.PayOrderRequest(
            order_id=order_id,
            payment_reference=payment_reference,
            idempotency_key=key_or_new(idempotency_key),
        )
        return self._unary(self.orders.PayOrder, req, "PayOrder", attempts=attempts, on_retry=on_retry)

    def advance_order(
        self,
        order_id: str,
        target: int | str,
        *,
        details: str = "",
        idempotency_key: str | None = None,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> order_pb2.OrderResponse:
        """One step forward: target is an OrderStatus value or name ("PACKING" or
        "ORDER_STATUS_PACKING")."""
        if isinstance(target, str):
            name = target if target.startswith("ORDER_STATUS_") else f"ORDER_STATUS_{target.upper()}"
            target = order_pb2.OrderStatus.Value(name)
        req = order_pb2.AdvanceOrderRequest(
            order_id=order_id, target=target, details=details, idempotency_key=key_or_new(idempotency_key)
        )
        return self._unary(self.orders.AdvanceOrder, req, "AdvanceOrder", attempts=attempts, on_retry=on_retry)

    def cancel_order(
        self,
        order_id: str,
        *,
        reason: str = "",
        idempotency_key: str | None = None,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> order_pb2.OrderResponse:
        req = order_pb2.CancelOrderRequest(
            order_id=order_id, reason=reason, idempotency_key=key_or_new(idempotency_key)
        )
        return self._unary(self.orders.CancelOrder, req, "CancelOrder", attempts=attempts, on_retry=on_retry)

    def get_order(self, order_id: str) -> order_pb2.Order:
        return self._unary(self.orders.GetOrder, order_pb2.GetOrderRequest(order_id=order_id), "GetOrder")

    def follow_order(self, order_id: str, *, reconnect: RetryPolicy | None = None) -> OrderFollow:
        """The order's current status, then each change, ending after a terminal status
        (DELIVERED, CANCELLED, EXPIRED); reconnects by itself."""

        def open_call(req: order_pb2.OrderSubscriptionRequest) -> grpc.Call:
            return self.orders.StreamOrderUpdates(req, metadata=self._metadata)

        return OrderFollow(open_call, order_id, reconnect=reconnect or self.reconnect)
