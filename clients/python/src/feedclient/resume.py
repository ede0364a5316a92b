"""Resume bookkeeping of the reconnecting streams, kept apart from gRPC so that it can be
tested alone: what to ask for when (re)opening a stream, and which received messages the
caller has not seen yet."""

from __future__ import annotations

from dataclasses import dataclass

from feedclient.pb import inventory_pb2, order_pb2

Kind = inventory_pb2.StockUpdate.Kind
SNAPSHOT = inventory_pb2.StockUpdate.KIND_SNAPSHOT
SNAPSHOT_END = inventory_pb2.StockUpdate.KIND_SNAPSHOT_END
CHANGE = inventory_pb2.StockUpdate.KIND_CHANGE

TERMINAL_ORDER_STATUSES = frozenset(
    {
        order_pb2.ORDER_STATUS_DELIVERED,
        order_pb2.ORDER_STATUS_CANCELLED,
        order_pb2.ORDER_STATUS_EXPIRED,
    }
)


@dataclass
class WatchCursor:
    """Where a stock watch stands.

    `last_sequence` is the highest sequence the caller has been given a complete view up to:
    the cut of a finished snapshot, or the newest change since. A reopened stream resumes
    after it; a change at or below it is a duplicate and is dropped. After OUT_OF_RANGE (the
    server no longer retains that far back) the next open asks for a fresh snapshot
    (`snapshot_on_gap`), and the flag clears once that snapshot has ended.
    """

    last_sequence: int = 0
    snapshot_on_gap: bool = False
    in_snapshot: bool = False

    def request(self, keys: list[inventory_pb2.StockKey]) -> inventory_pb2.WatchStockRequest:
        """The request that (re)opens the stream from where the caller is."""
        return inventory_pb2.WatchStockRequest(
            keys=keys,
            resume_after_sequence=self.last_sequence,
            snapshot_on_gap=self.snapshot_on_gap,
        )

    def on_open(self) -> None:
        """A new stream starts: a snapshot cut short by the last one is started over."""
        self.in_snapshot = False

    def accept(self, update: inventory_pb2.StockUpdate) -> bool:
        """Record a received update; True when the caller should see it."""
        if update.kind == SNAPSHOT:
            self.in_snapshot = True
            return True
        if update.kind == SNAPSHOT_END:
            self.in_snapshot = False
            self.snapshot_on_gap = False
            self.last_sequence = max(self.last_sequence, update.sequence)
            return True
        if update.kind == CHANGE:
            if update.sequence <= self.last_sequence:
                return False
            self.last_sequence = update.sequence
            return True
        return False  # KIND_UNSPECIFIED: nothing a caller can use

    def on_out_of_range(self) -> None:
        """The resume point is older than the server retains: ask for a fresh snapshot."""
        self.snapshot_on_gap = True


@dataclass
class OrderCursor:
    """Where an order follow stands. A reopened StreamOrderUpdates sends the current status
    first: it is passed on only when newer than the last one seen (statuses that came and
    went while disconnected are not replayed by the server; the current one always is)."""

    last_sequence: int = 0
    last_status: int = order_pb2.ORDER_STATUS_UNSPECIFIED
    finished: bool = False

    def accept(self, update: order_pb2.OrderStatusUpdate) -> bool:
        if update.sequence:
            fresh = update.sequence > self.last_sequence
        else:  # no sequence on the update: fall back to a change of status
            fresh = update.status_code != self.last_status
        if not fresh:
            return False
        self.last_sequence = max(self.last_sequence, update.sequence)
        self.last_status = update.status_code
        self.finished = update.status_code in TERMINAL_ORDER_STATUSES
        return True
