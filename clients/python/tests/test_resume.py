"""Resume bookkeeping of the stock watch and the order follow."""

from feedclient.keys import key_or_new, new_idempotency_key
from feedclient.pb import inventory_pb2, order_pb2
from feedclient.resume import WatchCursor, OrderCursor

SU = inventory_pb2.StockUpdate


def snap(seq, sku="a"):
    return SU(kind=SU.KIND_SNAPSHOT, sequence=seq, level=inventory_pb2.StockLevel(sku=sku))


def end(seq):
    return SU(kind=SU.KIND_SNAPSHOT_END, sequence=seq)


def change(seq, sku="a"):
    return SU(kind=SU.KIND_CHANGE, sequence=seq, level=inventory_pb2.StockLevel(sku=sku, sequence=seq))


def test_first_open_asks_for_a_snapshot():
    c = WatchCursor()
    req = c.request([inventory_pb2.StockKey(sku="a")])
    assert req.resume_after_sequence == 0
    assert not req.snapshot_on_gap
    assert [k.sku for k in req.keys] == ["a"]


def test_resume_point_follows_snapshot_cut_then_changes():
    c = WatchCursor()
    assert c.accept(snap(5)) and c.accept(snap(5, "b"))
    assert c.in_snapshot and c.last_sequence == 0, "no resume point before the snapshot ends"
    assert c.accept(end(5))
    assert c.last_sequence == 5 and not c.in_snapshot
    assert c.accept(change(7))
    assert c.accept(change(9))
    assert c.request([]).resume_after_sequence == 9


def test_duplicates_and_old_changes_are_dropped():
    c = WatchCursor(last_sequence=10)
    assert not c.accept(change(10)), "the resume point itself was already seen"
    assert not c.accept(change(3))
    assert c.accept(change(11))
    assert not c.accept(change(11))
    assert c.last_sequence == 11
    assert not c.accept(SU(kind=SU.KIND_UNSPECIFIED, sequence=99))
    assert c.last_sequence == 11


def test_out_of_range_asks_for_a_fresh_snapshot_once():
    c = WatchCursor(last_sequence=10)
    c.on_out_of_range()
    req = c.request([])
    assert req.resume_after_sequence == 10 and req.snapshot_on_gap
    c.on_open()
    assert c.accept(snap(50)) and c.accept(end(50))
    assert c.last_sequence == 50
    assert not c.snapshot_on_gap, "cleared once the fresh snapshot has ended"
    assert not c.request([]).snapshot_on_gap
    assert not c.accept(change(50)) and c.accept(change(51))


def test_a_snapshot_cut_short_is_started_over():
    c = WatchCursor()
    c.accept(snap(5))
    c.on_open()  # the stream broke before KIND_SNAPSHOT_END
    assert not c.in_snapshot
    assert c.request([]).resume_after_sequence == 0


def status(code, seq):
    return order_pb2.OrderStatusUpdate(
        order_id="o", status=order_pb2.OrderStatus.Name(code)[len("ORDER_STATUS_"):], status_code=code, sequence=seq
    )


def test_order_cursor_skips_the_repeated_current_status_and_stops_at_terminal():
    c = OrderCursor()
    assert c.accept(status(order_pb2.ORDER_STATUS_CONFIRMED, 4))
    assert c.accept(status(order_pb2.ORDER_STATUS_PAID, 6))
    # Reconnect: the server sends the current status first.
    assert not c.accept(status(order_pb2.ORDER_STATUS_PAID, 6))
    assert not c.finished
    assert c.accept(status(order_pb2.ORDER_STATUS_CANCELLED, 9))
    assert c.finished


def test_each_terminal_status_finishes():
    for code in (order_pb2.ORDER_STATUS_DELIVERED, order_pb2.ORDER_STATUS_CANCELLED, order_pb2.ORDER_STATUS_EXPIRED):
        c = OrderCursor()
        c.accept(status(code, 3))
        assert c.finished


def test_idempotency_keys_are_fresh_unless_given():
    keys = {new_idempotency_key() for _ in range(1000)}
    assert len(keys) == 1000
    assert all(k.startswith("py-") and len(k) < 64 for k in keys)
    assert key_or_new("mine") == "mine"
    assert key_or_new(None) != key_or_new(None)
    assert key_or_new("").startswith("py-")
