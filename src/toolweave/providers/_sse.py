"""An incremental Server-Sent Events parser, robust to arbitrary chunking.

Feed it bytes as they arrive (`feed`), then `flush()` at the end of the stream. Lines may end
in LF, CRLF or CR (a CR at the end of one chunk followed by LF at the start of the next counts
once); UTF-8 sequences may be split anywhere; `data:` lines accumulate (joined with LF);
comment lines (`:`) are ignored; a blank line dispatches the event. The `[DONE]` sentinel of
OpenAI-style streams is an ordinary event whose `data` is `"[DONE]"` (see `SSEEvent.is_done`).
Buffering is linear in the input (a partial line is kept as a list of pieces), and with
`max_event_size` an event (its partial line plus the data gathered so far, in characters)
larger than that raises `SSEEventTooLarge`.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Protocol

__all__ = ["EventDecoder", "SSEDecoder", "SSEEvent", "SSEEventTooLarge"]


class SSEEventTooLarge(ValueError):
    """An event (or a line) grew past the decoder's `max_event_size`."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: `event` (None when no `event:` field), `data`, `id`, `retry`."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None

    @property
    def is_done(self) -> bool:
        """Whether this is the OpenAI-style `[DONE]` terminator."""
        return self.data.strip() == "[DONE]"


class EventDecoder(Protocol):
    """Bytes of a streamed answer in, events out (`SSEDecoder`; AWS event streams)."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume a chunk; return the events it completes."""
        ...

    def flush(self) -> list[SSEEvent]:
        """The stream ended: the events still held (or an error for a cut-off frame)."""
        ...


class SSEDecoder:
    """Bytes (or str) in, `SSEEvent`s out; keeps partial lines between calls."""

    __slots__ = (
        "_data",
        "_data_size",
        "_decoder",
        "_event",
        "_id",
        "_limit",
        "_pending",
        "_pending_size",
        "_retry",
        "_skip_lf",
        "_started",
    )

    def __init__(self, max_event_size: int | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._limit = max_event_size
        self._pending: list[str] = []
        self._pending_size = 0
        self._skip_lf = False
        self._data: list[str] = []
        self._data_size = 0
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._started = False

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        """Consume a chunk; return the events it completes (possibly none)."""
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if not self._started and text:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._skip_lf and text:
            # The previous chunk ended with CR: an LF here completes that CRLF.
            if text.startswith("\n"):
                text = text[1:]
            self._skip_lf = False
        if not text:
            return []
        self._skip_lf = text.endswith("\r")
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._pending.append(text)
            self._pending_size += len(text)
            self._check(self._pending_size)
            return []
        lines = text.split("\n")
        if self._pending:
            self._pending.append(lines[0])
            lines[0] = "".join(self._pending)
            self._pending = []
        last = lines.pop()
        self._pending_size = len(last)
        if last:
            self._pending.append(last)
        events: list[SSEEvent] = []
        self._lines(lines, events)
        self._check(self._pending_size)
        return events

    def _check(self, size: int) -> None:
        limit = self._limit
        if limit is not None and size + self._data_size > limit:
            raise SSEEventTooLarge(f"a stream event is larger than {limit} characters")

    def flush(self) -> list[SSEEvent]:
        """End of stream: process any partial line and dispatch a pending event."""
        events: list[SSEEvent] = []
        rest = self._decoder.decode(b"", final=True)
        if rest:
            events.extend(self.feed(rest))
        lines = [""]
        if self._pending:
            lines.insert(0, "".join(self._pending))
            self._pending = []
            self._pending_size = 0
        self._lines(lines, events)
        return events

    def _lines(self, lines: list[str], events: list[SSEEvent]) -> None:
        # one loop with locals: a stream is mostly `data:` lines and blank lines
        data = self._data
        limit = self._limit
        for line in lines:
            if not line:
                if data or self._event is not None:
                    events.append(_event("\n".join(data), self._event, self._id, self._retry))
                    data = self._data = []
                    self._data_size = 0
                    self._event = None
                self._retry = None
                continue
            if line[0] == ":":
                continue
            field, sep, value = line.partition(":")
            if sep and value[:1] == " ":
                value = value[1:]
            if field == "data":
                data.append(value)
                if limit is not None:
                    self._data_size += len(value) + 1
                    self._check(0)
            elif field == "event":
                self._event = value
            elif field == "id":
                if "\0" not in value:
                    self._id = value
            elif field == "retry" and value.isdigit():
                self._retry = int(value)


_new = object.__new__
_set_data, _set_event, _set_id, _set_retry = (
    vars(SSEEvent)[name].__set__ for name in ("data", "event", "id", "retry")
)


def _event(data: str, event: str | None, id: str | None, retry: int | None) -> SSEEvent:
    """`SSEEvent(data, event, id, retry)` without the frozen dataclass's `__init__`, whose
    `object.__setattr__` per field costs twice the slot setters (once per event)."""
    out = _new(SSEEvent)
    _set_data(out, data)
    _set_event(out, event)
    _set_id(out, id)
    _set_retry(out, retry)
    return out
