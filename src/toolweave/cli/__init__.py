"""The `toolweave` command line: `schema`, `call`, `chat`, `mcp serve`, `demo` (and `runs`
when durable conversations are available). See docs/cli.md."""

from .app import app, main

__all__ = ["app", "main"]
