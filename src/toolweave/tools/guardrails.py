"""Tool guardrails: checks that run before a tool call (on its arguments) and after it (on
its result), and the verdicts they return (docs/policies.md, "Guardrails").

An input guardrail is `func(arguments, ctx)`: `arguments` is a copy of the validated
arguments (defaults filled in: what the tool will receive) and `ctx` the call's
`ToolContext`. An output guardrail is `func(result, ctx)`: `result` is the
`ToolExecutionResult` the tool produced, before it enters the history. Either may be sync or
async and returns a verdict: `Allow()`, `Replace(value)`, `Reject(message)` or
`Halt(reason)`. Mark which side a function guards with `@input_guardrail` /
`@output_guardrail` (or build `InputGuardrail(func)` / `OutputGuardrail(func)`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, overload

from ..errors import ErrorCode, ToolCardError, ToolweaveError

__all__ = [
    "Allow",
    "Guardrail",
    "GuardrailFunc",
    "GuardrailHalted",
    "Halt",
    "InputGuardrail",
    "OutputGuardrail",
    "Reject",
    "Replace",
    "Verdict",
    "check_guardrails",
    "input_guardrail",
    "output_guardrail",
]


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the call (or its result) through unchanged."""


@dataclass(frozen=True, slots=True)
class Replace:
    """Go on with `value` instead: new arguments (a mapping, validated again like the
    model's own) for an input guardrail; a new result (a `str`, a `ToolExecutionResult`, or
    any value a tool may return) for an output guardrail."""

    value: Any


@dataclass(frozen=True, slots=True)
class Reject:
    """The model receives `message` as the call's (error) result and the conversation goes
    on; an input guardrail's call does not run, an output guardrail's result is dropped."""

    message: str


@dataclass(frozen=True, slots=True)
class Halt:
    """End the conversation with `GuardrailHalted` (`reason` says why); the history stays
    valid (the call is answered with a note saying it was stopped)."""

    reason: str


Verdict: TypeAlias = Allow | Replace | Reject | Halt
"""What a guardrail returns."""

GuardrailFunc: TypeAlias = Callable[[Any, Any], "Verdict | Awaitable[Verdict]"]
"""`(arguments or result, ToolContext) -> Verdict`, sync or async."""

Stage = Literal["input", "output"]


@dataclass(frozen=True, slots=True)
class _Guardrail:
    func: GuardrailFunc
    name: str = ""
    """How errors, logs and `GuardrailHalted` name it (default: the function's name)."""

    stage: ClassVar[Stage] = "input"

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise ToolCardError(
                f"a guardrail needs a function of (value, ToolContext), got "
                f"{type(self.func).__name__}"
            )
        if not self.name:
            name = getattr(self.func, "__name__", None) or type(self.func).__name__
            object.__setattr__(self, "name", name)

    def __call__(self, value: Any, ctx: Any) -> Verdict | Awaitable[Verdict]:
        """Ask the function directly (e.g. in a unit test of the guardrail)."""
        return self.func(value, ctx)


@dataclass(frozen=True, slots=True)
class InputGuardrail(_Guardrail):
    """Runs before a call, on its validated arguments: `func(arguments, ctx) -> Verdict`."""

    stage: ClassVar[Stage] = "input"


@dataclass(frozen=True, slots=True)
class OutputGuardrail(_Guardrail):
    """Runs after a call, on its `ToolExecutionResult`: `func(result, ctx) -> Verdict`."""

    stage: ClassVar[Stage] = "output"


Guardrail: TypeAlias = InputGuardrail | OutputGuardrail
"""Either kind; `guardrails=` takes a sequence of them."""


@overload
def input_guardrail(func: GuardrailFunc, /) -> InputGuardrail: ...
@overload
def input_guardrail(
    func: None = None, /, *, name: str | None = None
) -> Callable[[GuardrailFunc], InputGuardrail]: ...
def input_guardrail(
    func: GuardrailFunc | None = None, /, *, name: str | None = None
) -> InputGuardrail | Callable[[GuardrailFunc], InputGuardrail]:
    """Mark `func(arguments, ctx)` as an input guardrail (bare, or with a `name`)."""
    if func is not None:
        return InputGuardrail(func)
    return lambda f: InputGuardrail(f, name or "")


@overload
def output_guardrail(func: GuardrailFunc, /) -> OutputGuardrail: ...
@overload
def output_guardrail(
    func: None = None, /, *, name: str | None = None
) -> Callable[[GuardrailFunc], OutputGuardrail]: ...
def output_guardrail(
    func: GuardrailFunc | None = None, /, *, name: str | None = None
) -> OutputGuardrail | Callable[[GuardrailFunc], OutputGuardrail]:
    """Mark `func(result, ctx)` as an output guardrail (bare, or with a `name`)."""
    if func is not None:
        return OutputGuardrail(func)
    return lambda f: OutputGuardrail(f, name or "")


def check_guardrails(value: Any) -> tuple[Guardrail, ...]:
    """`value` (a guardrail, a sequence of them, or None) as a tuple; anything else (a
    plain function, whose side is unknown) is a `ToolCardError` saying what to do."""
    if value is None:
        return ()
    items: Iterable[Any] = (
        (value,) if isinstance(value, InputGuardrail | OutputGuardrail) else value
    )
    if isinstance(value, str | bytes) or not isinstance(items, Iterable):
        raise ToolCardError(
            f"guardrails must be a sequence of InputGuardrail / OutputGuardrail, got "
            f"{type(value).__name__}"
        )
    out = tuple(items)
    for item in out:
        if not isinstance(item, InputGuardrail | OutputGuardrail):
            what = getattr(item, "__name__", type(item).__name__)
            raise ToolCardError(
                f"guardrail {what!r} is neither an InputGuardrail nor an OutputGuardrail: "
                "mark the function with @input_guardrail (it checks the arguments) or "
                "@output_guardrail (it checks the result)"
            )
    return out


class GuardrailHalted(ToolweaveError, RuntimeError):
    """A guardrail returned `Halt` (or failed: guardrails fail closed) and the conversation
    ended. `guardrail` names it, `reason` says why, `stage` is ``"input"`` or ``"output"``,
    `tool_name` and `call_id` name the call; `partial_result` holds the valid history (the
    call answered with a note that it was stopped)."""

    default_code = ErrorCode.GUARDRAIL_HALTED

    def __init__(
        self,
        reason: str,
        *,
        guardrail: str,
        stage: str,
        tool_name: str,
        call_id: str,
    ) -> None:
        super().__init__(
            f"guardrail {guardrail!r} halted the conversation at the {stage} of "
            f"{tool_name!r} (call {call_id}): {reason}",
            details={
                "guardrail": guardrail,
                "stage": stage,
                "reason": reason,
                "tool_name": tool_name,
                "call_id": call_id,
            },
        )
        self.guardrail = guardrail
        self.reason = reason
        self.stage = stage
        self.tool_name = tool_name
        self.call_id = call_id
        self.partial_result: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_halted,
            (self.reason, self.guardrail, self.stage, self.tool_name, self.call_id),
        )


def _rebuild_halted(
    reason: str, guardrail: str, stage: str, tool_name: str, call_id: str
) -> GuardrailHalted:
    return GuardrailHalted(
        reason, guardrail=guardrail, stage=stage, tool_name=tool_name, call_id=call_id
    )
