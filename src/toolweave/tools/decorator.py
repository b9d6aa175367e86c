"""`@tool` / `tool(fn)` and `tools_from(obj)`."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

from ..callbacks.framework import CallbackFramework
from ..errors import ToolCardError
from ..schema.function_schema import function_schema
from .card import ReturnBehavior, ToolCard, check_tool_name
from .guardrails import check_guardrails
from .local_function import LocalFunction
from .retry import Retry

__all__ = ["tool", "tools_from"]

F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(
    func: None = None,
    /,
    *,
    name: str | None = None,
    description: str | Sequence[str] | None = None,
    return_behavior: ReturnBehavior | str = ReturnBehavior.TO_LLM,
    strict: bool | None = None,
    parallel_safe: bool | None = None,
    stateless: bool = False,
    idempotent: bool = False,
    timeout: float | None = None,
    max_concurrency: int | None = None,
    max_result_chars: int | None = None,
    max_result_tokens: int | None = None,
    max_argument_retries: int | None = None,
    retry: Retry | None = None,
    requires_approval: Any = None,
    enabled: Any = None,
    guardrails: Sequence[Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    scopes: Sequence[str] | None = None,
    input_params: Mapping[str, Any] | type | None = None,
    card: ToolCard | None = None,
    auto_extract: bool = True,
    callbacks: CallbackFramework | None = None,
) -> Callable[[Callable[..., Any]], LocalFunction]: ...


@overload
def tool(
    func: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | Sequence[str] | None = None,
    return_behavior: ReturnBehavior | str = ReturnBehavior.TO_LLM,
    strict: bool | None = None,
    parallel_safe: bool | None = None,
    stateless: bool = False,
    idempotent: bool = False,
    timeout: float | None = None,
    max_concurrency: int | None = None,
    max_result_chars: int | None = None,
    max_result_tokens: int | None = None,
    max_argument_retries: int | None = None,
    retry: Retry | None = None,
    requires_approval: Any = None,
    enabled: Any = None,
    guardrails: Sequence[Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    scopes: Sequence[str] | None = None,
    input_params: Mapping[str, Any] | type | None = None,
    card: ToolCard | None = None,
    auto_extract: bool = True,
    callbacks: CallbackFramework | None = None,
) -> LocalFunction: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | Sequence[str] | None = None,
    return_behavior: ReturnBehavior | str = ReturnBehavior.TO_LLM,
    strict: bool | None = None,
    parallel_safe: bool | None = None,
    stateless: bool = False,
    idempotent: bool = False,
    timeout: float | None = None,
    max_concurrency: int | None = None,
    max_result_chars: int | None = None,
    max_result_tokens: int | None = None,
    max_argument_retries: int | None = None,
    retry: Retry | None = None,
    requires_approval: Any = None,
    enabled: Any = None,
    guardrails: Sequence[Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    scopes: Sequence[str] | None = None,
    input_params: Mapping[str, Any] | type | None = None,
    card: ToolCard | None = None,
    auto_extract: bool = True,
    callbacks: CallbackFramework | None = None,
) -> LocalFunction | Callable[[Callable[..., Any]], LocalFunction]:
    """Turn a function into a `LocalFunction` tool; bare (`@tool`), with options, or called.

    The name defaults to the function's name and the description to its docstring summary
    (a list of lines is joined with newlines, as LangChain4j's `@Tool({...})`). `card` uses a prebuilt card; options given alongside it (a name, a description,
    `input_params`, or a flag with a non-default value) override the card's values in a copy,
    with `metadata` merged into the card's. `input_params` replaces the generated schema (the
    function is then validated against that schema instead of its signature). With
    `auto_extract=False` the docstring is not read. `parallel_safe` and `max_concurrency` are
    the card's (see `ToolCard`): left out, a method runs one call at a time with the other
    methods of its object in a `ToolService` round. `requires_approval` (True, or a function
    of the arguments and the `ToolContext`) makes `ToolService` ask before each call runs.
    `enabled` (a bool, or a function of the `StepContext`) says per step whether the tool is
    offered at all (docs/toolsets.md). `max_result_chars` / `max_result_tokens` cap the
    result text the model receives, `max_argument_retries` is this tool's budget of argument
    errors and `ModelRetry`s, and `retry` (a `Retry`, only with `idempotent=True`) retries
    transient failures (docs/policies.md). `guardrails` (`InputGuardrail`s and `OutputGuardrail`s)
    check each call's arguments and result in a `ToolService` (docs/policies.md). `scopes`
    are the OAuth scopes a client's token needs to call it when served with
    `serve_mcp(auth=...)` (kept as ``metadata["scopes"]``; docs/mcp.md).
    """
    if scopes is not None:
        listed = scopes.split() if isinstance(scopes, str) else list(scopes)
        metadata = {**(metadata or {}), "scopes": listed}

    def build(fn: Callable[..., Any]) -> LocalFunction:
        if isinstance(fn, LocalFunction):
            fn = fn.func
        static = False
        if isinstance(fn, staticmethod):
            static = True
            fn = fn.__func__
        if isinstance(fn, classmethod):
            raise ToolCardError(
                "@tool does not wrap classmethods; use a plain method or a staticmethod"
            )
        if not callable(fn):
            raise ToolCardError(f"@tool needs a callable, got {type(fn).__name__}")
        tool_name = name or getattr(fn, "__name__", None) or type(fn).__name__
        check_tool_name(tool_name)
        text = (
            description
            if description is None or isinstance(description, str)
            else "\n".join(description)
        )
        fs = function_schema(fn, name=tool_name, description=text, auto_extract=auto_extract)
        if card is not None:
            overrides = _card_overrides(
                card,
                name=name,
                description=text,
                input_params=input_params,
                return_behavior=ReturnBehavior(return_behavior),
                strict=strict,
                parallel_safe=parallel_safe,
                stateless=stateless,
                idempotent=idempotent,
                timeout=timeout,
                max_concurrency=max_concurrency,
                requires_approval=requires_approval,
                limits={
                    "max_result_chars": max_result_chars,
                    "max_result_tokens": max_result_tokens,
                    "max_argument_retries": max_argument_retries,
                    "retry": retry,
                },
                enabled=enabled,
                guardrails=guardrails,
                metadata=metadata,
            )
            # a new card (and id): the prebuilt one may be registered as it is elsewhere
            given = (
                card.model_copy(update={**overrides, "id": uuid.uuid4().hex}) if overrides else card
            )
            made = LocalFunction(given, fn, callbacks=callbacks, schema=fs)
            made._static = static
            return made
        flags: dict[str, Any] = {}
        if parallel_safe is not None:
            flags["parallel_safe"] = parallel_safe
        if max_concurrency is not None:
            flags["max_concurrency"] = max_concurrency
        for key, value in (
            ("max_result_chars", max_result_chars),
            ("max_result_tokens", max_result_tokens),
            ("max_argument_retries", max_argument_retries),
            ("retry", retry),
        ):
            if value is not None:
                flags[key] = value
        if requires_approval is not None:
            flags["requires_approval"] = requires_approval
        if enabled is not None:
            flags["enabled"] = enabled
        if guardrails is not None:
            flags["guardrails"] = guardrails
        the_card = ToolCard(
            name=tool_name,
            description=fs.description,
            input_params=input_params if input_params is not None else fs.json_schema,
            stateless=stateless,
            idempotent=idempotent,
            strict=strict,
            return_behavior=ReturnBehavior(return_behavior),
            timeout=timeout,
            metadata=dict(metadata or {}),
            **flags,
        )
        made = LocalFunction(the_card, fn, callbacks=callbacks, schema=fs)
        made._static = static
        return made

    if func is not None:
        return build(func)
    return build


def _card_overrides(
    card: ToolCard,
    *,
    name: str | None,
    description: str | None,
    input_params: Mapping[str, Any] | type | None,
    return_behavior: ReturnBehavior,
    strict: bool | None,
    parallel_safe: bool | None,
    stateless: bool,
    idempotent: bool,
    timeout: float | None,
    max_concurrency: int | None,
    requires_approval: Any,
    enabled: Any,
    metadata: Mapping[str, Any] | None,
    limits: Mapping[str, Any] | None = None,
    guardrails: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """The fields that `@tool`'s explicit options change on a prebuilt card (openJiuwen:
    a card that disagrees with the options is rebuilt with them)."""
    given: dict[str, Any] = {
        "name": name,
        "description": description,
        "input_params": input_params,
        "return_behavior": None if return_behavior is ReturnBehavior.TO_LLM else return_behavior,
        "strict": strict,
        "parallel_safe": parallel_safe,
        "stateless": True if stateless else None,
        "idempotent": True if idempotent else None,
        "timeout": timeout,
        "max_concurrency": max_concurrency,
        "requires_approval": requires_approval,
        "enabled": enabled,
        "guardrails": None if guardrails is None else check_guardrails(guardrails),
        "metadata": {**card.metadata, **metadata} if metadata else None,
    }
    given.update(limits or {})
    out = {k: v for k, v in given.items() if v is not None and v != getattr(card, k)}
    if parallel_safe is not None and "parallel_safe" not in card.model_fields_set:
        out["parallel_safe"] = parallel_safe  # an explicit True means more than the default
    return out


def tools_from(obj: Any) -> list[LocalFunction]:
    """Collect every `@tool`-marked method of `obj`, bound to it.

    Inherited tools are included, an override in a subclass wins (an override without
    `@tool` removes the tool), and two tools with the same name raise `ToolCardError`.
    A class is instantiated with no arguments first.
    """
    if inspect.isclass(obj):
        try:
            obj = obj()
        except TypeError as e:
            raise ToolCardError(
                f"tools_from({obj.__name__}) needs an instance: the class cannot be created "
                f"without arguments ({e})"
            ) from e
    by_attr: dict[str, Any] = {}
    for klass in reversed(type(obj).__mro__):
        for attr, value in vars(klass).items():
            by_attr[attr] = value
    tools: list[LocalFunction] = []
    seen: dict[str, str] = {}
    for attr, value in by_attr.items():
        if isinstance(value, staticmethod) and isinstance(value.__func__, LocalFunction):
            value = value.__func__
            value._static = True
        if not isinstance(value, LocalFunction):
            continue
        first = next(iter(inspect.signature(value.func).parameters), None)
        bound = value.bind(obj) if not value._static and first in ("self", "cls") else value
        tool_name = bound.card.name
        if tool_name in seen:
            raise ToolCardError(
                f"duplicate tool name {tool_name!r} on {type(obj).__name__}: declared by "
                f"{seen[tool_name]!r} and {attr!r}. Tool names must be unique."
            )
        seen[tool_name] = attr
        tools.append(bound)
    return tools
