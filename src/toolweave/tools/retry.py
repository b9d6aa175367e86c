"""Retries of tool calls: `ModelRetry`, which a tool raises to ask the model to try again,
and `Retry`, the transient-failure policy of an idempotent tool (docs/policies.md,
"Retries").

`Retry` is declared on a card (`@tool(idempotent=True, retry=Retry())`) and refused at
declaration for a tool that is not `idempotent=True`: repeating a call is only safe when
running it twice does what running it once does. Only the exceptions it lists are retried
(by default `transient_error`: connection errors and timeouts of HTTP and MCP tools), within
`attempts` and `total_time`, with exponential backoff and jitter between attempts.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import ErrorCode, ToolCardError

__all__ = ["ModelRetry", "Retry", "transient_error"]

T = TypeVar("T")


class ModelRetry(Exception):
    """Raised by a tool to ask the model to call it again, differently: the model receives
    `message` as the call's (error) result. It counts against the tool's argument-retry
    budget (`max_argument_retries` of the card, its toolset, else the service), is not a
    failure (no `execution_error_handler`, no warning), and once the budget is spent it is
    handled as the tool's failure."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or getattr(current, "cause", None)


_TRANSIENT_CODES = frozenset(
    {
        ErrorCode.RESTFUL_API_EXECUTION_TIMEOUT,
        ErrorCode.MCP_TIMEOUT,
        ErrorCode.MCP_CONNECTION_ERROR,
    }
)


def transient_error(error: BaseException) -> bool:
    """Whether `error` (or its cause) is a connection error or a timeout of an HTTP or MCP
    tool: `RestfulApiTimeoutError`, a `RestfulApiError` caused by an `httpx2` network,
    protocol or timeout error, `McpTimeoutError`, or an MCP connection error (code 182302).
    Nothing else is: not an HTTP error status, not a local tool's own exception or
    timeout."""
    for e in _chain(error):
        code = getattr(e, "code", None)
        if code in _TRANSIENT_CODES:
            return True
        if code == ErrorCode.RESTFUL_API_EXECUTION_ERROR:
            import httpx2

            cause = getattr(e, "cause", None)
            if isinstance(
                cause, (httpx2.NetworkError, httpx2.RemoteProtocolError, httpx2.TimeoutException)
            ):
                return True
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    """Retry a failed call of an idempotent tool, for transient failures only.

    `attempts`: how many times the call may run in all (the first included). Before attempt
    n+2 the loop waits ``min(backoff * 2**n, max_delay)``, shortened by up to `jitter` (a
    fraction, drawn at random), so calls that failed together do not retry together. No
    attempt starts once `total_time` seconds have passed since the first began (each
    attempt is bounded by the tool's own timeout). `on`: the exception types to retry (a
    match anywhere in the cause chain) or a predicate of the exception; by default
    `transient_error`. Any other failure goes to the model at once, as without a policy.
    """

    attempts: int = 3
    backoff: float = 0.5
    max_delay: float = 8.0
    total_time: float = 60.0
    jitter: float = 0.25
    on: tuple[type[BaseException], ...] | Callable[[BaseException], bool] = field(
        default=transient_error
    )

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ToolCardError(f"Retry(attempts=...) must be at least 1, got {self.attempts}")
        if self.backoff < 0 or self.max_delay < 0 or self.total_time <= 0:
            raise ToolCardError(
                "Retry(backoff=, max_delay=) must not be negative and total_time must be "
                f"positive, got backoff={self.backoff}, max_delay={self.max_delay}, "
                f"total_time={self.total_time}"
            )
        if not 0 <= self.jitter <= 1:
            raise ToolCardError(f"Retry(jitter=...) must be in [0, 1], got {self.jitter}")
        on = self.on
        if isinstance(on, type):
            on = (on,)
            object.__setattr__(self, "on", on)
        if isinstance(on, tuple):
            if not on or not all(isinstance(t, type) and issubclass(t, BaseException) for t in on):
                raise ToolCardError(
                    "Retry(on=...) takes exception types or a predicate of the exception"
                )
        elif not callable(on):
            raise ToolCardError(
                f"Retry(on=...) takes exception types or a predicate, got {type(on).__name__}"
            )

    def retries(self, error: BaseException) -> bool:
        """Whether `error` is one this policy retries."""
        on = self.on
        if isinstance(on, tuple):
            return any(isinstance(e, on) for e in _chain(error))
        return bool(on(error))

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """The wait before retry number `retry` (0 before the second attempt)."""
        base = min(self.backoff * 2 ** min(retry, 64), self.max_delay)
        draw: float = (rng or random).random()
        return float(base * (1 - self.jitter * draw))

    async def run(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        failed: Callable[[T], BaseException | None] | None = None,
        on_retry: Callable[[BaseException, int, float], Any] | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> tuple[T, int]:
        """Run `attempt` until it succeeds, fails with an error this policy does not retry,
        or the attempts or the time are spent; returns its last outcome and how many
        attempts ran. An exception ends it by raising; `failed` tells, for a returned
        outcome, the error it stands for (None: a success). `on_retry(error, attempt,
        wait)` is told before each wait."""
        start = time.monotonic()
        n = 0
        while True:
            n += 1
            raised: BaseException | None = None
            try:
                out = await attempt()
            except Exception as e:
                raised = e
                error: BaseException | None = e
            else:
                error = failed(out) if failed is not None else None
            if error is None or n >= self.attempts or not self.retries(error):
                break
            wait = self.delay(n - 1)
            if time.monotonic() - start + wait >= self.total_time:
                break
            if on_retry is not None:
                on_retry(error, n, wait)
            await sleep(wait)
        if raised is not None:
            raise raised
        return out, n

    def check(self, *, idempotent: bool, name: str) -> Retry:
        """Refuse the policy for a tool that is not idempotent (`ToolCardError`)."""
        if not idempotent:
            raise ToolCardError(
                f"tool {name!r} declares retry= but is not idempotent=True: a failed call "
                "may have run already (a timeout, a lost connection), and toolweave re-sends "
                "only tools that are safe to run twice. Declare idempotent=True if it is."
            )
        return self
