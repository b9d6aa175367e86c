"""Tools returning non-text parts, for the CLI display tests."""

from __future__ import annotations

from toolweave import FileContent, ImageContent, ResourceLink, TextContent, tool


@tool
def picture() -> list[object]:
    """A caption, an image, a PDF and a link."""
    return [
        TextContent(text="a cat"),
        ImageContent.from_bytes(b"\x89PNG" + b"\0" * 2044, "image/png"),
        FileContent.from_bytes(b"%PDF-1.4", "application/pdf", name="report.pdf"),
        ResourceLink(uri="file:///r.md", name="readme", mime_type="text/markdown"),
    ]
