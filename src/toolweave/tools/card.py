"""`ToolCard`: the immutable description of a tool, and `ToolInfo`, its flat descriptor."""

from __future__ import annotations

import copy
import json
import re
import uuid
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from .._utils.jsoncopy import copy_json
from ..errors import ToolCardError
from .guardrails import check_guardrails
from .retry import Retry

__all__ = ["TOOL_NAME_PATTERN", "ReturnBehavior", "ToolCard", "ToolInfo", "check_tool_name"]

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def check_tool_name(name: str) -> str:
    """Return `name` if every provider accepts it, else raise `ToolCardError` saying why."""
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
        reason = (
            "it is empty"
            if not name
            else f"it is {len(name)} characters long"
            if isinstance(name, str) and len(name) > 64
            else "it contains characters other than letters, digits, '_' and '-'"
        )
        raise ToolCardError(
            f"invalid tool name {name!r}: {reason}. OpenAI, Anthropic and Gemini require tool "
            f"names matching {TOOL_NAME_PATTERN.pattern} (at most 64 letters, digits, '_' or '-')."
        )
    return name


class ReturnBehavior(StrEnum):
    """What the loop does with a tool's result (LangChain4j `ReturnBehavior`)."""

    TO_LLM = "to_llm"
    """Send the result back to the model (default)."""
    IMMEDIATE = "immediate"
    """Return to the caller at once, without another model turn."""
    IMMEDIATE_IF_LAST = "immediate_if_last"
    """Return at once when this is the last call of the round."""


class ToolInfo(BaseModel):
    """The flat function descriptor: `type`, `name`, `description`, `parameters`."""

    model_config = ConfigDict(frozen=True)

    type: str = "function"
    name: str = ""
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


def _card_error(cls_name: str, error: ValidationError) -> ToolCardError:
    """A pydantic ValidationError on a card as a `ToolCardError` (code 182000)."""
    problems: list[str] = []
    for err in error.errors(include_url=False):
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, ToolCardError):
            problems.append(cause.message)
        else:
            message = str(err["msg"]).removeprefix("Value error, ")
            loc = ".".join(str(p) for p in err["loc"])
            problems.append(f"{loc}: {message}" if loc else f"{cls_name}: {message}")
    if len(problems) == 1:
        return ToolCardError(problems[0])
    return ToolCardError(f"invalid {cls_name}: " + "; ".join(problems))


def _freeze_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)


class ToolCard(BaseModel):
    """Everything a model and an executor need to know about one tool.

    Immutable, compared and hashed by value over all fields (so the same declaration
    registered twice is recognised, and cards can key a mapping). `input_params` is the
    canonical JSON Schema (an object schema); a pydantic model class is accepted and converted.

    `parallel_safe`: False makes the tool a barrier in a round (it runs alone); given
    explicitly as True, the tool runs in parallel even with other methods of its object
    (which `ToolService` otherwise runs one at a time). `max_concurrency` bounds the calls of
    this tool running at once in a `ToolService` (e.g. a rate-limited API); None: no bound.
    `requires_approval` (True or a per-call function) makes a `ToolService` pause before
    running a call until the caller approves or denies it. `enabled` (False, or a function
    of the `StepContext`) leaves the tool out of the steps it is false for.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    name: str
    description: str = ""
    input_params: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    parallel_safe: bool = True
    stateless: bool = False
    idempotent: bool = False
    strict: bool | None = None
    return_behavior: ReturnBehavior = ReturnBehavior.TO_LLM
    timeout: float | None = None
    max_concurrency: int | None = None
    max_result_chars: int | None = None
    """A cap on the result text the model receives, in characters (images and files count
    by their size); over it the text is cut with a marker, or kept in the service's result
    store and paged (docs/policies.md, "Tool output limits"). None: the toolset's or the
    service's cap."""
    max_result_tokens: int | None = None
    """The same cap in tokens, counted by the service's `result_token_counter`."""
    max_argument_retries: int | None = None
    """This tool's budget of consecutive argument errors and `ModelRetry`s fed back to the
    model (None: the toolset's, else the service's `max_argument_retries`)."""
    retry: Any = None
    """A `Retry` policy for transient failures; only for an `idempotent=True` tool."""
    requires_approval: Any = False
    """True, or a function of (arguments dict, `ToolContext`) returning a bool: a call waits
    for a human decision before it runs in a `ToolService` (docs/approvals.md)."""
    enabled: Any = True
    """Whether a `ToolService` offers the tool: a bool, or a function of the step's
    `StepContext` returning one, asked before every model request (docs/toolsets.md)."""
    guardrails: tuple[Any, ...] = ()
    """`InputGuardrail`s and `OutputGuardrail`s a `ToolService` runs around each call, after
    the service's and the toolsets' own (docs/policies.md, "Guardrails")."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    properties: dict[str, Any] = Field(default_factory=dict)

    _hash: int | None = PrivateAttr(default=None)
    _dialects: dict[Any, Any] = PrivateAttr(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise _card_error(type(self).__name__, e) from None

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        return check_tool_name(v)

    @field_validator("input_params", mode="before")
    @classmethod
    def _schema(cls, v: Any) -> Any:
        if isinstance(v, type) and issubclass(v, BaseModel):
            schema = v.model_json_schema()
            schema.pop("title", None)
            return schema
        if v is None:
            raise ToolCardError("input_params must be a JSON Schema object, not None")
        if isinstance(v, dict):
            return copy_json(v)
        to_schema = getattr(v, "to_schema", None)
        if callable(to_schema):
            return to_schema()
        return v

    @field_validator("timeout")
    @classmethod
    def _check_timeout(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ToolCardError(f"timeout must be positive, got {v}")
        return v

    @field_validator("requires_approval")
    @classmethod
    def _check_requires_approval(cls, v: Any) -> Any:
        if not isinstance(v, bool) and not callable(v):
            raise ToolCardError(
                "requires_approval must be a bool or a function of (arguments, ToolContext), "
                f"got {type(v).__name__}"
            )
        return v

    @field_validator("guardrails", mode="before")
    @classmethod
    def _check_guardrails(cls, v: Any) -> Any:
        return check_guardrails(v)

    @field_validator("enabled")
    @classmethod
    def _check_enabled(cls, v: Any) -> Any:
        if not isinstance(v, bool) and not callable(v):
            raise ToolCardError(
                f"enabled must be a bool or a function of the StepContext, got {type(v).__name__}"
            )
        return v

    @field_validator("max_concurrency")
    @classmethod
    def _check_max_concurrency(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ToolCardError(f"max_concurrency must be at least 1 (or None), got {v}")
        return v

    @field_validator("max_result_chars", "max_result_tokens")
    @classmethod
    def _check_result_cap(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ToolCardError(f"a result cap must be at least 1 (or None), got {v}")
        return v

    @field_validator("max_argument_retries")
    @classmethod
    def _check_argument_retries(cls, v: int | None) -> int | None:
        if v is not None and v < 0:
            raise ToolCardError(f"max_argument_retries must not be negative, got {v}")
        return v

    @model_validator(mode="after")
    def _check_retry(self) -> ToolCard:
        if self.retry is not None:
            if not isinstance(self.retry, Retry):
                raise ToolCardError(
                    f"retry must be a Retry(...) policy, got {type(self.retry).__name__}"
                )
            self.retry.check(idempotent=self.idempotent, name=self.name)
        return self

    @model_validator(mode="after")
    def _check_schema(self) -> ToolCard:
        schema = self.input_params
        if schema and schema.get("type", "object") != "object":
            raise ToolCardError(
                f"tool {self.name!r}: input_params must be an object schema "
                f"(type 'object'), got type {schema.get('type')!r}"
            )
        return self

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(
                (
                    type(self).__name__,
                    *(_freeze_key(getattr(self, f)) for f in type(self).model_fields),
                )
            )
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, ToolCard)
        return all(getattr(self, f) == getattr(other, f) for f in type(self).model_fields)

    def model_copy(self, *, update: Any = None, deep: bool = False) -> ToolCard:  # type: ignore[override]
        """A validated copy with `update` applied (a new id is not generated). Fields left
        at their defaults stay unset in the copy (`parallel_safe` tells "given" apart)."""
        given = self.model_fields_set
        data = {f: getattr(self, f) for f in type(self).model_fields if f in given or f == "id"}
        data.update(update or {})
        return type(self)(**(copy.deepcopy(data) if deep else data))

    def tool_info(self) -> ToolInfo:
        """The flat function descriptor (`type="function"`, name, description, parameters)."""
        return ToolInfo(name=self.name, description=self.description, parameters=self.input_params)

    def to_str(self) -> str:
        """`"id=<id>,name=<name>"` (openJiuwen's short form)."""
        return f"id={self.id},name={self.name}"

    def dialect_cache(self) -> dict[Any, Any]:
        """Per-card cache used by `toolweave.dialects` (keyed by dialect and strictness)."""
        return self._dialects
