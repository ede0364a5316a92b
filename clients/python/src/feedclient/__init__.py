"""Python client of the inventory feed server.

    from feedclient import Client, Line
    with Client("127.0.0.1:50051") as client:
        reply = client.reserve([Line("sku-1", 2)])        # retried with one idempotency key
        for update in client.watch_stock(["sku-1"]):      # reconnects, no gap, no duplicate
            ...

The generated messages and stubs are in feedclient.pb.
"""

from feedclient.client import Client
from feedclient.errors import (
    AuthError,
    FeedError,
    IdempotencyConflict,
    InvalidRequest,
    NotFound,
    ResumeGap,
    StockShortage,
    Unavailable,
)
from feedclient.keys import new_idempotency_key
from feedclient.retry import Backoff, RetryEvent, RetryPolicy
from feedclient.streams import OrderFollow, StockWatch
from feedclient.values import Line, StockKey

__all__ = [
    "AuthError",
    "Backoff",
    "Client",
    "FeedError",
    "IdempotencyConflict",
    "InvalidRequest",
    "Line",
    "NotFound",
    "OrderFollow",
    "ResumeGap",
    "RetryEvent",
    "RetryPolicy",
    "StockKey",
    "StockShortage",
    "StockWatch",
    "Unavailable",
    "new_idempotency_key",
]
