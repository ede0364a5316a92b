"""Small value types accepted by the Client, and their conversion to the wire messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Union

from feedclient.pb import inventory_pb2, order_pb2


@dataclass(frozen=True)
class StockKey:
    """A stock level: (sku, location). An empty location means every location in a read or
    watch filter, and the server's default location in a mutation."""

    sku: str
    location: str = ""

    def to_pb(self) -> inventory_pb2.StockKey:
        return inventory_pb2.StockKey(sku=self.sku, location=self.location)


@dataclass(frozen=True)
class Line:
    """`quantity` units of a SKU at a location (empty: the server's default location)."""

    sku: str
    quantity: int
    location: str = ""

    def to_pb(self) -> inventory_pb2.Line:
        return inventory_pb2.Line(sku=self.sku, location=self.location, quantity=self.quantity)

    def to_order_pb(self) -> order_pb2.OrderLine:
        return order_pb2.OrderLine(sku=self.sku, location=self.location, quantity=self.quantity)


KeyLike = Union[str, StockKey, inventory_pb2.StockKey]
# (sku, quantity) or (sku, quantity, location) tuples are accepted too.
LineLike = Union[Line, inventory_pb2.Line, tuple]


def as_key(key: KeyLike) -> inventory_pb2.StockKey:
    if isinstance(key, str):
        return inventory_pb2.StockKey(sku=key)
    if isinstance(key, StockKey):
        return key.to_pb()
    if isinstance(key, inventory_pb2.StockKey):
        return key
    raise TypeError(f"not a stock key: {key!r} (use a SKU string, StockKey or inventory_pb2.StockKey)")


def as_keys(keys: Iterable[KeyLike]) -> list[inventory_pb2.StockKey]:
    if isinstance(keys, (str, StockKey)):
        keys = [keys]
    return [as_key(k) for k in keys]


def as_line(line: LineLike) -> Line:
    if isinstance(line, Line):
        return line
    if isinstance(line, inventory_pb2.Line):
        return Line(line.sku, line.quantity, line.location)
    if isinstance(line, tuple) and len(line) in (2, 3):
        return Line(*line)
    raise TypeError(f"not a line: {line!r} (use Line, inventory_pb2.Line or (sku, quantity[, location]))")


def as_lines(lines: Iterable[LineLike]) -> list[Line]:
    out = [as_line(line) for line in lines]
    if not out:
        raise ValueError("at least one line is needed")
    return out
