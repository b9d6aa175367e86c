"""`ChatRequest`, its parameters and `ToolChoice`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UnsupportedOptionError
from ..tools.card import ToolCard
from .messages import ChatMessage

__all__ = ["ChatRequest", "ChatRequestParameters", "ToolChoice"]


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """Whether and which tools the model must call: `AUTO`, `REQUIRED`, `NONE`,
    `ToolChoice.tool("name")` for one specific tool, or `ToolChoice.allowed_tools(names)`
    (with `required=True`: must call one of them) for a subset of the offered tools; the
    other tools stay in the request (docs/providers.md, Allowed tools)."""

    mode: Literal["auto", "required", "none", "tool"]
    name: str | None = None
    allowed: tuple[str, ...] | None = None
    """The allowed subset (mode "auto" or "required"); None: every offered tool."""

    AUTO: ClassVar[ToolChoice]
    REQUIRED: ClassVar[ToolChoice]
    NONE: ClassVar[ToolChoice]

    def __post_init__(self) -> None:
        if self.allowed is not None:
            if self.mode not in ("auto", "required"):
                raise ValueError("an allowed-tools subset takes mode 'auto' or 'required'")
            if not self.allowed or not all(isinstance(n, str) for n in self.allowed):
                raise ValueError("an allowed-tools subset names at least one tool (strings)")

    @classmethod
    def tool(cls, name: str) -> ToolChoice:
        """Force a call of the tool called `name`."""
        return cls("tool", name)

    @classmethod
    def allowed_tools(cls, names: Iterable[str], *, required: bool = False) -> ToolChoice:
        """Let the model call only the tools called `names` (all offered tools stay in the
        request where the provider allows it); `required`: it must call one of them."""
        unique = tuple(dict.fromkeys([names] if isinstance(names, str) else names))
        return cls("required" if required else "auto", allowed=unique)

    @classmethod
    def parse(cls, value: ToolChoice | str | None) -> ToolChoice | None:
        """Accept a ToolChoice, `"auto"`/`"required"`/`"none"`, or a tool name."""
        if value is None or isinstance(value, ToolChoice):
            return value
        if value in ("auto", "required", "none"):
            return cls(value)  # type: ignore[arg-type]
        return cls.tool(value)

    @property
    def forces(self) -> bool:
        """Whether the model must call a tool (`REQUIRED`, `tool(...)`, a required subset)."""
        return self.mode in ("required", "tool")

    def names_in(self, offered: Iterable[str]) -> list[str]:
        """The names of `offered` this choice lets the model call, in `offered`'s order."""
        if self.mode == "none":
            return []
        if self.mode == "tool":
            return [n for n in offered if n == self.name]
        if self.allowed is None:
            return list(offered)
        allowed = set(self.allowed)
        return [n for n in offered if n in allowed]

    def missing(self, offered: Iterable[str]) -> list[str]:
        """The tools this choice names that are not among `offered`."""
        names = set(offered)
        wanted = (self.name,) if self.mode == "tool" else self.allowed or ()
        return [n for n in wanted if n is not None and n not in names]

    def renamed(self, rename: Callable[[str], str]) -> ToolChoice:
        """This choice with every tool name passed through `rename`."""
        if self.mode == "tool" and self.name is not None:
            return ToolChoice.tool(rename(self.name))
        if self.allowed is not None:
            return ToolChoice(self.mode, allowed=tuple(rename(n) for n in self.allowed))
        return self

    def __repr__(self) -> str:
        if self.allowed is not None:
            extra = ", required=True" if self.mode == "required" else ""
            return f"ToolChoice.allowed_tools({list(self.allowed)!r}{extra})"
        return (
            f"ToolChoice.tool({self.name!r})"
            if self.mode == "tool"
            else f"ToolChoice.{self.mode.upper()}"
        )


ToolChoice.AUTO = ToolChoice("auto")
ToolChoice.REQUIRED = ToolChoice("required")
ToolChoice.NONE = ToolChoice("none")


class ChatRequestParameters(BaseModel):
    """Generic request options; each provider maps, refuses (naming itself and the option),
    or passes through `custom_parameters`, which are merged into the request body last."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    tools: tuple[ToolCard, ...] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    deferred_tools: tuple[str, ...] | None = None
    """Names of offered tools the provider loads only when its own tool search finds them
    (the rest are loaded up front); only models with `supports_tool_search` take it, the
    others refuse it (docs/loop.md, Native tool search)."""
    response_format: Any = None
    """A JSON schema dict, or a pydantic model / dataclass / TypedDict type."""
    custom_parameters: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        unknown = [key for key in data if key not in type(self).model_fields]
        if unknown:
            raise UnsupportedOptionError(
                "ChatRequestParameters",
                unknown[0],
                "not one of its fields ("
                + ", ".join(type(self).model_fields)
                + f"); pass vendor options as custom_parameters={{{unknown[0]!r}: ...}}",
            )
        if "tool_choice" in data:
            data["tool_choice"] = ToolChoice.parse(data["tool_choice"])
        if data.get("tools") is not None:
            data["tools"] = tuple(data["tools"])
        if data.get("deferred_tools") is not None:
            data["deferred_tools"] = tuple(dict.fromkeys(data["deferred_tools"]))
        if data.get("stop") is not None and isinstance(data["stop"], str):
            data["stop"] = (data["stop"],)
        super().__init__(**data)

    def override(self, other: ChatRequestParameters | None) -> ChatRequestParameters:
        """These parameters with every field `other` set explicitly taking precedence."""
        if other is None:
            return self
        update = {k: getattr(other, k) for k in other.model_fields_set}
        if "custom_parameters" in update:
            update["custom_parameters"] = {**self.custom_parameters, **other.custom_parameters}
        return self.model_copy(update=update)


class ChatRequest(BaseModel):
    """What is sent to a `ChatModel`: the messages and the parameters."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    messages: tuple[ChatMessage, ...]
    parameters: ChatRequestParameters = Field(default_factory=ChatRequestParameters)

    def __init__(
        self,
        messages: Sequence[Any] | None = None,
        parameters: ChatRequestParameters | None = None,
        **data: Any,
    ) -> None:
        if messages is not None:
            data["messages"] = tuple(messages)
        if parameters is not None:
            data["parameters"] = parameters
        super().__init__(**data)

    @property
    def tools(self) -> tuple[ToolCard, ...]:
        """The tool cards offered to the model (empty when none)."""
        return self.parameters.tools or ()
