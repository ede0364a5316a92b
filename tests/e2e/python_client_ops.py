#!/usr/bin/env python3
"""Changes and reads for tests/e2e/python_client_test.sh, made through the feedclient package.

  python_client_ops.py --server ADDR changes --watched w1,w2 --other x1 --rounds N
      per round: AdjustStock +1 on each watched SKU, a 1-unit Reserve on the first, and an
      AdjustStock on each --other SKU; prints `watched_seq=N` for every change of a watched
      level (the sequences a watch of those SKUs must show) and `last_seq=N` at the end.
  python_client_ops.py --server ADDR set SKU QTY        prints `seq=N`
  python_client_ops.py --server ADDR add SKU DELTA      prints `seq=N`
  python_client_ops.py --server ADDR level SKU          prints `on_hand=.. reserved=.. available=..`
  python_client_ops.py --server ADDR order-flow SKU     an order followed to DELIVERED; prints
      `statuses=CONFIRMED,PAID,...` as follow_order saw them, and `last_seq=N`
  python_client_ops.py --server ADDR cluster --skus N    cluster mode, through the one node
      ADDR: N SKUs stocked, reserved, committed by id, read back, each on its owner; prints
      `shards=S reserved=N committed=N`
"""

from __future__ import annotations

import argparse
import sys
import threading

from feedclient import Client, FeedError, Line
from feedclient.pb import inventory_pb2


def changes(client: Client, args: argparse.Namespace) -> None:
    watched = [s for s in args.watched.split(",") if s]
    others = [s for s in args.other.split(",") if s]
    last = 0
    for _ in range(args.rounds):
        for sku in watched:
            r = client.adjust_stock(sku, 1, reason="e2e")
            print(f"watched_seq={r.level.sequence}")
            last = max(last, r.sequence)
        hold = client.reserve([Line(watched[0], 1)], ttl_ms=600_000)
        for level in hold.levels:
            print(f"watched_seq={level.sequence}")
        last = max(last, hold.sequence)
        for sku in others:
            last = max(last, client.adjust_stock(sku, 1, reason="e2e").sequence)
    print(f"last_seq={last}")


def order_flow(client: Client, sku: str) -> None:
    order = client.create_order("cust-e2e", [Line(sku, 1)], total_amount=9.5)
    seen: list[str] = []
    follow = client.follow_order(order.order_id)
    reader = threading.Thread(target=lambda: seen.extend(u.status for u in follow), daemon=True)
    reader.start()
    last = client.pay_order(order.order_id, "pay-e2e").sequence
    for stage in ("PACKING", "DISPATCHED", "DELIVERED"):
        last = client.advance_order(order.order_id, stage).sequence
    reader.join(10)
    if reader.is_alive():
        follow.stop()
        raise SystemExit(f"follow_order did not end at DELIVERED; saw {seen}")
    print(f"statuses={','.join(seen)}")
    print(f"last_seq={last}")


def cluster(client: Client, skus: int) -> None:
    shards: set[str] = set()
    committed = 0
    for i in range(skus):
        sku = f"cluster-{i}"
        client.adjust_stock(sku, 10, mode="set", reason="e2e")
        hold = client.reserve([Line(sku, 2)])
        rid = hold.reservation.reservation_id
        shards.add(rid.split("-")[1])  # "rsv-s3-17" -> "s3": the shard that answered
        client.commit(rid)
        committed += 1
        got = client.get_reservation(rid)
        if got.state != inventory_pb2.RESERVATION_STATE_COMMITTED:
            raise SystemExit(f"{rid}: state {got.state} after commit")
        level = client.get_stock([sku]).levels[0]
        if (level.on_hand, level.reserved) != (8, 0):
            raise SystemExit(f"{sku}: on_hand={level.on_hand} reserved={level.reserved}")
    # Streams open on their shard's owner through the same one address.
    streams = 0
    for i in range(min(skus, 6)):
        sku = f"cluster-{i}"
        watch = client.watch_stock([sku])
        for update in watch:
            if update.kind == inventory_pb2.StockUpdate.KIND_SNAPSHOT_END:
                client.reserve([Line(sku, 1)])
            elif update.kind == inventory_pb2.StockUpdate.KIND_CHANGE:
                if (update.level.on_hand, update.level.reserved) != (8, 1):
                    raise SystemExit(f"{sku}: change {update}")
                watch.stop()
        order = client.create_order("customer-1", [Line(sku, 1)])
        follow = client.follow_order(order.order_id)
        first = next(iter(follow))
        follow.stop()
        if first.order_id != order.order_id:
            raise SystemExit(f"follow_order {order.order_id}: {first}")
        streams += 2
    print(f"shards={len(shards)} reserved={skus} committed={committed} streams={streams}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("changes")
    p.add_argument("--watched", required=True)
    p.add_argument("--other", default="")
    p.add_argument("--rounds", type=int, default=3)
    p = sub.add_parser("set")
    p.add_argument("sku")
    p.add_argument("quantity", type=int)
    p = sub.add_parser("add")
    p.add_argument("sku")
    p.add_argument("delta", type=int)
    p = sub.add_parser("level")
    p.add_argument("sku")
    p = sub.add_parser("order-flow")
    p.add_argument("sku")
    p = sub.add_parser("cluster")
    p.add_argument("--skus", type=int, default=40)
    args = parser.parse_args()

    with Client(args.server, timeout=5.0) as client:
        try:
            if args.cmd == "changes":
                changes(client, args)
            elif args.cmd == "set":
                print(f"seq={client.adjust_stock(args.sku, args.quantity, mode='set').sequence}")
            elif args.cmd == "add":
                print(f"seq={client.adjust_stock(args.sku, args.delta).sequence}")
            elif args.cmd == "level":
                levels = client.get_stock([args.sku]).levels
                if len(levels) != 1:
                    raise SystemExit(f"expected one level of {args.sku}, got {len(levels)}")
                lv = levels[0]
                print(f"on_hand={lv.on_hand} reserved={lv.reserved} available={lv.available}")
            elif args.cmd == "order-flow":
                order_flow(client, args.sku)
            elif args.cmd == "cluster":
                cluster(client, args.skus)
        except FeedError as err:
            print(f"python_client_ops {args.cmd}: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
