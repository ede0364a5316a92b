"""Reading the server's Kafka records: an events.v1.Event in the record value, protobuf or
the proto3 JSON mapping by the `content-type` header; and deduplication by event_id (the
relay delivers at least once). No Kafka client here: these take the record's parts."""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, Sequence

from google.protobuf import json_format
from google.protobuf.message import DecodeError

from feedclient.pb import events_pb2

PROTOBUF = "application/protobuf"
JSON = "application/json"

Headers = Iterable[tuple[str, bytes | str | None]]


class EventDecodeError(ValueError):
    """A record whose value is not an events.v1.Event in the format its content-type names."""


def header(headers: Headers | None, name: str) -> str | None:
    """The first value of header `name` (case-insensitive), decoded as UTF-8."""
    for key, value in headers or ():
        if key.lower() == name.lower():
            if value is None:
                return ""
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return None


def decode_event(value: bytes, content_type: str | None) -> events_pb2.Event:
    """Parse a record value; a missing content-type is read as protobuf (the server's default)."""
    kind = (content_type or PROTOBUF).split(";")[0].strip().lower()
    event = events_pb2.Event()
    try:
        if kind in (PROTOBUF, "application/x-protobuf"):
            event.ParseFromString(value)
        elif kind == JSON:
            json_format.Parse(value, event, ignore_unknown_fields=True)
        else:
            raise EventDecodeError(f"unsupported content-type {content_type!r}")
    except (DecodeError, json_format.ParseError, UnicodeDecodeError) as exc:
        raise EventDecodeError(f"cannot decode a {kind} events.v1.Event: {exc}") from exc
    if not event.event_id:
        raise EventDecodeError("event without event_id")
    return event


def decode_record(value: bytes, headers: Sequence[tuple[str, bytes | None]] | None) -> events_pb2.Event:
    return decode_event(value, header(headers, "content-type"))


class Deduplicator:
    """Remembers the most recent `capacity` event ids: `first_time(id)` is True once per id
    (redeliveries come close to the original, so a bounded window suffices)."""

    def __init__(self, capacity: int = 1_000_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.duplicates = 0

    def first_time(self, event_id: str) -> bool:
        if event_id in self._seen:
            self._seen.move_to_end(event_id)
            self.duplicates += 1
            return False
        self._seen[event_id] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._seen)
