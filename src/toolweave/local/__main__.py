"""`python -m toolweave.local build|path|serve`: build the local model server (for CI and
`make demo`), print where it is, or run it in the foreground."""

from __future__ import annotations

import argparse
import sys
import time

from . import (
    LlamaBuildError,
    LlamaServer,
    LlamaServerError,
    build_dir,
    ensure_llama_server,
    ensure_model,
    find_llama_server,
    find_model,
)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m toolweave.local", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser(
        "build", help="build llama-server once (cached) and install the model; no-op when done"
    )
    b.add_argument("-j", "--jobs", type=int, default=2, help="parallel compilers (default 2)")
    b.add_argument(
        "--portable", action="store_true", help="GGML_NATIVE=OFF (not tuned to this CPU)"
    )
    sub.add_parser("path", help="print the llama-server binary and the model file")
    s = sub.add_parser("serve", help="run the server in the foreground until Ctrl-C")
    s.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            started = time.monotonic()
            binary = ensure_llama_server(jobs=args.jobs, native=not args.portable)
            print(f"llama-server: {binary}")
            print(f"model:        {ensure_model()}")
            print(f"ready in {time.monotonic() - started:.0f} s")
        elif args.command == "path":
            found = find_llama_server()
            print(f"llama-server: {found or f'not built (would be in {build_dir()})'}")
            print(f"model:        {find_model()}")
            return 0 if found else 1
        else:
            with LlamaServer(ensure_llama_server(), ensure_model(), port=args.port) as server:
                print(f"serving {server.model_name} at {server.base_url} (log {server.log_path})")
                while server.running:
                    time.sleep(0.5)
    except (LlamaBuildError, LlamaServerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
