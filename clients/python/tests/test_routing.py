"""Cluster routing (routing.py, and the Client following feed-shard-owner): the server's shard
rule, ids that name their shard, and a call redirected from a node that does not serve it."""

from concurrent import futures

import grpc
import pytest

from feedclient import Client, Line
from feedclient.pb import inventory_pb2, inventory_pb2_grpc, order_pb2
from feedclient.routing import owner_of, shard_of_id, shard_of_request, shard_of_sku

from conftest import FAST_RETRY


def test_the_shard_rule_is_the_servers():
    # The reference values of the server's unit tests (tests/unit/cluster_ledger_test.cc).
    assert shard_of_sku("sku-1", 12) == 4
    assert shard_of_sku("SKU-000042", 12) == 7
    assert shard_of_sku("\u00c4\u00d6-1", 12) == 9  # UTF-8 bytes, not characters
    assert shard_of_sku("anything", 1) == 0


def test_generated_ids_name_their_shard():
    assert shard_of_id("rsv-s3-17") == 3
    assert shard_of_id("ord-s11-1") == 11
    for other in ("r-1", "rsv-abc123-5", "rsv-s-5", "rsv-s3", "rsv-s3x-1", ""):
        assert shard_of_id(other) is None, other


def test_a_request_goes_to_the_one_shard_of_its_skus_or_its_id():
    one = inventory_pb2.ReserveRequest(lines=[inventory_pb2.Line(sku="sku-1", quantity=1)] * 2)
    assert shard_of_request(one, 12) == 4
    two = inventory_pb2.ReserveRequest(
        lines=[inventory_pb2.Line(sku="sku-1", quantity=1), inventory_pb2.Line(sku="sku-2", quantity=1)]
    )
    if shard_of_sku("sku-2", 12) != 4:
        assert shard_of_request(two, 12) is None  # the server answers for itself
    assert shard_of_request(inventory_pb2.AdjustStockRequest(sku="SKU-000042"), 12) == 7
    assert shard_of_request(inventory_pb2.GetStockRequest(sku=["sku-1"]), 12) == 4
    assert shard_of_request(inventory_pb2.CommitRequest(reservation_id="rsv-s5-9"), 12) == 5
    assert shard_of_request(inventory_pb2.CommitRequest(reservation_id="rsv-s15-9"), 12) is None
    assert shard_of_request(order_pb2.PayOrderRequest(order_id="ord-s2-3"), 12) == 2
    assert shard_of_request(order_pb2.CreateOrderRequest(item_ids=["sku-1"]), 12) == 4


class Node(inventory_pb2_grpc.InventoryServiceServicer):
    """One node of a 12-shard cluster: it serves the shards in `serves`; for any other it
    answers UNAVAILABLE naming `owner`."""

    def __init__(self, serves, owner_address):
        self.serves = serves
        self.owner_address = owner_address
        self.reserves = 0
        self.redirected = 0
        self.maps = 0
        self.address = ""

    def GetShardMap(self, request, context):
        self.maps += 1
        reply = inventory_pb2.GetShardMapResponse(shard_count=12)
        for s in range(12):
            address = self.address if s in self.serves else self.owner_address()
            reply.shards.add(shard=s, epoch=1, node_id=address, address=address)
        return reply

    def Reserve(self, request, context):
        shard = shard_of_sku(request.lines[0].sku, 12)
        if shard not in self.serves:
            self.redirected += 1
            context.set_trailing_metadata((("feed-shard-owner", self.owner_address()),))
            context.abort(grpc.StatusCode.UNAVAILABLE, f"shard {shard} is served elsewhere")
        self.reserves += 1
        return inventory_pb2.ReserveResponse(
            reservation=inventory_pb2.Reservation(reservation_id=f"rsv-s{shard}-{self.reserves}")
        )

    def WatchStock(self, request, context):
        sku = request.keys[0].sku
        shard = shard_of_sku(sku, 12)
        if shard not in self.serves:
            self.redirected += 1
            context.set_trailing_metadata((("feed-shard-owner", self.owner_address()),))
            context.abort(grpc.StatusCode.UNAVAILABLE, f"shard {shard} is served elsewhere")
        level = inventory_pb2.StockLevel(sku=sku, on_hand=5, available=5)
        yield inventory_pb2.StockUpdate(kind=inventory_pb2.StockUpdate.KIND_SNAPSHOT, level=level, sequence=7)
        yield inventory_pb2.StockUpdate(kind=inventory_pb2.StockUpdate.KIND_SNAPSHOT_END, sequence=7)
        level.available = 4
        yield inventory_pb2.StockUpdate(kind=inventory_pb2.StockUpdate.KIND_CHANGE, level=level, sequence=8)


@pytest.fixture
def two_nodes():
    # a serves shard 4 only ("sku-1"), b every other shard; each names the other as owner.
    nodes = {"a": Node({4}, lambda: nodes["b"].address), "b": Node(set(range(12)) - {4}, lambda: nodes["a"].address)}
    for node in nodes.values():
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        inventory_pb2_grpc.add_InventoryServiceServicer_to_server(node, server)
        node.address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        server.start()
        node.server = server
    yield nodes
    for node in nodes.values():
        node.server.stop(None)


def sku_off_shard_4():
    return next(f"sku-{i}" for i in range(2, 100) if shard_of_sku(f"sku-{i}", 12) != 4)


def test_the_client_follows_the_owner_then_routes_by_the_map(two_nodes):
    a, b = two_nodes["a"], two_nodes["b"]
    other = sku_off_shard_4()
    with Client(a.address, retry=FAST_RETRY) as client:
        first = client.reserve([Line(other, 1)])
        assert first.reservation.reservation_id.startswith(f"rsv-s{shard_of_sku(other, 12)}-")
        assert (a.redirected, b.reserves, b.maps) == (1, 1, 1)
        # Known now: straight to b, and sku-1 straight to a.
        client.reserve([Line(other, 1)])
        client.reserve([Line("sku-1", 1)])
        assert (a.redirected, b.reserves, a.reserves) == (1, 2, 1)


def test_a_stream_opens_on_its_shards_owner(two_nodes):
    a, b = two_nodes["a"], two_nodes["b"]
    other = sku_off_shard_4()
    with Client(a.address, retry=FAST_RETRY) as client:
        watch = client.watch_stock([other])
        kinds = []
        for update in watch:
            kinds.append(update.kind)
            if update.kind == inventory_pb2.StockUpdate.KIND_CHANGE:
                watch.stop()
        assert kinds[-1] == inventory_pb2.StockUpdate.KIND_CHANGE
        assert a.redirected == 1 and b.maps == 1  # redirected once, at once (no backoff)
        assert watch.last_sequence == 8


def test_an_owner_that_stops_answering_is_forgotten(two_nodes):
    a, b = two_nodes["a"], two_nodes["b"]
    other = sku_off_shard_4()
    with Client(a.address, retry=FAST_RETRY) as client:
        client.reserve([Line(other, 1)])
        assert a.redirected == 1
        b.server.stop(None)
        # b is learned as the owner, but it is gone: the retry asks a again (which would name
        # the new owner; here it names b, still down, so the call fails in the end).
        with pytest.raises(Exception):
            client.reserve([Line(other, 1)])
        assert a.redirected >= 2


def test_owner_of_reads_only_a_wrong_node_answer():
    class Err(grpc.RpcError, grpc.Call):
        def __init__(self, code, trailers):
            self._code, self._trailers = code, trailers

        def code(self):
            return self._code

        def trailing_metadata(self):
            return self._trailers

        def details(self):
            return ""

        # grpc.Call's other abstract methods, unused here.
        def initial_metadata(self):
            return ()

        def is_active(self):
            return False

        def time_remaining(self):
            return None

        def cancel(self):
            return False

        def add_callback(self, callback):
            return False

    assert owner_of(Err(grpc.StatusCode.UNAVAILABLE, (("feed-shard-owner", "h:1"),))) == "h:1"
    assert owner_of(Err(grpc.StatusCode.UNAVAILABLE, ())) is None
    assert owner_of(Err(grpc.StatusCode.NOT_FOUND, (("feed-shard-owner", "h:1"),))) is None
