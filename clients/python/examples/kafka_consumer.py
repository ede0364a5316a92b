#!/usr/bin/env python3
"""Consume the server's Kafka topics: decode each record as an events.v1.Event (by its
content-type header: protobuf or JSON), drop redeliveries by event_id, print one line per
event:
  seq=N id=EVENT_ID key=KEY type=TYPE topic=TOPIC

  python kafka_consumer.py --brokers 127.0.0.1:19092 \
      --topics inventory.stock.v1,orders.status.v1,orders.receipts.v1 --idle-exit 5

Needs confluent-kafka (pip install confluent-kafka). Reads from the beginning of the topics
with a fresh consumer group unless --group is given. Ends after --idle-exit seconds without
a new event, once every sequence 1..--expect has been seen, after --timeout seconds, or on
SIGINT/SIGTERM. Exit status 1 when --expect was given and sequences are missing.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError

from feedclient.events import Deduplicator, EventDecodeError, decode_record, header

_stop = False


def _request_stop(*_: object) -> None:
    global _stop
    _stop = True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="127.0.0.1:19092", help="bootstrap servers")
    parser.add_argument("--topics", default="inventory.stock.v1,orders.status.v1,orders.receipts.v1",
                        help="comma-separated topics (default: the server's defaults)")
    parser.add_argument("--group", help="consumer group (default: a new one, reading from the beginning)")
    parser.add_argument("--expect", type=int, default=0, help="end once sequences 1..N have all been seen")
    parser.add_argument("--idle-exit", type=float, default=0.0, help="end after this many seconds without a new event")
    parser.add_argument("--timeout", type=float, default=0.0, help="end after this many seconds in all")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="librdkafka setting, repeatable (e.g. security.protocol=SSL)")
    args = parser.parse_args()

    conf: dict[str, object] = {
        "bootstrap.servers": args.brokers,
        "group.id": args.group or f"feedclient-example-{uuid.uuid4().hex[:12]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": bool(args.group),
    }
    for prop in args.property:
        key, sep, value = prop.partition("=")
        if not sep:
            parser.error(f"--property needs KEY=VALUE, got {prop!r}")
        conf[key] = value

    signal.signal(signal.SIGINT, _request_stop)
    signal.signal(signal.SIGTERM, _request_stop)
    consumer = Consumer(conf)
    consumer.subscribe([t for t in args.topics.split(",") if t])
    dedup = Deduplicator()
    seen: set[int] = set()
    started = last_new = time.monotonic()
    bad = 0
    try:
        while not _stop:
            now = time.monotonic()
            if args.expect and seen.issuperset(range(1, args.expect + 1)):
                break
            if args.idle_exit and now - last_new > args.idle_exit:
                break
            if args.timeout and now - started > args.timeout:
                break
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                # A topic the server has not created yet, or a broker that is restarting:
                # librdkafka recovers by itself.
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    print(f"kafka_consumer: {msg.error()}", file=sys.stderr, flush=True)
                continue
            headers = msg.headers() or []
            try:
                event = decode_record(msg.value() or b"", headers)
            except EventDecodeError as err:
                bad += 1
                print(f"kafka_consumer: skipped {msg.topic()}[{msg.partition()}]@{msg.offset()}: {err}",
                      file=sys.stderr, flush=True)
                continue
            ce_id = header(headers, "ce_id")
            if ce_id is not None and ce_id != event.event_id:
                print(f"kafka_consumer: header ce_id={ce_id} differs from event_id={event.event_id}",
                      file=sys.stderr, flush=True)
            if not dedup.first_time(event.event_id):
                continue
            last_new = time.monotonic()
            seen.add(event.sequence)
            key = (msg.key() or b"").decode("utf-8", "replace")
            print(f"seq={event.sequence} id={event.event_id} key={key} type={event.type} topic={msg.topic()}",
                  flush=True)
    finally:
        consumer.close()
    print(f"kafka_consumer: {len(dedup)} events, {dedup.duplicates} duplicates dropped, {bad} undecodable",
          file=sys.stderr, flush=True)
    if args.expect:
        missing = sorted(set(range(1, args.expect + 1)) - seen)
        if missing:
            print(f"kafka_consumer: missing sequences {missing[:20]}{' ...' if len(missing) > 20 else ''}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
