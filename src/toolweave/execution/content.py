"""Content parts: the pieces of a tool result (or user message), in the order they came.

Text, image, audio, file (a document, inline or by URL), resource link and embedded
resource; each may carry MCP-style `Annotations` (audience, priority). A part whose
audience leaves out "assistant" stays in results but is not sent to the model
(`for_model`). Binary data is base64 text (`data`), so parts serialise to JSON as they are.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Annotations",
    "AudioContent",
    "ContentPart",
    "EmbeddedResource",
    "FileContent",
    "ImageContent",
    "ResourceLink",
    "TextContent",
    "decoded_text",
]


class Annotations(BaseModel):
    """Hints about a part: who it is for (`audience`: "user", "assistant"), how much it
    matters (`priority`, 0 to 1), when it last changed. Unknown keys are kept."""

    model_config = ConfigDict(frozen=True, extra="allow")
    audience: tuple[str, ...] | None = None
    priority: float | None = None
    last_modified: str | None = None


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True)
    annotations: Annotations | None = None

    @property
    def for_model(self) -> bool:
        """Whether the part is sent to the model: not when its annotations name an audience
        without "assistant" (`["user"]`: kept in the result for the application only)."""
        audience = self.annotations.audience if self.annotations is not None else None
        return not audience or "assistant" in audience

    def describe(self) -> str:
        """A one-line description: kind, type, size, name."""
        raise NotImplementedError


def _size(data: str | None) -> int | None:
    """The decoded size of base64 `data`, without decoding it."""
    if data is None:
        return None
    n = len(data.rstrip("="))
    return n * 3 // 4


def _human(size: int | None) -> str:
    if size is None:
        return ""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} kB"
    return f"{size / (1024 * 1024):.1f} MB"


def _describe(kind: str, mime: str | None, data: str | None, where: str | None) -> str:
    bits = [b for b in (mime, _human(_size(data)), where) if b]
    return f"{kind} ({', '.join(bits)})" if bits else kind


class TextContent(_Part):
    """A piece of text."""

    type: Literal["text"] = "text"
    text: str

    def describe(self) -> str:
        """`text (N chars)`."""
        return f"text ({len(self.text)} chars)"


class ImageContent(_Part):
    """An image, inline (`data`, base64) or by `url`."""

    type: Literal["image"] = "image"
    data: str | None = None
    """Base64-encoded bytes."""
    url: str | None = None
    mime_type: str = "image/png"

    @classmethod
    def from_bytes(cls, raw: bytes, mime_type: str = "image/png") -> ImageContent:
        """Build from raw bytes."""
        return cls(data=base64.b64encode(raw).decode("ascii"), mime_type=mime_type)

    def describe(self) -> str:
        """`image (image/png, 1.2 kB)` or with the URL."""
        return _describe("image", self.mime_type, self.data, self.url)


class AudioContent(_Part):
    """A sound clip, inline (`data`, base64) or by `url`."""

    type: Literal["audio"] = "audio"
    data: str | None = None
    url: str | None = None
    mime_type: str = "audio/wav"

    @classmethod
    def from_bytes(cls, raw: bytes, mime_type: str = "audio/wav") -> AudioContent:
        """Build from raw bytes."""
        return cls(data=base64.b64encode(raw).decode("ascii"), mime_type=mime_type)

    def describe(self) -> str:
        """`audio (audio/wav, 3.0 kB)`."""
        return _describe("audio", self.mime_type, self.data, self.url)


class FileContent(_Part):
    """A file or document (PDF, text, anything binary), inline (`data`, base64) or by `url`."""

    type: Literal["file"] = "file"
    data: str | None = None
    url: str | None = None
    mime_type: str = "application/octet-stream"
    name: str | None = None

    @classmethod
    def from_bytes(
        cls, raw: bytes, mime_type: str = "application/octet-stream", name: str | None = None
    ) -> FileContent:
        """Build from raw bytes."""
        return cls(data=base64.b64encode(raw).decode("ascii"), mime_type=mime_type, name=name)

    def describe(self) -> str:
        """`file report.pdf (application/pdf, 20.0 kB)`."""
        kind = f"file {self.name}" if self.name else "file"
        return _describe(kind, self.mime_type, self.data, self.url)


class ResourceLink(_Part):
    """A reference to a resource the model cannot open by itself (an MCP `resource_link`)."""

    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str = ""
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None

    def describe(self) -> str:
        """`resource link name (uri, mime type, size): description`."""
        bits = [b for b in (self.uri, self.mime_type, _human(self.size)) if b]
        out = f"resource link {self.title or self.name}".rstrip() + f" ({', '.join(bits)})"
        return f"{out}: {self.description}" if self.description else out


class EmbeddedResource(_Part):
    """A resource's contents sent with the result: `text`, or `data` (base64 blob)."""

    type: Literal["resource"] = "resource"
    uri: str
    mime_type: str | None = None
    text: str | None = None
    data: str | None = None

    def describe(self) -> str:
        """`resource uri (mime type, size)`."""
        if self.text is not None:
            return f"resource {self.uri} ({self.mime_type or 'text'}, {len(self.text)} chars)"
        return _describe(f"resource {self.uri}", self.mime_type, self.data, None)


ContentPart = Annotated[
    TextContent | ImageContent | AudioContent | FileContent | ResourceLink | EmbeddedResource,
    Field(discriminator="type"),
]
"""Any part of a tool result or user message."""

_TEXT_TYPES = (
    "application/json",
    "application/xml",
    "application/yaml",
    "application/x-yaml",
    "application/javascript",
    "application/toml",
    "application/csv",
    "application/x-sh",
)


def decoded_text(part: FileContent | EmbeddedResource) -> str | None:
    """The text of a textual part (`text/*`, JSON, XML, YAML ... that decodes as UTF-8),
    else None."""
    if isinstance(part, EmbeddedResource) and part.text is not None:
        return part.text
    mime = (part.mime_type or "").split(";")[0].strip().lower()
    if part.data is None or not (
        mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))
    ):
        return None
    try:
        return base64.b64decode(part.data, validate=False).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
