"""An in-process gRPC server with scripted fakes of the two services."""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
import pytest

from feedclient import Backoff, Client, RetryPolicy
from feedclient.pb import inventory_pb2, inventory_pb2_grpc, order_pb2, order_pb2_grpc
from feedclient.retry import STREAM_RETRYABLE

# How long a fake stream that was told to stay open waits for the client to go away.
HOLD_OPEN_LIMIT = 10.0


def hold_open(context: grpc.ServicerContext) -> None:
    deadline = time.monotonic() + HOLD_OPEN_LIMIT
    while context.is_active() and time.monotonic() < deadline:
        time.sleep(0.01)


class FakeInventory(inventory_pb2_grpc.InventoryServiceServicer):
    """Reserve follows `reserve_script` ("unavailable", "short", "invalid", "slow", "ok"; then
    "ok") and honours idempotency keys like the server. WatchStock plays `watch_script`:
    one (updates, end_code) per call; end_code None keeps the stream open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reserve_script: list[str] = []
        self.reserve_requests: list[inventory_pb2.ReserveRequest] = []
        self.applied: dict[str, inventory_pb2.ReserveResponse] = {}
        self.metadata: list[dict[str, str]] = []
        self.watch_script: list[tuple[list[inventory_pb2.StockUpdate], grpc.StatusCode | None]] = []
        self.watch_requests: list[inventory_pb2.WatchStockRequest] = []

    def Reserve(self, request, context):
        with self.lock:
            self.reserve_requests.append(request)
            self.metadata.append(dict(context.invocation_metadata()))
            action = self.reserve_script.pop(0) if self.reserve_script else "ok"
            if action == "unavailable":
                context.abort(grpc.StatusCode.UNAVAILABLE, "scripted: unavailable")
            if action == "short":
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "scripted: stock short")
            if action == "invalid":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "scripted: lines[0].quantity")
            key = request.idempotency_key
            if key in self.applied:
                reply = inventory_pb2.ReserveResponse()
                reply.CopyFrom(self.applied[key])
                reply.replayed = True
                return reply
            n = len(self.applied) + 1
            reply = inventory_pb2.ReserveResponse(
                reservation=inventory_pb2.Reservation(reservation_id=f"rsv-{n}", lines=request.lines),
                sequence=n,
            )
            self.applied[key] = reply
        if action == "slow":  # applied, but the reply comes after the client's deadline
            time.sleep(0.6)
        return reply

    def WatchStock(self, request, context):
        with self.lock:
            self.watch_requests.append(request)
            updates, end = self.watch_script.pop(0) if self.watch_script else ([], None)
        for update in updates:
            yield update
        if end is None:
            hold_open(context)
        else:
            context.abort(end, f"scripted: {end.name}")


class FakeOrders(order_pb2_grpc.OrderServiceServicer):
    """StreamOrderUpdates plays `script` like FakeInventory.WatchStock; end_code OK ends the
    stream normally."""

    def __init__(self) -> None:
        self.script: list[tuple[list[order_pb2.OrderStatusUpdate], grpc.StatusCode | None]] = []
        self.requests: list[order_pb2.OrderSubscriptionRequest] = []

    def StreamOrderUpdates(self, request, context):
        self.requests.append(request)
        updates, end = self.script.pop(0) if self.script else ([], None)
        for update in updates:
            yield update
        if end is None:
            hold_open(context)
        elif end != grpc.StatusCode.OK:
            context.abort(end, f"scripted: {end.name}")


class Fakes:
    def __init__(self) -> None:
        self.inventory = FakeInventory()
        self.orders = FakeOrders()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        inventory_pb2_grpc.add_InventoryServiceServicer_to_server(self.inventory, self.server)
        order_pb2_grpc.add_OrderServiceServicer_to_server(self.orders, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


FAST_RETRY = RetryPolicy(attempts=4, backoff=Backoff(0.01, 0.05))
FAST_RECONNECT = RetryPolicy(attempts=4, backoff=Backoff(0.01, 0.05), retryable=STREAM_RETRYABLE)


@pytest.fixture
def fakes():
    f = Fakes()
    yield f
    f.server.stop(grace=None)


@pytest.fixture
def client(fakes):
    c = Client(fakes.address, token="t0ken", timeout=0.3, retry=FAST_RETRY, reconnect=FAST_RECONNECT)
    yield c
    c.close()
