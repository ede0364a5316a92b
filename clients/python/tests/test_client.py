"""The Client against an in-process gRPC server with scripted failures."""

import threading
import time

import grpc
import pytest

from feedclient import Client, InvalidRequest, Line, ResumeGap, StockShortage, Unavailable
from feedclient.pb import inventory_pb2, order_pb2

from conftest import FAST_RETRY

SU = inventory_pb2.StockUpdate
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


def snap(seq, sku):
    return SU(kind=SU.KIND_SNAPSHOT, sequence=seq, level=inventory_pb2.StockLevel(sku=sku, sequence=seq))


def end(seq):
    return SU(kind=SU.KIND_SNAPSHOT_END, sequence=seq)


def change(seq, sku="a"):
    return SU(kind=SU.KIND_CHANGE, sequence=seq, level=inventory_pb2.StockLevel(sku=sku, sequence=seq))


def seqs(updates):
    return [(SU.Kind.Name(u.kind), u.sequence) for u in updates]


def test_reserve_retries_with_one_generated_key(fakes, client):
    fakes.inventory.reserve_script = ["unavailable", "unavailable"]
    retries = []
    reply = client.reserve([("a", 2)], on_retry=retries.append)
    keys = [r.idempotency_key for r in fakes.inventory.reserve_requests]
    assert len(keys) == 3
    assert keys[0] and len(set(keys)) == 1, f"every attempt must carry the same key: {keys}"
    assert [r.attempt for r in retries] == [1, 2]
    assert retries[0].idempotency_key == keys[0]
    assert reply.reservation.reservation_id == "rsv-1" and not reply.replayed
    assert len(fakes.inventory.applied) == 1
    assert fakes.inventory.metadata[0]["authorization"] == "Bearer t0ken"


def test_reserve_uses_the_callers_key_and_a_repeat_is_replayed(fakes, client):
    first = client.reserve([Line("a", 1, "w1")], idempotency_key="checkout-42")
    again = client.reserve([Line("a", 1, "w1")], idempotency_key="checkout-42")
    assert [r.idempotency_key for r in fakes.inventory.reserve_requests] == ["checkout-42", "checkout-42"]
    assert not first.replayed and again.replayed
    assert again.reservation.reservation_id == first.reservation.reservation_id
    assert fakes.inventory.reserve_requests[0].lines[0].location == "w1"


def test_a_timed_out_attempt_that_was_applied_is_not_applied_twice(fakes, client):
    fakes.inventory.reserve_script = ["slow"]
    reply = client.reserve([("a", 1)])
    assert reply.replayed, "the retry after DEADLINE_EXCEEDED must get the first result back"
    assert len(fakes.inventory.reserve_requests) == 2
    assert len(fakes.inventory.applied) == 1
    keys = {r.idempotency_key for r in fakes.inventory.reserve_requests}
    assert len(keys) == 1


def test_two_operations_get_two_keys(fakes, client):
    client.reserve([("a", 1)])
    client.reserve([("a", 1)])
    keys = [r.idempotency_key for r in fakes.inventory.reserve_requests]
    assert len(set(keys)) == 2
    assert len(fakes.inventory.applied) == 2


def test_stock_shortage_and_bad_input_are_not_retried(fakes, client):
    fakes.inventory.reserve_script = ["short"]
    with pytest.raises(StockShortage, match="stock short"):
        client.reserve([("a", 99)])
    fakes.inventory.reserve_script = ["invalid"]
    with pytest.raises(InvalidRequest):
        client.reserve([("a", 0)])
    assert len(fakes.inventory.reserve_requests) == 2


def test_lines_are_checked_before_any_call(client, fakes):
    with pytest.raises(ValueError):
        client.reserve([])
    with pytest.raises(TypeError):
        client.reserve(["a"])
    assert fakes.inventory.reserve_requests == []


def test_unreachable_server_gives_unavailable_with_the_key():
    with Client("127.0.0.1:1", timeout=0.5, retry=FAST_RETRY) as c:
        with pytest.raises(Unavailable) as info:
            c.reserve([("a", 1)], idempotency_key="k-7", attempts=3)
    assert info.value.attempts == 3
    assert info.value.idempotency_key == "k-7"


def test_watch_resumes_after_the_highest_sequence_without_gap_or_duplicate(fakes, client):
    fakes.inventory.watch_script = [
        ([snap(5, "a"), snap(5, "b"), end(5), change(6), change(8)], UNAVAILABLE),
        ([change(8), change(9)], grpc.StatusCode.CANCELLED),  # 8 again: a duplicate
        ([change(10)], grpc.StatusCode.RESOURCE_EXHAUSTED),
        ([change(11)], None),
    ]
    watch = client.watch_stock(["a", "b"])
    got = []
    for update in watch:
        got.append(update)
        if update.sequence == 11:
            watch.stop()
    assert seqs(got) == [
        ("KIND_SNAPSHOT", 5),
        ("KIND_SNAPSHOT", 5),
        ("KIND_SNAPSHOT_END", 5),
        ("KIND_CHANGE", 6),
        ("KIND_CHANGE", 8),
        ("KIND_CHANGE", 9),
        ("KIND_CHANGE", 10),
        ("KIND_CHANGE", 11),
    ]
    reqs = fakes.inventory.watch_requests
    assert [r.resume_after_sequence for r in reqs] == [0, 8, 9, 10]
    assert not any(r.snapshot_on_gap for r in reqs)
    assert [k.sku for k in reqs[0].keys] == ["a", "b"]
    assert watch.reconnects == 3 and watch.last_sequence == 11


def test_watch_falls_back_to_a_snapshot_on_out_of_range(fakes, client):
    fakes.inventory.watch_script = [
        ([], grpc.StatusCode.OUT_OF_RANGE),
        ([snap(40, "a"), end(40), change(41)], None),
    ]
    watch = client.watch_stock(["a"], resume_after=7)
    got = []
    for update in watch:
        got.append(update)
        if update.sequence == 41:
            watch.stop()
    reqs = fakes.inventory.watch_requests
    assert [(r.resume_after_sequence, r.snapshot_on_gap) for r in reqs] == [(7, False), (7, True)]
    assert seqs(got) == [("KIND_SNAPSHOT", 40), ("KIND_SNAPSHOT_END", 40), ("KIND_CHANGE", 41)]


def test_watch_can_raise_on_a_gap_instead(fakes, client):
    fakes.inventory.watch_script = [([], grpc.StatusCode.OUT_OF_RANGE)]
    with pytest.raises(ResumeGap):
        list(client.watch_stock(["a"], resume_after=7, on_gap="raise"))


def test_watch_gives_up_when_the_server_stays_away(fakes, client):
    fakes.inventory.watch_script = [([], UNAVAILABLE)] * 4
    with pytest.raises(Unavailable) as info:
        list(client.watch_stock(["a"]))
    assert info.value.attempts == 4
    assert len(fakes.inventory.watch_requests) == 4


def test_watch_stop_from_another_thread_ends_a_blocked_iteration(fakes, client):
    fakes.inventory.watch_script = [([snap(3, "a"), end(3)], None)]
    watch = client.watch_stock(["a"])
    timer = threading.Timer(0.3, watch.stop)
    started = time.monotonic()
    timer.start()
    got = list(watch)  # blocks on the open stream until stop()
    assert time.monotonic() - started < 3
    assert seqs(got) == [("KIND_SNAPSHOT", 3), ("KIND_SNAPSHOT_END", 3)]
    assert len(fakes.inventory.watch_requests) == 1, "a stopped watch does not reconnect"


def test_watch_closed_by_the_caller_cancels_its_call(fakes, client):
    fakes.inventory.watch_script = [([snap(3, "a"), end(3)], None)]
    watch = client.watch_stock(["a"])
    it = iter(watch)
    assert next(it).kind == SU.KIND_SNAPSHOT
    it.close()
    with pytest.raises(RuntimeError):
        iter(watch)  # one iteration per watch


def order_update(code, seq):
    name = order_pb2.OrderStatus.Name(code)[len("ORDER_STATUS_"):]
    return order_pb2.OrderStatusUpdate(order_id="o-1", status=name, status_code=code, sequence=seq)


def test_follow_order_reconnects_and_ends_at_a_terminal_status(fakes, client):
    fakes.orders.script = [
        ([order_update(order_pb2.ORDER_STATUS_CONFIRMED, 4), order_update(order_pb2.ORDER_STATUS_PAID, 6)], UNAVAILABLE),
        ([order_update(order_pb2.ORDER_STATUS_PAID, 6), order_update(order_pb2.ORDER_STATUS_DELIVERED, 10)], None),
    ]
    got = [u.status for u in client.follow_order("o-1")]
    assert got == ["CONFIRMED", "PAID", "DELIVERED"]
    assert [r.order_id for r in fakes.orders.requests] == ["o-1", "o-1"]


def test_follow_order_reopens_a_stream_that_ended_before_a_terminal_status(fakes, client):
    fakes.orders.script = [
        ([order_update(order_pb2.ORDER_STATUS_CONFIRMED, 4)], grpc.StatusCode.OK),
        ([order_update(order_pb2.ORDER_STATUS_EXPIRED, 5)], grpc.StatusCode.OK),
    ]
    assert [u.status for u in client.follow_order("o-1")] == ["CONFIRMED", "EXPIRED"]
