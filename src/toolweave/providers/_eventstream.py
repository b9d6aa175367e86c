"""AWS event streams (`application/vnd.amazon.eventstream`, Bedrock's ConverseStream) as
stream events: each frame becomes an `SSEEvent` whose `event` is the frame's `:event-type`
(or `exception:<:exception-type>` for an exception frame) and whose `data` is its JSON
payload. Framing and both CRCs are checked by botocore's decoder."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ._sse import SSEEvent, SSEEventTooLarge

__all__ = ["EXCEPTION_PREFIX", "AwsEventStreamDecoder"]

EXCEPTION_PREFIX = "exception:"
_PRELUDE = 12  # total length, headers length, prelude CRC


class AwsEventStreamDecoder:
    """Bytes in, one `SSEEvent` per complete frame out; `protocol_error(message)` builds the
    error for a corrupt frame (CRC mismatch, bad lengths) or a stream cut inside a frame.
    A frame longer than `max_event_size` bytes raises `SSEEventTooLarge` as soon as its
    prelude arrives (before the frame is buffered)."""

    def __init__(
        self, protocol_error: Callable[[str], Exception], max_event_size: int | None = None
    ) -> None:
        self._data = bytearray()
        self._protocol_error = protocol_error
        self._limit = max_event_size
        self._frame: Any = None  # botocore's buffer for the frame being received
        self._total = 0  # its length, from its (checked) prelude

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume a chunk; return the events of the frames it completes."""
        from botocore.eventstream import EventStreamBuffer, ParserError

        # Bytes wait here until a whole frame is in, and only that frame goes to botocore:
        # its buffer copies everything it holds per append and per frame (quadratic).
        self._data += chunk
        out: list[SSEEvent] = []
        start = 0
        try:
            while True:
                if self._frame is None:
                    if len(self._data) - start < _PRELUDE:
                        break
                    total = int.from_bytes(self._data[start : start + 4], "big")
                    if total < _PRELUDE + 4:
                        raise self._protocol_error(
                            f"a corrupt event-stream frame (a length of {total} bytes)"
                        )
                    frame = EventStreamBuffer()
                    frame.add_data(bytes(self._data[start : start + _PRELUDE]))
                    for _ in frame:  # checks the prelude CRC and botocore's length limits
                        break
                    if self._limit is not None and total > self._limit:
                        raise SSEEventTooLarge(
                            f"an event-stream frame of {total} bytes is over the "
                            f"{self._limit}-byte limit"
                        )
                    self._frame, self._total = frame, total
                if len(self._data) - start < self._total:
                    break
                self._frame.add_data(bytes(self._data[start + _PRELUDE : start + self._total]))
                message = next(self._frame)
                start += self._total
                self._frame = None
                out.append(self._event(message.headers, message.payload))
        except SSEEventTooLarge:
            raise
        except (ParserError, struct.error, ValueError, KeyError, IndexError) as e:
            raise self._protocol_error(f"a corrupt event-stream frame ({e})") from None
        finally:
            del self._data[:start]
        return out

    def flush(self) -> list[SSEEvent]:
        """The stream ended: nothing may be left half-received."""
        if self._data:
            raise self._protocol_error(
                f"the event stream ended inside a frame ({len(self._data)} bytes left over)"
            )
        return []

    def _event(self, headers: dict[str, object], payload: bytes) -> SSEEvent:
        data = payload.decode("utf-8", "replace")
        if headers.get(":message-type") in ("exception", "error"):
            kind = headers.get(":exception-type") or headers.get(":error-code") or "unknown"
            return SSEEvent(data=data or "{}", event=f"{EXCEPTION_PREFIX}{kind}")
        return SSEEvent(data=data, event=str(headers.get(":event-type") or ""))
