"""A stand-in for llama-server: parses the same command line, answers GET /health with 200
and logs to stdout. `--fail` exits at once; `--hang` never becomes healthy;
`--segv-unless-no-repack` crashes (SIGSEGV) unless `--no-repack` is given."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = 200 if self.path == "/health" else 404
        body = b'{"status":"ok"}' if status == 200 else b"{}"
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        print("request:", format % args, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-m", dest="model", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--jinja", action="store_true")
    parser.add_argument("-c", dest="ctx", type=int)
    parser.add_argument("-t", dest="threads", type=int)
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--no-repack", action="store_true")
    parser.add_argument("--segv-unless-no-repack", action="store_true")
    args = parser.parse_args()
    print(
        f"fake llama-server: model {args.model} ctx {args.ctx} threads {args.threads}", flush=True
    )
    if args.segv_unless_no_repack and not args.no_repack:
        print("init: llama threadpool init, n_threads = 2", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)  # as llama.cpp's AMX kernels where AMX is off
    print(f"repack: {'off' if args.no_repack else 'on'}", flush=True)
    if args.fail:
        print("error: could not load model", flush=True)
        sys.exit(3)
    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
