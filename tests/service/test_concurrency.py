"""How the calls of a round share the machine: no default cap on async calls (issue #18 W5),
opt-in bounds per tool and per service, and methods of one object one at a time in request
order (issue #22 item 10)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import pytest

from toolweave import AiMessage, ScriptedChatModel, ToolCard, ToolService, tool, tools_from
from toolweave._utils.limit import Limit

from .helpers import MODES, ai_calls, call, run

HANG_GUARD = 10.0


class Gauge:
    """Counts calls in flight (from any thread) and remembers the peak."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.order: list[Any] = []

    def enter(self, tag: Any = None) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.order.append(tag)

    def leave(self) -> None:
        with self.lock:
            self.active -= 1


def fan_out(name: str, n: int) -> ScriptedChatModel:
    calls = [call(name, f'{{"i": {i}}}', id=f"c{i}") for i in range(n)]
    return ScriptedChatModel([ai_calls(*calls), AiMessage("done")])


@pytest.mark.parametrize("mode", MODES)
def test_all_async_calls_of_a_round_are_in_flight_together_by_default(mode: str) -> None:
    n = 50
    gauge = Gauge()
    everyone: dict[str, asyncio.Event] = {}

    @tool
    async def wait(i: int) -> int:
        """Wait until all calls of the round are running."""
        gauge.enter()
        event = everyone.setdefault("e", asyncio.Event())
        if gauge.active == n:
            event.set()
        try:
            # with a cap below n this never happens: the guard turns the hang into a failure
            await asyncio.wait_for(event.wait(), HANG_GUARD)
        finally:
            gauge.leave()
        return i

    result = run(mode, ToolService().tools(wait), fan_out("wait", n))
    assert gauge.peak == n
    assert [e.result.text for e in result.tool_executions] == [str(i) for i in range(n)]


@pytest.mark.parametrize("mode", MODES)
def test_card_max_concurrency_bounds_one_tool(mode: str) -> None:
    gauge = Gauge()

    @tool(max_concurrency=2)
    async def limited(i: int) -> int:
        """A rate-limited API."""
        gauge.enter()
        await asyncio.sleep(0.02)
        gauge.leave()
        return i

    other = Gauge()
    all_in: list[asyncio.Event] = []

    @tool
    async def free(i: int) -> int:
        """Unbounded."""
        other.enter()
        if not all_in:
            all_in.append(asyncio.Event())
        if other.active == 6:
            all_in[0].set()
        # wait for the other five (not a fixed sleep: in an eager stream the calls start as
        # the stream arrives, which may take longer than any sleep on a loaded machine);
        # calls that could not all run at once time out here and the peak shows it
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_in[0].wait(), 10)
        other.leave()
        return i

    calls = [call("limited", f'{{"i": {i}}}', id=f"l{i}") for i in range(6)]
    calls += [call("free", f'{{"i": {i}}}', id=f"f{i}") for i in range(6)]
    model = ScriptedChatModel([ai_calls(*calls), AiMessage("done")])
    result = run(mode, ToolService().tools(limited, free), model)
    assert gauge.peak == 2
    assert other.peak == 6
    assert [e.request.id for e in result.tool_executions] == [c.id for c in calls]


def test_registration_max_concurrency_holds_across_conversations() -> None:
    gauge = Gauge()

    @tool
    async def api(i: int) -> int:
        """A rate-limited API."""
        gauge.enter()
        await asyncio.sleep(0.02)
        gauge.leave()
        return i

    service = ToolService().tools(api, max_concurrency=3)

    async def main() -> None:
        await asyncio.gather(*(service.achat(fan_out("api", 4), None, "go") for _ in range(3)))

    asyncio.run(main())
    assert gauge.peak == 3


def test_service_max_concurrency_is_shared_by_sync_conversations_in_threads() -> None:
    gauge = Gauge()

    @tool
    async def api(i: int) -> int:
        """Some API."""
        gauge.enter()
        await asyncio.sleep(0.02)
        gauge.leave()
        return i

    service = ToolService(max_concurrency=2).tools(api)
    # each thread's chat runs its own event loop: the bound is shared by all of them
    threads = [
        threading.Thread(target=service.chat, args=(fan_out("api", 4), None, "go"))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD)
    assert gauge.peak == 2


def test_max_concurrency_is_validated() -> None:
    @tool
    def f(x: int) -> int:
        """F."""
        return x

    with pytest.raises(ValueError):
        ToolService(max_concurrency=0)
    with pytest.raises(ValueError):
        ToolService().tools(f, max_concurrency=0)
    with pytest.raises(Exception, match="max_concurrency"):
        ToolCard(name="x", max_concurrency=0)


class Watchlist:
    """A store whose methods are not safe to run at once (read, then write)."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.gauge = Gauge()

    @tool
    def add_to_watchlist(self, item: str) -> list[str]:
        """Add an item and return the list."""
        self.gauge.enter(item)
        try:
            current = list(self.items)
            time.sleep(0.01)  # a slow store: a concurrent call would interleave here
            self.items = [*current, item]
            return list(self.items)
        finally:
            self.gauge.leave()

    @tool
    async def count_watchlist(self, tag: str) -> int:
        """How many items there are."""
        self.gauge.enter(tag)
        try:
            await asyncio.sleep(0.005)
            return len(self.items)
        finally:
            self.gauge.leave()


@pytest.mark.parametrize("mode", MODES)
def test_methods_of_one_object_run_one_at_a_time_in_request_order(mode: str) -> None:
    store = Watchlist()
    other = Watchlist()
    calls = [
        call("add_to_watchlist", '{"item": "a"}', id="1"),
        call("count_watchlist", '{"tag": "n1"}', id="2"),
        call("add_to_watchlist", '{"item": "b"}', id="3"),
        call("add_to_watchlist", '{"item": "c"}', id="4"),
        call("count_watchlist", '{"tag": "n2"}', id="5"),
    ]
    model = ScriptedChatModel([ai_calls(*calls), AiMessage("done")])
    result = run(mode, ToolService().tools(store), model)
    assert store.gauge.peak == 1
    assert store.gauge.order == ["a", "n1", "b", "c", "n2"]
    texts = [e.result.text for e in result.tool_executions]
    assert texts == ['["a"]', "1", '["a","b"]', '["a","b","c"]', "3"]
    assert store.items == ["a", "b", "c"] and other.items == []


class Waiter:
    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier

    def take(self, item: str) -> str:
        """Wait for the others."""
        self.barrier.wait()  # returns only when all three calls are running at once
        return item


@pytest.mark.parametrize("mode", MODES)
def test_tools_of_different_objects_and_functions_still_overlap(mode: str) -> None:
    all_three = threading.Barrier(3, timeout=HANG_GUARD)

    @tool
    def independent(x: int) -> int:
        """A plain function."""
        all_three.wait()
        return x

    service = ToolService().tools(
        independent,
        tool(name="first_take")(Waiter(all_three).take),
        tool(name="second_take")(Waiter(all_three).take),
    )
    calls = [
        call("first_take", '{"item": "a"}', id="1"),
        call("second_take", '{"item": "b"}', id="2"),
        call("independent", '{"x": 1}', id="3"),
    ]
    model = ScriptedChatModel([ai_calls(*calls), AiMessage("done")])
    result = run(mode, service, model)
    assert [e.result.text for e in result.tool_executions] == ["a", "b", "1"]


class Reader:
    def __init__(self) -> None:
        self.gauge = Gauge()
        self.barrier = threading.Barrier(2, timeout=HANG_GUARD)

    @tool(parallel_safe=True)
    def read_a(self, key: str) -> str:
        """Declared safe to run in parallel."""
        self.barrier.wait()
        return key

    @tool(parallel_safe=True)
    def read_b(self, key: str) -> str:
        """Declared safe to run in parallel."""
        self.barrier.wait()
        return key


class PlainReader:
    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=HANG_GUARD)

    @tool
    def read_a(self, key: str) -> str:
        """Safe when the registration says so."""
        self.barrier.wait()
        return key

    @tool
    def read_b(self, key: str) -> str:
        """Safe when the registration says so."""
        self.barrier.wait()
        return key


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["card", "registration"])
def test_explicit_parallel_safe_lets_methods_of_one_object_overlap(mode: str, how: str) -> None:
    calls = [call("read_a", '{"key": "a"}', id="1"), call("read_b", '{"key": "b"}', id="2")]
    model = ScriptedChatModel([ai_calls(*calls), AiMessage("done")])
    if how == "card":
        service = ToolService().tools(Reader())
    else:
        service = ToolService().tools(PlainReader(), parallel_safe=True)
    result = run(mode, service, model)
    # both calls wait for each other at a barrier: they ran at the same time
    assert [e.result.text for e in result.tool_executions] == ["a", "b"]
    assert not any(e.result.is_error for e in result.tool_executions)


def test_bound_method_executors_of_one_object_are_serialised() -> None:
    store = Watchlist()

    def add(request: Any, memory_id: Any) -> str:
        return "unused"

    class Client:
        def __init__(self) -> None:
            self.gauge = Gauge()

        def call(self, request: Any, memory_id: Any) -> str:
            self.gauge.enter(request.id)
            time.sleep(0.01)
            self.gauge.leave()
            return request.id

    client = Client()
    service = ToolService().tool("one", client.call).tool("two", client.call)
    calls = [call("one", id="1"), call("two", id="2"), call("one", id="3")]
    model = ScriptedChatModel([ai_calls(*calls), AiMessage("done")])
    asyncio.run(service.achat(model, None, "go"))
    assert client.gauge.peak == 1 and client.gauge.order == ["1", "2", "3"]
    assert store.items == []
    assert tools_from(store)  # the store's own tools are unaffected


def test_limit_serves_waiters_in_order_and_survives_cancellation() -> None:
    limit = Limit(1)
    order: list[int] = []

    async def main() -> None:
        await limit.acquire()
        waiters = [asyncio.create_task(_take(limit, i, order)) for i in range(4)]
        await asyncio.sleep(0.01)
        waiters[1].cancel()  # a waiter that gives up does not keep the slot
        limit.release()
        await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), HANG_GUARD)

    asyncio.run(main())
    assert order == [0, 2, 3]


async def _take(limit: Limit, i: int, order: list[int]) -> None:
    async with limit:
        order.append(i)
        await asyncio.sleep(0)
