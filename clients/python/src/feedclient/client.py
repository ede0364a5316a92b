"""Client: the typed entry point. Unary calls get a deadline and retries (mutations always
with one idempotency key for all their attempts); the two server streams reconnect by
themselves; in cluster mode a unary call or a stream follows `feed-shard-owner` to the node
serving its shard (routing.py). The raw stubs are there too (`client.inventory`, `client.orders`)."""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable, Iterable, Literal, TypeVar

import grpc

from feedclient.channel import PathOrBytes, auth_metadata, make_channel
from feedclient.keys import key_or_new
from feedclient.pb import InventoryServiceStub, OrderServiceStub, inventory_pb2, order_pb2
from feedclient.retry import OnRetry, RetryPolicy, call_with_retry
from feedclient.routing import owner_of, shard_of_request
from feedclient.streams import DEFAULT_RECONNECT, OrderFollow, StockWatch
from feedclient.values import KeyLike, LineLike, as_keys, as_lines

R = TypeVar("R")

_ADJUST_MODES = {"delta": inventory_pb2.ADJUST_MODE_DELTA, "set": inventory_pb2.ADJUST_MODE_SET}


# How many times one attempt follows `feed-shard-owner` (a shard moving again meanwhile).
_MAX_REDIRECTS = 3


class Client:
    """A connection to one feed server, or to a cluster through any of its nodes.

    server:   "host:port".
    tls_ca:   PEM CA file (path or bytes) to verify the server with; turns TLS on.
    tls_cert, tls_key: client certificate and key for mutual TLS.
    token:    bearer token sent as `authorization: Bearer <token>` on every call.
    timeout:  deadline of each unary attempt, in seconds.
    retry:    attempts and backoff of unary calls (default: 6 attempts, 0.1 s doubling to 2 s).
    reconnect: attempts and backoff of stream reopening (consecutive attempts receiving nothing).
    channel:  an existing channel to use instead (then server and the TLS settings are unused).

    In cluster mode (docs/CLUSTER.md) a node that does not serve a call's shard names the one
    that does; the client calls it there, then learns the shard map (GetShardMap) and sends each
    call of a known shard straight to its owner, with the same TLS settings and token.
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
        self._channel_settings = dict(
            tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key, options=tuple(channel_options)
        )
        # Cluster mode, learned on the first wrong-node answer: shard count and owners.
        self._lock = threading.Lock()
        self._shard_count = 0
        self._owners: dict[int, str] = {}
        self._nodes: dict[str, tuple[grpc.Channel, InventoryServiceStub, OrderServiceStub]] = {}

    def close(self) -> None:
        if self._owns_channel:
            self.channel.close()
        with self._lock:
            for channel, _, _ in self._nodes.values():
                channel.close()
            self._nodes.clear()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ------------------------------------------------------------------------------
    def _policy(self, attempts: int | None) -> RetryPolicy:
        return self.retry if attempts is None else dataclasses.replace(self.retry, attempts=attempts)

    def _unary(
        self,
        service: Literal["inventory", "orders"],
        name: str,
        request: object,
        *,
        attempts: int | None = None,
        on_retry: OnRetry | None = None,
    ) -> R:
        key = getattr(request, "idempotency_key", None) or None

        def attempt() -> R:
            address = self._address_for(request)
            hops = 0
            while True:
                stub = self._stubs(address)[0 if service == "inventory" else 1]
                try:
                    return getattr(stub, name)(request, timeout=self.timeout, metadata=self._metadata)
                except grpc.RpcError as err:
                    owner = self._follow(request, address, err)
                    if owner is None or hops == _MAX_REDIRECTS:
                        raise
                    hops += 1
                    address = owner

        return call_with_retry(
            attempt, self._policy(attempts), what=name, idempotency_key=key, on_retry=on_retry
        )

    # --- cluster routing (routing.py) ---------------------------------------------------------
    def _address_for(self, request: object) -> str:
        with self._lock:
            if self._shard_count:
                shard = shard_of_request(request, self._shard_count)
                if shard is not None and shard in self._owners:
                    return self._owners[shard]
        return self.server

    def _stubs(self, address: str) -> tuple[InventoryServiceStub, OrderServiceStub]:
        if address == self.server:
            return self.inventory, self.orders
        with self._lock:
            if address not in self._nodes:
                channel = make_channel(address, **self._channel_settings)
                self._nodes[address] = (channel, InventoryServiceStub(channel), OrderServiceStub(channel))
            _, inventory, orders = self._nodes[address]
        return inventory, orders

    def _follow(self, request: object, address: str, err: grpc.RpcError) -> str | None:
        """The owner `err` names when `address` does not serve the request's shard (learned for
        next time). An owner that no longer answers is forgotten: the next attempt asks the
        node the client was given, which names the new one."""
        owner = owner_of(err)
        if owner is not None and owner != address:
            self._learn_owner(request, owner)
            return owner
        if isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.UNAVAILABLE:
            with self._lock:
                if self._shard_count:
                    shard = shard_of_request(request, self._shard_count)
                    if shard is not None and self._owners.get(shard) == address:
                        del self._owners[shard]
        return None

    def _routed_stream(
        self, service: Literal["inventory", "orders"], name: str
    ) -> tuple[Callable[[object], grpc.Call], Callable[[grpc.RpcError], bool]]:
        """How a server stream opens on its shard's owner, and follows a wrong-node answer."""
        last: dict[str, object] = {}

        def open_call(request: object) -> grpc.Call:
            address = self._address_for(request)
            last["request"], last["address"] = request, address
            stub = self._stubs(address)[0 if service == "inventory" else 1]
            return getattr(stub, name)(request, metadata=self._metadata)

        def reroute(err: grpc.RpcError) -> bool:
            return self._follow(last["request"], str(last["address"]), err) is not None

        return open_call, reroute

    def _learn_owner(self, request: object, owner: str) -> None:
        """The owner of the request's shard is `owner`; the first time, the whole map too."""
        if not self._shard_count:
            try:
                shard_map = self._stubs(owner)[0].GetShardMap(
                    inventory_pb2.GetShardMapRequest(), timeout=self.timeout, metadata=self._metadata
                )
            except grpc.RpcError:
                return  # the redirect itself still goes to the owner
            with self._lock:
                self._shard_count = shard_map.shard_count
                self._owners = {s.shard: s.address for s in shard_map.shards if s.epoch > 0}
        with self._lock:
            if self._shard_count:
                shard = shard_of_request(request, self._shard_count)
                if shard is not None:
                    self._owners[shard] = owner

    # --- stock -----------------------------------------------------------------------------------
    def get_stock(self, keys: Iterable[KeyLike], *, attempts: int | None = None) -> inventory_pb2.GetStockResponse:
        """Levels of many keys in one call (a key with an empty location: every location)."""
        req = inventory_pb2.GetStockRequest(keys=as_keys(keys))
        return self._unary("inventory", "GetStock", req, attempts=attempts)

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
        return self._unary("inventory", "AdjustStock", req, attempts=attempts, on_retry=on_retry)

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
        return self._unary("inventory", "Reserve", req, attempts=attempts, on_retry=on_retry)

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
        return self._unary("inventory", "Commit", req, attempts=attempts, on_retry=on_retry)

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
        return self._unary("inventory", "Release", req, attempts=attempts, on_retry=on_retry)

    def get_reservation(self, reservation_id: str) -> inventory_pb2.Reservation:
        req = inventory_pb2.GetReservationRequest(reservation_id=reservation_id)
        return self._unary("inventory", "GetReservation", req)

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

        open_call, reroute = self._routed_stream("inventory", "WatchStock")
        return StockWatch(
            open_call,
            as_keys(keys),
            resume_after=resume_after,
            on_gap=on_gap,
            reconnect=reconnect or self.reconnect,
            reroute=reroute,
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
        return self._unary("orders", "CreateOrder", req, attempts=attempts, on_retry=on_retry)

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
        return self._unary("orders", "PayOrder", req, attempts=attempts, on_retry=on_retry)

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
        return self._unary("orders", "AdvanceOrder", req, attempts=attempts, on_retry=on_retry)

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
        return self._unary("orders", "CancelOrder", req, attempts=attempts, on_retry=on_retry)

    def get_order(self, order_id: str) -> order_pb2.Order:
        return self._unary("orders", "GetOrder", order_pb2.GetOrderRequest(order_id=order_id))

    def follow_order(self, order_id: str, *, reconnect: RetryPolicy | None = None) -> OrderFollow:
        """The order's current status, then each change, ending after a terminal status
        (DELIVERED, CANCELLED, EXPIRED); reconnects by itself."""

        open_call, reroute = self._routed_stream("orders", "StreamOrderUpdates")
        return OrderFollow(open_call, order_id, reconnect=reconnect or self.reconnect, reroute=reroute)
