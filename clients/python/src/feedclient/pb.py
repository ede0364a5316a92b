"""The generated protobuf messages and gRPC stubs.

They are generated from the repository's proto/ by the package build (setup.py) into
feedclient/_gen/ and never committed: use `from feedclient.pb import inventory_pb2` rather
than importing feedclient._gen directly.
"""

from __future__ import annotations

try:
    from feedclient._gen.events.v1 import events_pb2
    from feedclient._gen.inventory.v1 import inventory_pb2, inventory_pb2_grpc
    from feedclient._gen.order.v1 import order_pb2, order_pb2_grpc
except ModuleNotFoundError as exc:  # pragma: no cover - depends on how it was installed
    if not (exc.name or "").startswith("feedclient._gen"):
        raise
    raise ModuleNotFoundError(
        "feedclient: the generated gRPC modules are missing. They are made when the package "
        "is built: install it with `pip install ./clients/python` (from the repository root) "
        "instead of importing the source tree directly.",
        name=exc.name,
    ) from exc

InventoryServiceStub = inventory_pb2_grpc.InventoryServiceStub
OrderServiceStub = order_pb2_grpc.OrderServiceStub

__all__ = [
    "events_pb2",
    "inventory_pb2",
    "inventory_pb2_grpc",
    "order_pb2",
    "order_pb2_grpc",
    "InventoryServiceStub",
    "OrderServiceStub",
]
