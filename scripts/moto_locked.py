#!/usr/bin/env python3
"""Serve moto's DynamoDB and S3 APIs with every request applied atomically.

moto's threaded server runs requests concurrently against shared Python state, so two
conditional writes can both pass their condition (16 threads x 50 compare-and-set increments
ended at 797, not 800), `SET n = n + :one` loses updates, and a cancelled transaction can be
partly applied. DynamoDB applies each request atomically; a local server that does not makes
every concurrency test meaningless. So each request (including reading its response body) runs
under one process-wide lock. Connections are still accepted by several threads, so a slow client
cannot stall the others while it is not being served.

A second change: moto's TransactWriteItems deep-copies every table a transaction touches so that
it can roll back, which costs time proportional to the tables' size (a 2-item transaction on a
table of 5,000 items took tens of milliseconds, and the suite minutes). Here a transaction instead
snapshots only the items it names and restores just those when it is cancelled, and takes back
the stream records its applied part appended (DynamoDB streams nothing of a cancelled
transaction; moto's own rollback swapped the whole table, stream included). The atomicity tests
(cancelled transactions leave nothing behind) run against this.

Usage: moto_locked.py --port-file FILE [--host 127.0.0.1] [--port 0] [--unlocked]
The chosen port is written to FILE once the socket is listening.
"""

import argparse
import copy
import os
import sys
import threading

import moto.dynamodb.models as ddb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import WSGIRequestHandler, make_server

LOCK = threading.Lock()


class QuietHandler(WSGIRequestHandler):
    """Logs errors only: a line per request costs time and fills the log on long runs."""

    def log_request(self, code="-", size="-"):
        if str(code).startswith("5"):
            super().log_request(code, size)


class _CopyExceptTables:
    """Stands in for the `copy` module inside moto's DynamoDB backend: copies anything but a table."""

    def __getattr__(self, name):
        return getattr(copy, name)

    @staticmethod
    def deepcopy(x, memo=None):
        if isinstance(x, Table):
            return x
        return copy.deepcopy(x, memo)


_original_transact = DynamoDBBackend.transact_write_items


def _transact_with_item_snapshots(self, transact_items):
    snapshots = []
    streams = {}
    for entry in transact_items:
        _, op = next(iter(entry.items()))
        table = self.tables.get(op.get("TableName"))
        if table is None:
            continue
        if table.stream_shard is not None and id(table) not in streams:
            streams[id(table)] = (table.stream_shard, len(table.stream_shard.items))
        source = op.get("Key") or op.get("Item") or {}
        try:
            hash_key = DynamoType(source[table.hash_key_attr])
            range_key = DynamoType(source[table.range_key_attr]) if table.range_key_attr else None
            current = table.get_item(hash_key, range_key)
        except Exception:  # malformed request: moto's own validation reports it
            continue
        snapshots.append((table, hash_key, range_key, copy.deepcopy(current)))
    try:
        return _original_transact(self, transact_items)
    except Exception:
        for table, hash_key, range_key, item in reversed(snapshots):
            if range_key is not None:
                if item is None:
                    table.items.get(hash_key, {}).pop(range_key, None)
                else:
                    table.items[hash_key][range_key] = item
            elif item is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = item
        for shard, length in streams.values():
            del shard.items[length:]
        raise


def install_fast_transactions():
    ddb_models.copy = _CopyExceptTables()
    DynamoDBBackend.transact_write_items = _transact_with_item_snapshots


def locked(app):
    def wrapper(environ, start_response):
        with LOCK:
            result = app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        return [body]

    return wrapper


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", required=True)
    parser.add_argument(
        "--unlocked",
        action="store_true",
        help="serve without the lock (only to reproduce moto's lost updates)",
    )
    parser.add_argument(
        "--slow-transactions",
        action="store_true",
        help="keep moto's whole-table copy per transaction",
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=0.0,
        help="Python thread switch interval in seconds (small values make races likelier)",
    )
    args = parser.parse_args()

    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    if not args.slow_transactions:
        install_fast_transactions()
    app = DomainDispatcherApplication(create_backend_app)
    served = app if args.unlocked else locked(app)
    server = make_server(args.host, args.port, served, threaded=True, request_handler=QuietHandler)
    port = server.socket.getsockname()[1]
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, args.port_file)
    print(f"moto (locked) listening on http://{args.host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
