#!/usr/bin/env python3
"""Serve moto's DynamoDB and S3 APIs with every request applied atomically.

moto's threaded server runs requests concurrently against shared Python state, so two
conditional writes can both pass their condition (16 threads x 50 compare-and-set increments
ended at 797, not 800), `SET n = n + :one` loses updates, and a cancelled transaction can be
partly applied. DynamoDB applies each request atomically; a local server that does not makes
every concurrency test meaningless. So each request (including reading its response body) runs
under one process-wide lock. Connections are still accepted by several threads, so a slow client
cannot stall the others while it is not being served.

Usage: moto_locked.py --port-file FILE [--host 127.0.0.1] [--port 0] [--unlocked]
The chosen port is written to FILE once the socket is listening.
"""

import argparse
import os
import sys
import threading

from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import WSGIRequestHandler, make_server

LOCK = threading.Lock()


class QuietHandler(WSGIRequestHandler):
    """Logs errors only: a line per request costs time and fills the log on long runs."""

    def log_request(self, code="-", size="-"):
        if str(code).startswith("5"):
            super().log_request(code, size)


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
        "--switch-interval",
        type=float,
        default=0.0,
        help="Python thread switch interval in seconds (small values make races likelier)",
    )
    args = parser.parse_args()

    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
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
