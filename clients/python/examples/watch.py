#!/usr/bin/env python3
"""Watch stock levels: the snapshot, then every change, across server restarts.

One line per update, flushed at once:
  seq=N sku=S location=L on_hand=.. reserved=.. available=.. kind=snapshot|change [conflated=true]
(the end of a snapshot is reported on stderr). Ends after --max-updates lines, after
--idle-exit seconds without an update, or on SIGINT/SIGTERM; exit status 0 then.

  python watch.py --server 127.0.0.1:50051 sku-101 sku-102
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from _common import add_connection_args, connect
from feedclient import FeedError, StockKey
from feedclient.pb import inventory_pb2

SU = inventory_pb2.StockUpdate


def format_update(update: inventory_pb2.StockUpdate) -> str:
    lv = update.level
    kind = "snapshot" if update.kind == SU.KIND_SNAPSHOT else "change"
    line = (f"seq={update.sequence} sku={lv.sku} location={lv.location} on_hand={lv.on_hand} "
            f"reserved={lv.reserved} available={lv.available} kind={kind}")
    return line + (" conflated=true" if update.conflated else "")


def parse_key(text: str) -> StockKey:
    sku, _, location = text.partition("@")
    return StockKey(sku, location)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_connection_args(parser)
    parser.add_argument("keys", nargs="*", metavar="SKU[@LOCATION]", help="levels to watch (none: all)")
    parser.add_argument("--max-updates", type=int, default=0, help="exit after this many lines (0: no limit)")
    parser.add_argument("--idle-exit", type=float, default=0.0,
                        help="exit after this many seconds without an update (0: never)")
    parser.add_argument("--resume-after", type=int, default=0,
                        help="start after this sequence instead of with a snapshot")
    args = parser.parse_args()

    client = connect(args)
    watch = client.watch_stock([parse_key(k) for k in args.keys], resume_after=args.resume_after)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: watch.stop())

    last_update = time.monotonic()
    if args.idle_exit > 0:
        def watchdog() -> None:
            while not watch.stopped:
                if time.monotonic() - last_update > args.idle_exit:
                    print(f"watch: no update for {args.idle_exit:g} s, exiting", file=sys.stderr, flush=True)
                    watch.stop()
                time.sleep(0.1)

        threading.Thread(target=watchdog, daemon=True).start()

    printed = 0
    try:
        for update in watch:
            last_update = time.monotonic()
            if update.kind == SU.KIND_SNAPSHOT_END:
                print(f"watch: snapshot complete at seq={update.sequence}", file=sys.stderr, flush=True)
                continue
            print(format_update(update), flush=True)
            printed += 1
            if args.max_updates and printed >= args.max_updates:
                break
    except FeedError as err:
        print(f"watch: {err}", file=sys.stderr)
        return 1
    finally:
        watch.stop()
        client.close()
    print(f"watch: {printed} updates, last seq={watch.last_sequence}, reconnects={watch.reconnects}",
          file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
