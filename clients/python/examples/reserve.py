#!/usr/bin/env python3
"""Reserve stock, retrying transient failures with one idempotency key.

  python reserve.py --server 127.0.0.1:50051 sku-101:2 sku-102@w1:1 --key checkout-42

Every attempt carries the same key (--key, or one generated and printed), so the hold is
made once however many attempts it takes; running it again with the same key prints the
first result with replayed=true. Output: one `reservation=...` line, then one line per level.
Exit status: 0 held, 2 stock short, 3 invalid request, 4 server unavailable after the
attempts (the key is printed: retry later with it), 1 any other error.
"""

from __future__ import annotations

import argparse
import sys

from _common import add_connection_args, connect
from feedclient import FeedError, InvalidRequest, Line, RetryEvent, StockShortage, Unavailable, new_idempotency_key
from feedclient.pb import inventory_pb2


def parse_line(text: str) -> Line:
    key, sep, qty = text.rpartition(":")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected SKU[@LOCATION]:QUANTITY, got {text!r}")
    sku, _, location = key.partition("@")
    try:
        return Line(sku, int(qty), location)
    except ValueError:
        raise argparse.ArgumentTypeError(f"quantity is not a number in {text!r}") from None


def report_retry(event: RetryEvent) -> None:
    print(f"reserve: attempt {event.attempt} failed ({event.code.name}: {event.details}), "
          f"retrying in {event.delay:.2f} s with key {event.idempotency_key}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_connection_args(parser)
    parser.add_argument("lines", nargs="+", type=parse_line, metavar="SKU[@LOCATION]:QTY")
    parser.add_argument("--key", help="idempotency key (default: a new one)")
    parser.add_argument("--attempts", type=int, default=10, help="attempts in all (default %(default)s)")
    parser.add_argument("--ttl-ms", type=int, default=0, help="hold time to live (0: server default)")
    parser.add_argument("--order-id", default="")
    args = parser.parse_args()

    key = args.key or new_idempotency_key()
    with connect(args) as client:
        try:
            reply = client.reserve(args.lines, ttl_ms=args.ttl_ms, order_id=args.order_id,
                                   idempotency_key=key, attempts=args.attempts, on_retry=report_retry)
        except StockShortage as err:
            print(f"reserve: not enough stock: {err.details}", file=sys.stderr)
            return 2
        except InvalidRequest as err:
            print(f"reserve: invalid request: {err.details}", file=sys.stderr)
            return 3
        except Unavailable as err:
            print(f"reserve: {err}; retry later with --key {key}", file=sys.stderr)
            return 4
        except FeedError as err:
            print(f"reserve: {err}", file=sys.stderr)
            return 1
    rsv = reply.reservation
    print(f"reservation={rsv.reservation_id} state={inventory_pb2.ReservationState.Name(rsv.state)} "
          f"replayed={str(reply.replayed).lower()} sequence={reply.sequence} key={key}")
    for lv in reply.levels:
        print(f"sku={lv.sku} location={lv.location} on_hand={lv.on_hand} reserved={lv.reserved} "
              f"available={lv.available}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
