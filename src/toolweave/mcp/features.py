"""Resources, resource templates, prompts and completions to serve next to tools.

Declared with decorators in the style of `@tool`; `serve_mcp(..., features=[...])` serves
them and ``toolweave mcp serve MODULE`` picks up every one defined in the module:

```python
@resource("config://app", mime_type="application/json")
def app_config() -> str:
    return '{"debug": false}'

@resource("users://{user_id}/profile")        # a template: {user_id} is an argument
def profile(user_id: str) -> str:
    return f"profile of {user_id}"

@prompt
def review(code: str, language: str = "python") -> str:
    \"\"\"Review a piece of code.\"\"\"
    return f"Please review this {language} code:\\n{code}"

@completion("review", "language")             # values offered for an argument
def languages(value: str) -> list[str]:
    return [x for x in ("python", "rust", "go") if x.startswith(value)]
```

A resource function returns ``str`` (text), ``bytes`` (a blob), or the SDK's
``TextResourceContents`` / ``BlobResourceContents`` (or a list of them). A prompt returns a
``str`` (one user message) or a list of messages: ``str``, ``{"role", "content"}`` dicts
(content a ``str`` or a toolweave content part) or the SDK's ``PromptMessage``. Functions
may be sync or async. A function that raises is answered with a generic JSON-RPC error
(code -32603, "reading the resource … failed on the server"); its exception text goes only to
the ``toolweave.mcp.server`` log, with credential-like text masked. To send the client a
message of your own, raise the SDK's ``MCPError(code, message)``.
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, overload

import mcp_types
from mcp.server.mcpserver import DEFAULT_RESOURCE_SECURITY, ResourceSecurity
from mcp.shared.exceptions import MCPError

from ._secrets import masked_reason

__all__ = ["McpCompletion", "McpPrompt", "McpResource", "completion", "prompt", "resource"]

log = logging.getLogger("toolweave.mcp.server")


async def _call(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if inspect.iscoroutinefunction(func):
        return await func(*args, **kwargs)
    from .._utils.threads import to_thread

    out = await to_thread(func, *args, **kwargs)
    if inspect.isawaitable(out):
        out = await out
    return out


async def _user_call(what: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`func`'s answer; when it raises, a generic `MCPError` (the SDK would send the client
    code 0 and the exception's text, which may hold a credential), the text logged masked.
    An `MCPError` of the function's own is its answer and passes unchanged."""
    try:
        return await _call(func, *args, **kwargs)
    except MCPError:
        raise
    except Exception as e:
        log.warning("%s failed: %s", what, masked_reason(e))
        raise MCPError(mcp_types.INTERNAL_ERROR, f"{what} failed on the server") from e


def _doc(func: Callable[..., Any]) -> str:
    return (inspect.getdoc(func) or "").strip().split("\n\n")[0].strip()


@dataclass(frozen=True)
class McpResource:
    """A resource (a fixed `uri`) or a resource template (`uri` with ``{variables}``, which
    become the function's keyword arguments).

    A template's variables are checked as the SDK's own server checks them (its
    ``ResourceSecurity``): by default a value that is a path escaping upwards (``..`` as a
    segment), an absolute path (``/etc``, ``C:\\``, ``\\\\server``) or holds NUL is refused,
    however it was encoded (``%2F``, ``%5C``, ``%00``), and the function is not called; the
    client is answered "Resource not found". Pass ``security=ResourceSecurity(...)`` to opt
    a template (or some of its variables, ``exempt_params``) out."""

    uri: str
    func: Callable[..., Any]
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    security: ResourceSecurity = DEFAULT_RESOURCE_SECURITY
    """The checks of a template's variables (the SDK's policy; refuses path escapes by
    default)."""
    scopes: tuple[str, ...] = ()
    """The OAuth scopes a client's token needs to read it (with `serve_mcp(auth=...)`)."""

    @property
    def is_template(self) -> bool:
        """Whether `uri` has variables."""
        return "{" in self.uri

    async def read(self, **variables: Any) -> Any:
        """Call the function (with the template's variables)."""
        return await _user_call(f"reading the resource {self.uri!r}", self.func, **variables)


@dataclass(frozen=True)
class McpPrompt:
    """A prompt template; its arguments are the function's parameters (all strings)."""

    name: str
    func: Callable[..., Any]
    title: str | None = None
    description: str | None = None
    arguments: tuple[tuple[str, bool], ...] = field(default=())
    """(name, required) per parameter."""
    context_param: str | None = None
    """The parameter annotated `ToolContext` (not an argument): filled in when rendered, so
    the prompt can ask the client (``aelicit``, ``asample``, ``alist_roots``)."""
    scopes: tuple[str, ...] = ()
    """The OAuth scopes a client's token needs to get it (with `serve_mcp(auth=...)`)."""

    async def render(self, arguments: dict[str, str]) -> Any:
        """Call the function with the client's arguments."""
        extra: dict[str, Any] = {}
        if self.context_param is not None:
            from ..context import ToolContext

            extra[self.context_param] = ToolContext(self.name)
        return await _user_call(f"the prompt {self.name!r}", self.func, **arguments, **extra)


@dataclass(frozen=True)
class McpCompletion:
    """Completion values for `argument` of a prompt (by name) or a resource template (by its
    URI template); the function takes the typed prefix (and optionally ``context``, the
    other arguments already given) and returns candidate values."""

    ref: str
    argument: str
    func: Callable[..., Any]

    async def complete(self, value: str, context: dict[str, str]) -> list[str]:
        """Candidate values for `value`."""
        params = inspect.signature(self.func).parameters
        kwargs = {"context": context} if "context" in params else {}
        what = f"completing {self.argument!r} of {self.ref!r}"
        out = await _user_call(what, self.func, value, **kwargs)
        return [str(v) for v in (out or [])]


def _scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    return tuple(scopes.split()) if isinstance(scopes, str) else tuple(scopes)


def resource(
    uri: str,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    security: ResourceSecurity = DEFAULT_RESOURCE_SECURITY,
    scopes: Iterable[str] = (),
) -> Callable[[Callable[..., Any]], McpResource]:
    """Declare a resource (or, when `uri` has ``{variables}``, a resource template);
    `security` checks a template's variables (see `McpResource`); `scopes` are the OAuth
    scopes needed to read it when served with auth."""

    def wrap(func: Callable[..., Any]) -> McpResource:
        return McpResource(
            uri=uri,
            func=func,
            name=name or func.__name__,
            title=title,
            description=description if description is not None else (_doc(func) or None),
            mime_type=mime_type,
            security=security,
            scopes=_scopes(scopes),
        )

    return wrap


@overload
def prompt(func: Callable[..., Any], /) -> McpPrompt: ...
@overload
def prompt(
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
) -> Callable[[Callable[..., Any]], McpPrompt]: ...
def prompt(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
) -> McpPrompt | Callable[[Callable[..., Any]], McpPrompt]:
    """Declare a prompt: ``@prompt`` or ``@prompt(name=..., title=...)``; `scopes` are the
    OAuth scopes needed to get it when served with auth."""

    def wrap(f: Callable[..., Any]) -> McpPrompt:
        context = _context_param(f)
        args = tuple(
            (p.name, p.default is inspect.Parameter.empty)
            for p in inspect.signature(f).parameters.values()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
            and p.name != context
        )
        return McpPrompt(
            name=name or f.__name__,
            func=f,
            title=title,
            description=description if description is not None else (_doc(f) or None),
            arguments=args,
            scopes=_scopes(scopes),
            context_param=context,
        )

    return wrap(func) if func is not None else wrap


def _context_param(func: Callable[..., Any]) -> str | None:
    """The name of `func`'s parameter annotated `ToolContext`, if any."""
    from ..context import ToolContext

    try:
        hints = typing.get_type_hints(func)
    except Exception:  # unresolvable annotations: go by the name written
        hints = {}
    for p in inspect.signature(func).parameters.values():
        hint = hints.get(p.name, p.annotation)
        if hint is ToolContext or hint == "ToolContext":
            return p.name
    return None


def completion(ref: str, argument: str) -> Callable[[Callable[..., Any]], McpCompletion]:
    """Declare completion values for `argument` of the prompt or resource template `ref`."""

    def wrap(func: Callable[..., Any]) -> McpCompletion:
        return McpCompletion(ref=ref, argument=argument, func=func)

    return wrap


Feature = McpResource | McpPrompt | McpCompletion


def features_in(objects: Iterable[Any]) -> list[Feature]:
    """The resources, prompts and completions among `objects` (e.g. a module's values)."""
    return [o for o in objects if isinstance(o, (McpResource, McpPrompt, McpCompletion))]
