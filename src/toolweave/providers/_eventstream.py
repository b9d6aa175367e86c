"""AWS event streams (`application/vnd.amazon.eventstream`, Bedrock's ConverseStream) as
stream events: each frame becomes an `SSEEvent` whose `event` is the frame's `:event-type`
(or `exception:<:exception-type>` for an exception frame) and whose `data` is its JSON
payload. Framing and both CRCs are checked by botocore's decoder."""

from __future__ import annotations

from collections.abc import Callable

from ._sse import SSEEvent

__all__ = ["EXCEPTION_PREFIX", "AwsEventStreamDecoder"]

EXCEPTION_PREFIX = "exception:"


class AwsEventStreamDecoder:
    """Bytes in, one `SSEEvent` per complete frame out; `protocol_error(message)` builds the
    error for a corrupt frame (CRC mismatch, bad lengths) or a stream cut inside a frame."""

    def __init__(self, protocol_error: Callable[[str], Exception]) -> None:
        from botocore.eventstream import EventStreamBuffer

        self._buffer = EventStreamBuffer()
        self._protocol_error = protocol_error
        self._pending = 0  # bytes fed but not yet part of a complete frame

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume a chunk; return the events of the frames it completes."""
        from botocore.eventstream import ParserError

        self._buffer.add_data(chunk)
        self._pending += len(chunk)
        out: list[SSEEvent] = []
        try:
            for message in self._buffer:
                self._pending -= message.prelude.total_length
                out.append(self._event(message.headers, message.payload))
        except ParserError as e:
            raise self._protocol_error(f"a corrupt event-stream frame ({e})") from None
        return out

    def flush(self) -> list[SSEEvent]:
        """The stream ended: nothing may be left half-received."""
        if self._pending:
            raise self._protocol_error(
                f"the event stream ended inside a frame ({self._pending} bytes left over)"
            )
        return []

    def _event(self, headers: dict[str, object], payload: bytes) -> SSEEvent:
        data = payload.decode("utf-8", "replace")
        if headers.get(":message-type") in ("exception", "error"):
            kind = headers.get(":exception-type") or headers.get(":error-code") or "unknown"
            return SSEEvent(data=data or "{}", event=f"{EXCEPTION_PREFIX}{kind}")
        return SSEEvent(data=data, event=str(headers.get(":event-type") or ""))
