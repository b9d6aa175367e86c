"""Content parts: multimodal pieces of a tool result (text, images, files)."""

from __future__ import annotations

import base64
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ContentPart", "FileContent", "ImageContent", "TextContent"]


class TextContent(BaseModel):
    """A piece of text."""

    model_config = ConfigDict(frozen=True)
    type: Literal["text"] = "text"
    text: str


class ImageContent(BaseModel):
    """An image, inline (`data`, base64) or by `url`."""

    model_config = ConfigDict(frozen=True)
    type: Literal["image"] = "image"
    data: str | None = None
    """Base64-encoded bytes."""
    url: str | None = None
    mime_type: str = "image/png"

    @classmethod
    def from_bytes(cls, raw: bytes, mime_type: str = "image/png") -> ImageContent:
        """Build from raw bytes."""
        return cls(data=base64.b64encode(raw).decode("ascii"), mime_type=mime_type)


class FileContent(BaseModel):
    """A file or other binary resource, inline (`data`, base64) or by `url`."""

    model_config = ConfigDict(frozen=True)
    type: Literal["file"] = "file"
    data: str | None = None
    url: str | None = None
    mime_type: str = "application/octet-stream"
    name: str | None = None


ContentPart = Annotated[TextContent | ImageContent | FileContent, Field(discriminator="type")]
