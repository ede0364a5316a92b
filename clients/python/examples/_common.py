"""Connection options shared by the examples."""

from __future__ import annotations

import argparse
import os

from feedclient import Client


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default=os.environ.get("FEED_SERVER", "127.0.0.1:50051"),
                        help="host:port of the feed server (env FEED_SERVER; default %(default)s)")
    parser.add_argument("--tls-ca", help="PEM CA file: connect with TLS and verify the server with it")
    parser.add_argument("--token", default=os.environ.get("FEED_TOKEN"),
                        help="bearer token (env FEED_TOKEN)")
    parser.add_argument("--timeout", type=float, default=5.0, help="deadline of each call attempt, seconds")


def connect(args: argparse.Namespace) -> Client:
    return Client(args.server, tls_ca=args.tls_ca, token=args.token, timeout=args.timeout)
