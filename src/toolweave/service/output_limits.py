"""Tool output limits: a cap on the result text a model receives, the stores that keep a
capped result whole so the model can page through it, and a history processor that
replaces old tool results with a stub (docs/policies.md, "Tool output limits").

A cap is in characters (`max_result_chars`) or tokens (`max_result_tokens`, counted by a
function of the caller's); the most specific wins: the card's, the toolset's
(`.limited(...)`), the service's. Images, audio and files count by their size (bytes; a
quarter of that in tokens), a resource link by its description. Over the cap the model gets
the result's beginning and a marker saying how much was cut; with a `ResultStore` the whole
result is kept and the model is offered `read_result(result_id, page)` to read the rest.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..chat.messages import AiMessage, ChatMessage, ToolExecutionResultMessage
from ..errors import ToolCardError
from ..execution.content import (
    AudioContent,
    EmbeddedResource,
    FileContent,
    ImageContent,
    ResourceLink,
    TextContent,
)
from ..execution.results import ToolExecutionResult
from ..tools.card import ToolCard

__all__ = [
    "READ_RESULT_TOOL",
    "TRUNCATED_ATTRIBUTE",
    "ClearToolResults",
    "DirectoryResultStore",
    "MemoryResultStore",
    "ResultStore",
    "StoredResult",
    "TokenCounter",
]

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text (e.g. ``lambda text: len(encoding.encode(text))``)."""

TRUNCATED_ATTRIBUTE = "toolweave.truncated"
"""The attribute of a capped result (and its message): size, shown, limit, result_id."""

READ_RESULT_TOOL = "read_result"
"""The name of the generated tool that pages through stored results."""


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A capped result kept whole: its `text` (images and files by their description),
    what page 1 (the preview the model saw) showed (`shown` characters), the size of the
    later pages (`page_chars`), and which call produced it."""

    text: str
    shown: int
    page_chars: int
    tool_name: str
    call_id: str

    @property
    def pages(self) -> int:
        """Page 1 (the preview) plus the pages of the rest."""
        rest = max(len(self.text) - self.shown, 0)
        return 1 + math.ceil(rest / self.page_chars)

    def page(self, number: int) -> str:
        """The text of page `number` (1 is the preview)."""
        if number == 1:
            return self.text[: self.shown]
        start = self.shown + (number - 2) * self.page_chars
        return self.text[start : start + self.page_chars]

    def to_json(self) -> dict[str, Any]:
        """The JSON form a store may keep."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredResult:
        """The result `to_json` describes."""
        return cls(**{k: data[k] for k in ("text", "shown", "page_chars", "tool_name", "call_id")})


@runtime_checkable
class ResultStore(Protocol):
    """Keeps capped results whole so the model can read them page by page."""

    async def put(self, result_id: str, result: StoredResult) -> None:
        """Keep `result` under `result_id` (putting the same id again replaces it)."""

    async def get(self, result_id: str) -> StoredResult | None:
        """The result kept under `result_id`, or None."""


class MemoryResultStore:
    """Results kept in this process, the `max_results` most recent (oldest dropped first).
    Shared by every conversation of the service; a result is read only by the conversation
    that stored it."""

    def __init__(self, max_results: int = 1000) -> None:
        if max_results < 1:
            raise ValueError("max_results must be at least 1")
        self.max_results = max_results
        self._results: OrderedDict[str, StoredResult] = OrderedDict()

    def __len__(self) -> int:
        return len(self._results)

    async def put(self, result_id: str, result: StoredResult) -> None:
        """Keep `result` (see `ResultStore.put`)."""
        self._results[result_id] = result
        self._results.move_to_end(result_id)
        while len(self._results) > self.max_results:
            self._results.popitem(last=False)

    async def get(self, result_id: str) -> StoredResult | None:
        """The result under `result_id`, or None."""
        return self._results.get(result_id)


_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class DirectoryResultStore:
    """Results kept as JSON files in `path` (created if missing), one per result: they
    outlive the process, so a continued or resumed conversation (another worker too, on a
    shared directory) can still read them. Nothing is deleted; clear the directory as
    your retention requires."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def _file(self, result_id: str) -> Path:
        if not _ID.match(result_id):
            raise ValueError(f"not a result id: {result_id!r}")
        return self.path / f"{result_id}.json"

    async def put(self, result_id: str, result: StoredResult) -> None:
        """Write `result` to its file (atomically: a reader never sees half of it)."""
        target = self._file(result_id)
        data = json.dumps(result.to_json(), ensure_ascii=False)

        def write() -> None:
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(data, encoding="utf-8")
            os.replace(tmp, target)

        await asyncio.to_thread(write)

    async def get(self, result_id: str) -> StoredResult | None:
        """The result in its file, or None."""
        try:
            target = self._file(result_id)
        except ValueError:
            return None
        try:
            text = await asyncio.to_thread(target.read_text, encoding="utf-8")
        except FileNotFoundError:
            return None
        return StoredResult.from_json(json.loads(text))


def as_store(value: Any) -> ResultStore | None:
    """`ToolService(result_store=...)`: True means a `MemoryResultStore`."""
    if value is None or value is False:
        return None
    if value is True:
        return MemoryResultStore()
    if not isinstance(value, ResultStore):
        raise TypeError(
            f"result_store must be a ResultStore (put/get), True or None, not {type(value).__name__}"
        )
    return value


READ_RESULT_CARD = ToolCard(
    name=READ_RESULT_TOOL,
    description=(
        "Read a page of a tool result that was too long to show in full. Page 1 is the part "
        "already shown; use the result_id given in the truncation note."
    ),
    input_params={
        "type": "object",
        "properties": {
            "result_id": {"type": "string", "description": "The id from the truncation note."},
            "page": {"type": "integer", "minimum": 1, "description": "The page to read."},
        },
        "required": ["result_id", "page"],
        "additionalProperties": False,
    },
    idempotent=True,
)
"""The card of the generated tool, offered while a conversation has stored results."""


# measuring and cutting ------------------------------------------------------------------------
def _binary_size(part: Any) -> int:
    data = getattr(part, "data", None)
    if data is not None:
        return len(data.rstrip("=")) * 3 // 4
    if isinstance(part, EmbeddedResource) and part.text is not None:
        return len(part.text)
    url = getattr(part, "url", None)
    return len(url) if url else len(part.describe())


_Piece = tuple[str | None, Any]
"""(text, None) for text, (None, part) for any other part."""


def _pieces(result: ToolExecutionResult) -> list[_Piece]:
    contents = result.contents
    if not contents:
        return [(result.result_text(), None)]
    out: list[_Piece] = []
    for part in contents:
        if not part.for_model:
            continue
        if isinstance(part, (TextContent, EmbeddedResource)) and part.text is not None:
            out.append((part.text, None))
        else:
            out.append((None, part))
    return out


def _rendered(piece: _Piece) -> str:
    text, part = piece
    return text if text is not None else f"[{part.describe()}]"


@dataclass(frozen=True, slots=True)
class Cap:
    """The cap that applies to one call: characters and/or tokens."""

    chars: int | None
    tokens: int | None
    counter: TokenCounter | None

    def describe(self) -> str:
        """`10,000 characters`, `2,000 tokens` or both."""
        bits = []
        if self.chars is not None:
            bits.append(f"{self.chars:,} characters")
        if self.tokens is not None:
            bits.append(f"{self.tokens:,} tokens")
        return " and ".join(bits)

    def cost(self, piece: _Piece) -> tuple[int, int]:
        """(characters, tokens) of a piece."""
        text, part = piece
        if text is None:
            size = _binary_size(part)
            return size, size // 4
        tokens = self.counter(text) if self.tokens is not None and self.counter else 0
        return len(text), tokens

    def fit(self, text: str, chars: int, tokens: int) -> int:
        """The longest prefix of `text` within `chars` characters and `tokens` tokens."""
        n = min(len(text), chars)
        if self.tokens is None or self.counter is None or self.counter(text[:n]) <= tokens:
            return n
        low, high = 0, n  # counter(text[:low]) fits, text[:high] does not
        while high - low > 1:
            mid = (low + high) // 2
            if self.counter(text[:mid]) <= tokens:
                low = mid
            else:
                high = mid
        return low


def result_id(call_id: str, tool_name: str, text: str) -> str:
    """A stable id for a stored result: the same call with the same output gets the same
    id (a replayed durable step stores it again under the same name)."""
    digest = hashlib.sha256(f"{tool_name}\0{call_id}\0{text}".encode()).hexdigest()
    return f"res_{digest[:20]}"


def cut(
    result: ToolExecutionResult, cap: Cap, call_id: str, tool_name: str, store: bool
) -> tuple[ToolExecutionResult, StoredResult | None, str | None]:
    """`result` within `cap`: itself when it fits, else its beginning with a marker (and,
    with `store`, what to keep and its id)."""
    pieces = _pieces(result)
    costs = [cap.cost(p) for p in pieces]
    total_chars = sum(c for c, _ in costs)
    total_tokens = sum(t for _, t in costs)
    chars_left = cap.chars if cap.chars is not None else math.inf
    tokens_left = cap.tokens if cap.tokens is not None else math.inf
    if total_chars <= chars_left and total_tokens <= tokens_left:
        return result, None, None
    kept: list[_Piece] = []
    for piece, (chars, tokens) in zip(pieces, costs, strict=True):
        if chars <= chars_left and tokens <= tokens_left:
            kept.append(piece)
            chars_left -= chars
            tokens_left -= tokens
            continue
        text = piece[0]
        if text is not None:
            n = cap.fit(
                text,
                int(min(chars_left, len(text))),
                int(tokens_left) if tokens_left != math.inf else 0,
            )
            if 0 < n < len(text):  # end at a line's end when one is near
                newline = text.rfind("\n", 0, n)
                if newline >= 0 and newline + 1 >= n * 0.8:
                    n = newline + 1
            if n:
                kept.append((text[:n], None))
        break
    rendered = "\n".join(_rendered(p) for p in pieces)
    shown = len("\n".join(_rendered(p) for p in kept))
    size = f"{total_chars:,} characters"
    if cap.tokens is not None:
        size += f" ({total_tokens:,} tokens)"
    stored: StoredResult | None = None
    rid: str | None = None
    if store:
        rid = result_id(call_id, tool_name, rendered)
        page_chars = cap.chars
        if page_chars is None:  # a token cap: the later pages are as long as the preview
            page_chars = max(shown, 1)
        stored = StoredResult(rendered, shown, page_chars, tool_name, call_id)
        marker = (
            f"[Output truncated: the result of {tool_name} is {size}, over its limit of "
            f"{cap.describe()}; this is page 1 of {stored.pages}. The full result is stored "
            f"as {rid!r}: call {READ_RESULT_TOOL}(result_id={rid!r}, page=2) for the next "
            "page.]"
        )
    else:
        marker = (
            f"[Output truncated: the result of {tool_name} is {size}, over its limit of "
            f"{cap.describe()}; only the beginning is shown ({max(len(rendered) - shown, 0):,} "
            "characters cut). To see other parts, call the tool again asking for less "
            "(narrower arguments, a filter, a smaller page).]"
        )
    attributes = {
        **result.attributes,
        TRUNCATED_ATTRIBUTE: {
            "size": total_chars,
            "shown": shown,
            "limit": cap.describe(),
            "result_id": rid,
        },
    }
    if not result.contents:
        preview = (kept[0][0] or "").removesuffix("\n") if kept else ""
        text = f"{preview}\n{marker}" if preview else marker
        out = ToolExecutionResult(
            text=text,
            is_error=result.is_error,
            result=result.result,
            structured=None,
            attributes=attributes,
            error=result.error,
        )
        return out, stored, rid
    parts: list[Any] = []
    for text, part in kept:
        parts.append(TextContent(text=text) if text is not None else part)
    parts.append(TextContent(text=marker))
    out = ToolExecutionResult(
        text="\n".join(p.text for p in parts if isinstance(p, TextContent)),
        is_error=result.is_error,
        result=result.result,
        contents=tuple(parts),
        structured=None,
        attributes=attributes,
        error=result.error,
    )
    return out, stored, rid


def page_text(rid: str, stored: StoredResult, page: int) -> str:
    """What `read_result(rid, page)` answers."""
    pages = stored.pages
    body = stored.page(page)
    start = 0 if page == 1 else stored.shown + (page - 2) * stored.page_chars
    head = (
        f"[Page {page} of {pages} of {rid} ({stored.tool_name}), characters "
        f"{start + 1:,}-{start + len(body):,} of {len(stored.text):,}]"
    )
    tail = (
        f"\n[Call {READ_RESULT_TOOL}(result_id={rid!r}, page={page + 1}) for the next page.]"
        if page < pages
        else "\n[This is the last page.]"
    )
    return f"{head}\n{body}{tail}"


def stored_ids(messages: Sequence[ChatMessage]) -> list[str]:
    """The ids of the results stored for a conversation, from its history."""
    out: list[str] = []
    for m in messages:
        if isinstance(m, ToolExecutionResultMessage):
            info = m.attributes.get(TRUNCATED_ATTRIBUTE)
            rid = info.get("result_id") if isinstance(info, dict) else None
            if rid and rid not in out:
                out.append(rid)
    return out


def check_cap(chars: int | None, tokens: int | None, counter: Any) -> None:
    """Refuse a cap that cannot work (`ToolCardError`)."""
    for name, value in (("max_result_chars", chars), ("max_result_tokens", tokens)):
        if value is not None and value < 1:
            raise ToolCardError(f"{name} must be at least 1 (or None), got {value}")
    if counter is not None and not callable(counter):
        raise ToolCardError("result_token_counter must be a function of a text returning an int")


# the history processor ------------------------------------------------------------------------
CLEARED_ATTRIBUTE = "toolweave.cleared"
"""The attribute of a stub that replaced an old result: the original's size in characters."""


class ClearToolResults:
    """A history processor (``list[ChatMessage] -> list[ChatMessage]``): every tool result
    answering a model turn older than the last `keep_rounds` tool rounds is replaced by a
    stub naming what was there (tool, call id, size), so old bulky outputs stop costing
    tokens on every request. The call ids stay answered (the history stays valid); results
    of at most `min_chars` characters, results of the tools in `keep_tools`, and results
    already cleared are left as they are. The messages given are not changed."""

    def __init__(
        self, keep_rounds: int = 3, *, min_chars: int = 200, keep_tools: Sequence[str] = ()
    ) -> None:
        if keep_rounds < 0:
            raise ValueError("keep_rounds must not be negative")
        self.keep_rounds = keep_rounds
        self.min_chars = min_chars
        self.keep_tools = frozenset(keep_tools)

    def __repr__(self) -> str:
        return f"ClearToolResults(keep_rounds={self.keep_rounds}, min_chars={self.min_chars})"

    def __call__(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The history with old tool results replaced by stubs."""
        turns = [
            i
            for i, m in enumerate(messages)
            if isinstance(m, AiMessage) and m.tool_execution_requests
        ]
        if len(turns) <= self.keep_rounds:
            return list(messages)
        cutoff = turns[len(turns) - self.keep_rounds] if self.keep_rounds else len(messages)
        out: list[ChatMessage] = []
        for i, m in enumerate(messages):
            if (
                i < cutoff
                and isinstance(m, ToolExecutionResultMessage)
                and m.tool_name not in self.keep_tools
                and CLEARED_ATTRIBUTE not in m.attributes
            ):
                size = _message_size(m)
                if size > self.min_chars:
                    m = ToolExecutionResultMessage(
                        id=m.id,
                        tool_name=m.tool_name,
                        text=(
                            f"[Result of {m.tool_name} (call {m.id}, {size:,} characters) "
                            "cleared from the history to save space; call the tool again "
                            "if you need it.]"
                        ),
                        is_error=m.is_error,
                        attributes={CLEARED_ATTRIBUTE: size},
                    )
            out.append(m)
        return out


def _message_size(m: ToolExecutionResultMessage) -> int:
    if not m.contents:
        return len(m.text)
    size = 0
    for part in m.contents:
        if isinstance(part, TextContent):
            size += len(part.text)
        elif isinstance(part, (ImageContent, AudioContent, FileContent, EmbeddedResource)):
            size += _binary_size(part)
        elif isinstance(part, ResourceLink):
            size += len(part.describe())
    return size
