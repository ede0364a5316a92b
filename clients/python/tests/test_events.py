"""Decoding Kafka record values and deduplicating by event id."""

import pytest
from google.protobuf import json_format

from feedclient.events import Deduplicator, EventDecodeError, decode_event, decode_record, header
from feedclient.pb import events_pb2, inventory_pb2


def sample():
    return events_pb2.Event(
        event_id="store1-7",
        sequence=7,
        type="inventory.stock.changed",
        key="sku-1",
        stock_changed=events_pb2.StockChanged(level=inventory_pb2.StockLevel(sku="sku-1", on_hand=4), delta_on_hand=-1),
    )


def test_protobuf_and_json_values_decode_to_the_same_event():
    ev = sample()
    from_pb = decode_record(ev.SerializeToString(), [("content-type", b"application/protobuf"), ("ce_id", b"store1-7")])
    from_json = decode_record(json_format.MessageToJson(ev).encode(), [("Content-Type", b"application/json")])
    assert from_pb == ev
    assert from_json == ev
    assert from_json.stock_changed.level.on_hand == 4


def test_missing_content_type_means_protobuf():
    assert decode_event(sample().SerializeToString(), None).event_id == "store1-7"


def test_bad_values_raise_a_decode_error():
    with pytest.raises(EventDecodeError):
        decode_event(b"{not json", "application/json")
    with pytest.raises(EventDecodeError):
        decode_event(b"\xff\xff\xff", "application/protobuf")
    with pytest.raises(EventDecodeError):
        decode_event(sample().SerializeToString(), "text/plain")
    with pytest.raises(EventDecodeError, match="event_id"):
        decode_event(events_pb2.Event(sequence=1).SerializeToString(), "application/protobuf")


def test_header_lookup():
    hs = [("ce_type", b"order.receipt"), ("sequence", b"12"), ("empty", None)]
    assert header(hs, "SEQUENCE") == "12"
    assert header(hs, "empty") == ""
    assert header(hs, "absent") is None
    assert header(None, "x") is None


def test_deduplicator_passes_each_id_once():
    d = Deduplicator()
    ids = ["s-1", "s-2", "s-1", "s-3", "s-2", "s-2"]
    assert [d.first_time(i) for i in ids] == [True, True, False, True, False, False]
    assert d.duplicates == 3
    assert len(d) == 3


def test_deduplicator_window_is_bounded():
    d = Deduplicator(capacity=2)
    assert d.first_time("a") and d.first_time("b") and d.first_time("c")
    assert len(d) == 2
    assert not d.first_time("c")
    assert d.first_time("a"), "forgotten once out of the window"
