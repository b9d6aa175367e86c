"""Task-augmented tool calls (MCP 2025-11-25 tasks, experimental in the specification).

A tool whose ``execution.taskSupport`` is ``"required"`` — or ``"optional"``, when
`McpServerConfig.task_calls` is ``"when_allowed"`` — on a server that declares
``tasks.requests.tools.call`` is called as a task:

1. ``tools/call`` with ``params.task`` answers at once with a ``CreateTaskResult``;
2. ``tasks/get`` is polled at the server's ``pollInterval``; a ``notifications/tasks/status``
   for the task ends a wait early (it carries the whole task, so no poll is needed);
3. on a terminal status, or on ``input_required`` (the server then sends its elicitation or
   sampling requests, which the client's hooks answer), ``tasks/result`` gives the
   ``CallToolResult``, which is handled like a plain call's.

The call's timeout covers all of it, whatever the server sends meanwhile (a flood of status
notifications included); on expiry, or when the caller is cancelled, the server is sent
``tasks/cancel`` in the background, and the caller does not wait for its answer. Progress
the server reports under the call's progress token reaches the call's progress callback for
the task's whole life.

Errors are raised as the SDK's (``MCPError``, ``pydantic.ValidationError``) so the caller
translates them exactly as for a plain call; a task the server cancelled is an `McpError`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

import mcp_types
import pydantic
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from ..errors import ErrorCode, McpError
from ._deadline import CallDeadline
from ._session import ProgressCallback, is_session_lost
from .config import McpServerConfig

__all__ = ["TaskCalls"]

log = logging.getLogger("toolweave.mcp")

_TERMINAL = frozenset({"completed", "failed", "cancelled"})
_DEFAULT_POLL = 1.0
_MIN_POLL = 0.05
_MAX_POLL = 30.0
_TTL_MARGIN_MS = 60_000
"""Asked-for task lifetime beyond the call's timeout, so the result is still there to fetch."""
_CANCEL_TIMEOUT = 5.0
_tokens = itertools.count(1)


class _Watch:
    """What the transport saw for one task call: status notifications and progress."""

    def __init__(self, progress: ProgressCallback | None) -> None:
        self.progress = progress
        self.task_id: str | None = None
        self.running = False
        """Whether the task may still be running (a cancellation would mean something)."""
        self.notified: mcp_types.Task | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.reports: set[asyncio.Task[None]] = set()

    def notify(self, task: mcp_types.Task) -> None:
        """A status notification for the task: it ends a wait in progress."""
        self.notified = task
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, seconds: float) -> mcp_types.Task | None:
        """Wait up to `seconds` for a status notification; the notified task, if any.

        The call's task awaits a bare future (no ``asyncio.wait_for``, whose inner task
        racing a cancellation on Python 3.11 can swallow the call's deadline)."""
        if self.notified is None:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            handle = loop.call_later(seconds, _release, waiter)
            try:
                await waiter
            finally:
                handle.cancel()
                self._waiter = None
        task, self.notified = self.notified, None
        return task


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class TaskCalls:
    """Task-augmented calls of one client: which tools get them (from the last listing),
    the calls themselves, and the notifications the transport sees for them."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self._support: dict[str, str] = {}
        self._listed = False
        self._server_accepts = False
        self._by_task: dict[str, _Watch] = {}
        self._by_token: dict[str, _Watch] = {}
        self._cancels: set[asyncio.Task[None]] = set()

    # which tools ----------------------------------------------------------------------------
    def record(self, tools: list[mcp_types.Tool], client: Client) -> None:
        """Remember the listed tools' ``taskSupport`` and whether the server takes tasks."""
        self._support = {
            t.name: t.execution.task_support
            for t in tools
            if t.execution is not None and t.execution.task_support in ("required", "optional")
        }
        self._server_accepts = _server_accepts_tasks(client)
        self._listed = True

    def unlisted(self, client: Client) -> bool:
        """Whether the tools must be listed before a call, to know which take tasks: the
        server takes tasks and its tools were never listed (a call by name)."""
        if self._listed or self.config.task_calls == "never":
            return False
        return _server_accepts_tasks(client)

    def unusable(self, tool: mcp_types.Tool) -> str | None:
        """Why a listed tool cannot be called at all (``None``: it can)."""
        if tool.execution is None or tool.execution.task_support != "required":
            return None
        if self.config.task_calls == "never":
            return "requires a task-augmented call, and task_calls is 'never'"
        if not self._server_accepts:
            return (
                "requires a task-augmented call, but the server does not declare "
                "tasks.requests.tools.call"
            )
        return None

    def wanted(self, name: str, client: Client) -> bool:
        """Whether a call of `name` is made as a task."""
        support = self._support.get(name)
        policy = self.config.task_calls
        if support is None or policy == "never":
            return False
        if support == "optional" and policy != "when_allowed":
            return False
        return _server_accepts_tasks(client)

    # the transport's view -------------------------------------------------------------------
    @property
    def watching(self) -> bool:
        """Whether a task call is in flight (only then are messages looked at)."""
        return bool(self._by_token or self._by_task)

    def seen(self, message: Any) -> None:
        """A message from the server: a task's status, or progress of a task call."""
        method = getattr(message, "method", None)
        params = getattr(message, "params", None)
        if not isinstance(params, dict):
            return
        if method == "notifications/tasks/status":
            watch = self._by_task.get(str(params.get("taskId")))
            if watch is None:
                return
            try:
                task = mcp_types.Task.model_validate(params)
            except pydantic.ValidationError:
                return
            watch.notify(task)
        elif method == "notifications/progress":
            token = params.get("progressToken")
            watch = self._by_token.get(token) if isinstance(token, str) else None
            progress = params.get("progress")
            if watch is None or watch.progress is None or not isinstance(progress, (int, float)):
                return
            total = params.get("total")
            message_text = params.get("message")
            report = asyncio.get_running_loop().create_task(
                _report(
                    watch.progress,
                    float(progress),
                    float(total) if isinstance(total, (int, float)) else None,
                    message_text if isinstance(message_text, str) else None,
                )
            )
            watch.reports.add(report)
            report.add_done_callback(watch.reports.discard)

    # the call -------------------------------------------------------------------------------
    async def call(
        self,
        client: Client,
        name: str,
        arguments: dict[str, Any],
        timeout: float | None,
        progress: ProgressCallback | None = None,
    ) -> mcp_types.CallToolResult:
        """Call `name` as a task and return its result; `timeout` covers the whole task.

        On expiry, or when the caller is cancelled, ``tasks/cancel`` is sent in the
        background (its answer is not waited for: the caller gets control back at once)."""
        watch = _Watch(progress)
        token = f"toolweave-task-{next(_tokens)}" if progress is not None else None
        if token is not None:
            self._by_token[token] = watch
        deadline = CallDeadline(timeout) if timeout is not None else None
        expired = False
        cause: BaseException | None = None
        try:
            try:
                result = await self._run(client, name, arguments, timeout, token, watch)
            finally:
                expired = deadline is not None and deadline.settle()
            if not expired:
                return result
        except MCPError as e:
            if not expired:
                if watch.task_id is not None and is_session_lost(e):
                    # The call ran (a task exists, or existed): it must not be sent again on
                    # a new session, as a plain call that never reached the server would be.
                    raise MCPError(
                        code=mcp_types.CONNECTION_CLOSED,
                        message=f"the server ended the session while task {watch.task_id} ran",
                    ) from e
                raise
            cause = e
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            if not expired:
                raise
            # Past the deadline whatever the call ended with (a cancellation swallowed
            # below, then an error): the deadline is the answer.
            cause = None if isinstance(e, asyncio.CancelledError) else e
        finally:
            if watch.running:  # timed out, the caller was cancelled, or polling failed
                await self._cancel_soon(client, watch)
            if token is not None:
                self._by_token.pop(token, None)
            if watch.task_id is not None:
                self._by_task.pop(watch.task_id, None)
        if watch.task_id is None:
            what = f"no task was created within {timeout or 0:g} s"
        else:
            what = f"the task did not finish within {timeout or 0:g} s; tasks/cancel was sent"
        raise MCPError(code=mcp_types.REQUEST_TIMEOUT, message=what) from cause

    async def _run(
        self,
        client: Client,
        name: str,
        arguments: dict[str, Any],
        timeout: float | None,
        token: str | None,
        watch: _Watch,
    ) -> mcp_types.CallToolResult:
        session = client.session
        created = await _create(client, name, arguments, timeout, token)
        if isinstance(created, mcp_types.CallToolResult):  # the server ran it as a plain call
            return await _checked(client, name, created)
        task: mcp_types.Task = created.task
        watch.task_id, watch.running = task.task_id, True
        self._by_task[task.task_id] = watch
        log.debug("%s: tool %r runs as task %s", self.config.describe(), name, task.task_id)
        while task.status not in _TERMINAL and task.status != "input_required":
            interval = task.poll_interval / 1000 if task.poll_interval else _DEFAULT_POLL
            notified = await watch.wait(min(max(interval, _MIN_POLL), _MAX_POLL))
            if notified is not None:  # the whole task, as tasks/get would give it
                task = notified
                continue
            got = await session.send_request(
                mcp_types.GetTaskRequest(
                    params=mcp_types.GetTaskRequestParams(task_id=task.task_id)
                ),
                mcp_types.GetTaskResult,
            )
            task = got
        watch.running = task.status not in _TERMINAL
        if task.status == "cancelled":
            raise McpError(
                f"{self.config.describe()}: tool {name!r} ran as task {task.task_id}, which the "
                f"server cancelled{_said(task)}",
                code=ErrorCode.MCP_EXECUTION_ERROR,
                tool_name=name,
                details={"task_id": task.task_id, "task_status": task.status},
            )
        # Terminal: the result (or the error) of the call; input_required: the server sends
        # its requests meanwhile, and the answer comes once the task ends.
        try:
            result = await session.send_request(
                mcp_types.GetTaskPayloadRequest(
                    params=mcp_types.GetTaskPayloadRequestParams(task_id=task.task_id)
                ),
                mcp_types.CallToolResult,
            )
        except MCPError as e:
            if task.status != "failed":
                raise
            raise MCPError(
                code=e.code, message=f"the task failed{_said(task)} ({e.message})"
            ) from e
        watch.running = False
        if task.status == "failed" and not result.is_error:  # failed is an error, said or not
            said = [mcp_types.TextContent(type="text", text=task.status_message or "failed")]
            result = result.model_copy(update={"is_error": True, "content": result.content or said})
        return await _checked(client, name, result)

    async def _cancel_soon(self, client: Client, watch: _Watch) -> None:
        """Send ``tasks/cancel`` for the watched task from a background job, bounded by
        `_CANCEL_TIMEOUT`, without waiting for its answer; `aclose` stops the jobs still
        waiting."""
        task_id, watch.running = watch.task_id, False
        if task_id is None:
            return
        job = asyncio.get_running_loop().create_task(self._cancel(client, task_id))
        self._cancels.add(job)
        job.add_done_callback(self._cancels.discard)
        # The two loop steps the SDK takes to hand a request to the transport (mcp 2.3.0:
        # a checkpoint, then the send), so the cancel goes out before whatever the caller
        # sends next. Never more: a wedged transport holds the job, not the caller.
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    async def _cancel(self, client: Client, task_id: str) -> None:
        try:
            async with asyncio.timeout(_CANCEL_TIMEOUT):  # the write too, not only the answer
                await client.session.send_request(
                    mcp_types.CancelTaskRequest(
                        params=mcp_types.CancelTaskRequestParams(task_id=task_id)
                    ),
                    mcp_types.CancelTaskResult,
                    request_read_timeout_seconds=_CANCEL_TIMEOUT,
                )
        except Exception as e:  # already ended, or the connection is gone: nothing to stop
            log.debug("%s: tasks/cancel %s: %s", self.config.describe(), task_id, e)

    async def aclose(self) -> None:
        """Stop the ``tasks/cancel`` requests still waiting for an answer (the client
        closes: nothing may outlive it)."""
        jobs = list(self._cancels)
        for job in jobs:
            job.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=_CANCEL_TIMEOUT)


def _server_accepts_tasks(client: Client) -> bool:
    tasks = client.server_capabilities.tasks
    return (
        tasks is not None
        and tasks.requests is not None
        and tasks.requests.tools is not None
        and tasks.requests.tools.call is not None
    )


async def _create(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    timeout: float | None,
    token: str | None,
) -> mcp_types.CreateTaskResult | mcp_types.CallToolResult:
    """Send the task-augmented ``tools/call``.

    The SDK (mcp 2.3.0) checks every ``tools/call`` answer against the 2025-11-25
    ``CallToolResult`` before its caller sees it, and has no call that returns a
    ``CreateTaskResult``; the answer it rejects is in the validation error, taken from there.
    """
    ttl = None if timeout is None else int(timeout * 1000) + _TTL_MARGIN_MS
    params = mcp_types.CallToolRequestParams(
        name=name, arguments=arguments, task=mcp_types.TaskMetadata(ttl=ttl)
    )
    if token is not None:
        params.meta = mcp_types.RequestParamsMeta(progress_token=token)
    request = mcp_types.CallToolRequest(params=params)
    try:
        return await client.session.send_request(request, mcp_types.CallToolResult)
    except pydantic.ValidationError as e:
        for error in e.errors():
            answer = error.get("input")
            if isinstance(answer, dict) and isinstance(answer.get("task"), dict):
                return mcp_types.CreateTaskResult.model_validate(answer)
        raise


async def _checked(
    client: Client, name: str, result: mcp_types.CallToolResult
) -> mcp_types.CallToolResult:
    """The output-schema check the SDK makes on a plain call's result (never on errors)."""
    if not result.is_error:
        await client.session.validate_tool_result(name, result)
    return result


def _said(task: mcp_types.Task) -> str:
    return f": {task.status_message}" if task.status_message else ""


async def _report(
    progress: ProgressCallback, done: float, total: float | None, message: str | None
) -> None:
    try:
        await progress(done, total, message)
    except Exception:
        log.exception("progress callback raised")
