"""A stdio server's stderr into any text stream, not only one with a file descriptor."""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Iterator
from typing import TextIO

__all__ = ["errlog_file"]


def _has_fileno(stream: TextIO) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False
    return True


@contextlib.contextmanager
def errlog_file(stream: TextIO) -> Iterator[TextIO]:
    """`stream` itself when it has a file descriptor (the child writes to it directly);
    otherwise (``io.StringIO``, a logging adapter ...) the write end of a pipe whose lines a
    daemon thread copies into `stream` until the child and we have closed it."""
    if _has_fileno(stream):
        yield stream
        return
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
    writer = os.fdopen(write_fd, "w", encoding="utf-8")

    def pump() -> None:
        with reader:
            for line in reader:
                try:
                    stream.write(line)
                    stream.flush()
                except Exception:  # a closed or failing stream must not kill the pump early
                    pass

    thread = threading.Thread(target=pump, name="toolweave-mcp-errlog", daemon=True)
    thread.start()
    try:
        yield writer
    finally:
        writer.close()  # the pump ends once the child's copy is closed too
