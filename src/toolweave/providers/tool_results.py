"""Tool results (and user content parts) in each provider's wire format.

Every content part goes out as the best the API carries (see the table in
docs/providers.md); a part that cannot be carried becomes a short text placeholder and a
warning log, never an exception: the tool has already run. A part for the user only (its
annotations' audience leaves out "assistant") is not sent at all. Pure functions:

- `openai_chat_tool_result(message, model)` → the `role: tool` message and the parts of a
  following `user` message carrying its media (Chat Completions tool messages take text only);
- `anthropic_tool_result(message)` → a `tool_result` block with text, image and document
  blocks in order;
- `gemini_function_response(message, model)` → a `functionResponse` part (media inside it on
  Gemini 3 and later) and the parts that follow it in the same user turn;
- `openai_responses_tool_output(message)` → a Responses `function_call_output` item.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..chat.messages import ToolExecutionResultMessage
from ..execution.content import (
    AudioContent,
    ContentPart,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    decoded_text,
)
from ..execution.text import json_value

__all__ = [
    "anthropic_content",
    "anthropic_tool_result",
    "gemini_function_response",
    "gemini_part",
    "openai_chat_content",
    "openai_chat_tool_result",
    "openai_responses_tool_output",
    "text_stand_in",
    "tool_result_text",
]

_log = logging.getLogger("toolweave.providers")

Kind = Literal["text", "image", "audio", "pdf", "document", "binary", "link"]


@dataclass(frozen=True, slots=True)
class _Item:
    """A part reduced to what the mappings need."""

    kind: Kind
    part: ContentPart
    mime: str = ""
    data: str | None = None
    url: str | None = None
    name: str | None = None
    text: str = ""

    @property
    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.data}"

    def label(self) -> str:
        return self.part.describe()

    def document_text(self) -> str:
        """A text document inline: a one-line header, then its text."""
        return f"[{self.label()}]\n{self.text}"


def _mime(raw: str | None) -> str:
    return (raw or "").split(";")[0].strip().lower()


def _item(part: ContentPart) -> _Item:
    if isinstance(part, TextContent):
        return _Item("text", part, text=part.text)
    if isinstance(part, ResourceLink):
        return _Item("link", part, url=part.uri, name=part.name, text=f"[{part.describe()}]")
    if isinstance(part, ImageContent):
        return _Item("image", part, _mime(part.mime_type), part.data, part.url)
    if isinstance(part, AudioContent):
        return _Item("audio", part, _mime(part.mime_type), part.data, part.url)
    mime = _mime(part.mime_type)
    name: str | None
    url: str | None
    if isinstance(part, EmbeddedResource):
        name, url = part.uri.rsplit("/", 1)[-1] or part.uri, None
    else:
        name, url = part.name, part.url
    text = decoded_text(part)
    if text is not None:
        return _Item("document", part, mime or "text/plain", None, url, name, text)
    data = part.data
    kind: Kind = (
        "pdf"
        if mime == "application/pdf"
        else "image"
        if mime.startswith("image/")
        else "audio"
        if mime.startswith("audio/")
        else "binary"
    )
    return _Item(kind, part, mime, data, url, name)


def _items(message: ToolExecutionResultMessage) -> list[_Item]:
    items = [_item(p) for p in message.contents or () if p.for_model]
    if message.text and not any(i.part.type == "text" for i in items):
        items.insert(0, _item(TextContent(text=message.text)))
    return items


Refuse = Callable[[str, str], Exception]
"""Builds the error for a part the caller put in a user message (option, reason)."""


def placeholder(item: _Item, why: str, where: str, refuse: Refuse | None = None) -> str:
    """The text sent instead of a part the API cannot carry (logged as a warning); with
    `refuse` (a user message: the caller's own data) the error it builds is raised instead."""
    if refuse is not None:
        raise refuse(f"{item.part.type} content of type {item.mime or '?'} in {where}", why)
    _log.warning(
        "%s: %s not sent as is (%s); a text placeholder describes it", where, item.label(), why
    )
    return f"[{item.label()}: not shown, {why}]"


def text_stand_in(part: ContentPart, where: str, why: str) -> str:
    """The text for a part an API has no block for: the text of a text part, text document
    or embedded text resource (after a one-line header), a resource link's description,
    else a placeholder (logged as a warning)."""
    item = _item(part)
    if item.kind in ("text", "link"):
        return item.text
    if item.kind == "document":
        return item.document_text()
    return placeholder(item, why, where)


def tool_result_text(message: ToolExecutionResultMessage, why: str) -> str:
    """A tool result as text only, its parts in order (`text_stand_in` for each part; `why`
    says why media is not sent)."""
    if not _is_media(message):
        return message.text
    where = f"tool {message.tool_name!r} (call {message.id!r})"
    return "\n".join(text_stand_in(i.part, where, why) for i in _items(message))


def _is_media(message: ToolExecutionResultMessage) -> bool:
    """Whether media goes to the model (else `message.text` is all it gets)."""
    return any(not isinstance(p, TextContent) and p.for_model for p in message.contents or ())


# OpenAI Chat Completions --------------------------------------------------------------------
_TEXT_ONLY_OPENAI = re.compile(
    r"^(gpt-3\.5|gpt-4$|gpt-4-0|gpt-4-32k|o1-mini|o1-preview|o3-mini|deepseek-|text-|davinci|babbage)"
)
_OPENAI_AUDIO = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


def openai_takes_images(model: str) -> bool:
    """Whether a Chat Completions model takes images and files (False for models known to
    be text only)."""
    return not _TEXT_ONLY_OPENAI.match(model.lower())


def openai_chat_content(part: ContentPart, model: str, refuse: Refuse) -> dict[str, Any]:
    """One content part of a user message as a Chat Completions content part (a part the
    API cannot take raises what `refuse` builds)."""
    item = _item(part)
    if item.kind == "binary" and item.data is not None:  # the caller's choice: sent as is
        return {"type": "file", "file": _openai_file(item)}
    media = _openai_media(item, model, "a user message", refuse)
    if isinstance(media, str):
        return {"type": "text", "text": media}
    return media


def _openai_file(item: _Item) -> dict[str, Any]:
    out = {"file_data": item.data_url}
    if item.name:
        out["filename"] = item.name
    return out


def _openai_media(
    item: _Item, model: str, where: str, refuse: Refuse | None = None
) -> dict[str, Any] | str:
    """A user content part carrying `item`, or the text standing for it."""
    if item.kind in ("text", "link"):
        return item.text
    if item.kind == "document":
        return item.document_text()
    if item.kind == "binary":
        return placeholder(item, "Chat Completions takes no files of this type", where, refuse)
    if refuse is None and not openai_takes_images(model):
        return placeholder(item, f"{model} takes text only", where)
    if item.kind == "image":
        return {"type": "image_url", "image_url": {"url": item.url or item.data_url}}
    if item.kind == "audio":
        fmt = _OPENAI_AUDIO.get(item.mime)
        if item.data is None or fmt is None:
            why = "Chat Completions takes wav or mp3 audio inline"
            return placeholder(item, why, where, refuse)
        if refuse is None and "audio" not in model.lower():
            return placeholder(item, f"{model} takes no audio input", where)
        return {"type": "input_audio", "input_audio": {"data": item.data, "format": fmt}}
    if item.data is None:  # a PDF by URL
        return placeholder(item, "Chat Completions takes files inline (base64)", where, refuse)
    if not item.name:
        item = _Item(item.kind, item.part, item.mime, item.data, item.url, "document.pdf")
    return {"type": "file", "file": _openai_file(item)}


def openai_chat_tool_result(
    message: ToolExecutionResultMessage, model: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The `role: tool` message for `message`, and the content parts of the `user` message
    that must follow the tool messages of this turn (empty when there is no media).

    Text, text documents and resource links stay in the tool message in order; each image,
    audio clip or PDF is referenced there as ``[attachment N: ...]`` and sent in the user
    message after a matching label.
    """
    if not _is_media(message):
        return {"role": "tool", "tool_call_id": message.id, "content": message.text}, []
    where = f"tool {message.tool_name!r} (call {message.id!r})"
    chunks: list[str] = []
    follow: list[dict[str, Any]] = []
    for item in _items(message):
        media = _openai_media(item, model, where)
        if isinstance(media, str):
            chunks.append(media)
            continue
        n = len(follow) // 2 + 1
        chunks.append(f"[attachment {n}: {item.label()}, in the next user message]")
        label = f"[attachment {n} of tool call {message.id} ({message.tool_name})]"
        follow += [{"type": "text", "text": label}, media]
    tool = {"role": "tool", "tool_call_id": message.id, "content": "\n".join(chunks)}
    return tool, follow


# Anthropic ------------------------------------------------------------------------------------
_ANTHROPIC_IMAGES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


def anthropic_content(
    part: ContentPart, where: str, refuse: Refuse | None = None
) -> dict[str, Any]:
    """One content part as an Anthropic content block (text, image or document); what
    Anthropic cannot take becomes a text description (or raises what `refuse` builds)."""
    item = _item(part)
    if item.kind in ("text", "link"):
        return {"type": "text", "text": item.text}
    if item.kind == "document":
        block: dict[str, Any] = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": item.text},
        }
        title = item.name or (part.uri if isinstance(part, EmbeddedResource) else None)
        if title:
            block["title"] = title
        return block
    if item.kind == "image" and (item.url or item.mime in _ANTHROPIC_IMAGES):
        source: dict[str, Any] = (
            {"type": "url", "url": item.url}
            if item.url
            else {"type": "base64", "media_type": item.mime, "data": item.data}
        )
        return {"type": "image", "source": source}
    if item.kind == "pdf":
        source = (
            {"type": "url", "url": item.url}
            if item.url
            else {"type": "base64", "media_type": "application/pdf", "data": item.data}
        )
        block = {"type": "document", "source": source}
        if item.name:
            block["title"] = item.name
        return block
    why = {
        "image": "Anthropic takes JPEG, PNG, GIF and WebP images",
        "audio": "Anthropic takes no audio",
    }.get(item.kind, "Anthropic documents are PDF or text")
    return {"type": "text", "text": placeholder(item, why, where, refuse)}


def anthropic_tool_result(message: ToolExecutionResultMessage) -> dict[str, Any]:
    """The `tool_result` block for `message`: its parts in order as text, image and
    document blocks (a text description for what Anthropic cannot take)."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.id}
    if _is_media(message):
        where = f"tool {message.tool_name!r} (call {message.id!r})"
        blocks = [anthropic_content(i.part, where) for i in _items(message)]
        block["content"] = [b for b in blocks if b["type"] != "text" or b["text"]]
    else:
        block["content"] = message.text
    if message.is_error:
        block["is_error"] = True
    return block


# Gemini ---------------------------------------------------------------------------------------
_GEMINI_OLD = re.compile(r"^gemini-(1|2)[.-]")
_GEMINI_RESPONSE_TYPES = {
    "image/png",
    "image/jpeg",
    "image/webp",
    "application/pdf",
    "text/plain",
}


def gemini_multimodal_responses(model: str) -> bool:
    """Whether the model takes media inside `functionResponse.parts` (Gemini 3 and later)."""
    return not _GEMINI_OLD.match(model.removeprefix("models/"))


def gemini_part(part: ContentPart, refuse: Refuse) -> dict[str, Any]:
    """One content part of a user message as a Gemini `Part` (a part the API cannot take
    raises what `refuse` builds)."""
    item = _item(part)
    media = _gemini_media(item, "a user message", refuse)
    return {"text": media} if isinstance(media, str) else media


def _gemini_media(item: _Item, where: str, refuse: Refuse | None = None) -> dict[str, Any] | str:
    if item.kind in ("text", "link"):
        return item.text
    if item.kind == "document":
        return item.document_text()
    if item.kind == "binary" and refuse is None:
        return placeholder(item, "Gemini takes no files of this type", where, refuse)
    if item.url:
        return {"fileData": {"mimeType": item.mime, "fileUri": item.url}}
    return {"inlineData": {"mimeType": item.mime, "data": item.data}}


def gemini_function_response(
    message: ToolExecutionResultMessage, model: str, generated_prefix: str = "twgen_"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The `functionResponse` part for `message`, and the parts to send after the turn's
    function responses (media the function response cannot hold).

    ``response`` is ``{"result": text}`` (``{"error": text}`` for an error result), plus
    ``structuredContent`` when the result has structured data. On Gemini 3 and later,
    PNG/JPEG/WebP images and PDF documents go in ``functionResponse.parts``; other media
    (and all media on older models) follow as inline parts labelled ``[attachment N ...]``.
    A call id starting with `generated_prefix` was made up by toolweave and is not sent.
    """
    where = f"tool {message.tool_name!r} (call {message.id!r})"
    inside = gemini_multimodal_responses(model)
    chunks: list[str] = []
    parts: list[dict[str, Any]] = []
    follow: list[dict[str, Any]] = []
    if _is_media(message):
        for item in _items(message):
            media = _gemini_media(item, where)
            if isinstance(media, str):
                chunks.append(media)
                continue
            n = len(parts) + len(follow) // 2 + 1
            if inside and item.mime in _GEMINI_RESPONSE_TYPES:
                name = f"{message.id}_{n}"  # unique within the request
                key = "inlineData" if "inlineData" in media else "fileData"
                parts.append({key: {**media[key], "displayName": name}})
                chunks.append(f"[attachment {n} ({name}): {item.label()}]")
            else:
                chunks.append(f"[attachment {n}: {item.label()}, in the next user part]")
                label = f"[attachment {n} of tool call {message.id} ({message.tool_name})]"
                follow += [{"text": label}, media]
        text = "\n".join(chunks)
    else:
        text = message.text
    response: dict[str, Any] = {"error" if message.is_error else "result": text}
    if message.structured is not None:
        response["structuredContent"] = json_value(message.structured)
    out: dict[str, Any] = {"name": message.tool_name, "response": response}
    if not message.id.startswith(generated_prefix):
        out["id"] = message.id
    if parts:
        out["parts"] = parts
    return {"functionResponse": out}, follow


# OpenAI Responses -----------------------------------------------------------------------------
def openai_responses_tool_output(message: ToolExecutionResultMessage) -> dict[str, Any]:
    """The Responses API `function_call_output` item for `message`.

    ``output`` is the text, or, when the result has media, a list in order of
    ``input_text``, ``input_image`` (URL or data URL) and ``input_file`` (PDF inline as a
    data URL or by ``file_url``); audio and other binary files become text placeholders.
    """
    item: dict[str, Any] = {"type": "function_call_output", "call_id": message.id}
    if not _is_media(message):
        item["output"] = message.text
        return item
    where = f"tool {message.tool_name!r} (call {message.id!r})"
    out: list[dict[str, Any]] = []
    for it in _items(message):
        if it.kind in ("text", "link"):
            text = it.text
        elif it.kind == "document":
            text = it.document_text()
        elif it.kind == "image":
            out.append(
                {"type": "input_image", "image_url": it.url or it.data_url, "detail": "auto"}
            )
            continue
        elif it.kind == "pdf":
            file: dict[str, Any] = {"type": "input_file"}
            if it.url:
                file["file_url"] = it.url
            else:
                file["file_data"] = it.data_url
                file["filename"] = it.name or "document.pdf"
            out.append(file)
            continue
        else:
            why = (
                "Responses function output takes no audio"
                if it.kind == "audio"
                else ("Responses function output takes no files of this type")
            )
            text = placeholder(it, why, where)
        if text:
            out.append({"type": "input_text", "text": text})
    item["output"] = out
    return item
