"""Cluster mode (docs/CLUSTER.md): which node serves a request. A node that does not serve a
request's shard answers UNAVAILABLE with the owner's "host:port" in the trailing metadata
`feed-shard-owner`; the client then calls the owner and remembers it for that shard, so the
next call of the shard goes straight there. Pure apart from the metadata lookup."""

from __future__ import annotations

import grpc

OWNER_METADATA = "feed-shard-owner"

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def shard_of_sku(sku: str, shard_count: int) -> int:
    """64-bit FNV-1a of the SKU's UTF-8 bytes, mod shard_count: the server's rule."""
    h = _FNV_OFFSET
    for byte in sku.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h % shard_count


def shard_of_id(generated_id: str) -> int | None:
    """The shard a cluster-generated id names ("rsv-s3-17", "ord-s3-17" -> 3), else None."""
    for prefix in ("rsv-s", "ord-s"):
        if generated_id.startswith(prefix):
            digits, dash, rest = generated_id[len(prefix):].partition("-")
            if digits.isdigit() and dash and rest:
                return int(digits)
    return None


def shard_of_request(request: object, shard_count: int) -> int | None:
    """The one shard the request's SKUs are on, else the shard its id names; None when it
    names none or several (the server then answers for itself)."""
    fields = request.DESCRIPTOR.fields_by_name  # type: ignore[attr-defined]
    skus: list[str] = []
    if "lines" in fields:
        skus += [line.sku for line in request.lines]  # type: ignore[attr-defined]
    if "item_ids" in fields:
        skus += list(request.item_ids)  # type: ignore[attr-defined]
    if "keys" in fields:
        skus += [key.sku for key in request.keys]  # type: ignore[attr-defined]
    if "sku" in fields:
        value = request.sku  # type: ignore[attr-defined]
        skus += [value] if isinstance(value, str) else list(value)
    skus = [s for s in skus if s]
    if skus:
        shards = {shard_of_sku(s, shard_count) for s in skus}
        return shards.pop() if len(shards) == 1 else None
    for name in ("reservation_id", "order_id"):
        if name in fields:
            shard = shard_of_id(getattr(request, name))
            if shard is not None and shard < shard_count:
                return shard
    return None


def owner_of(err: grpc.RpcError) -> str | None:
    """The owner's address when `err` is a wrong-node answer, else None."""
    if not isinstance(err, grpc.Call) or err.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    for key, value in err.trailing_metadata() or ():
        if key == OWNER_METADATA:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None
