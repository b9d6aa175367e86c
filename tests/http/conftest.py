"""Fixtures for HTTP tool tests: loopback servers and a tool factory that closes its tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from servers.http_app import make_app, serve
from servers.http_petstore import make_petstore_app
from toolweave.callbacks.framework import CallbackFramework
from toolweave.http import RestfulApi, RestfulApiCard


@pytest.fixture(scope="session")
def http_server() -> Iterator[tuple[str, Any]]:
    """(base_url, app) of the main test app on 127.0.0.1."""
    app = make_app()
    with serve(app) as url:
        yield url, app


@pytest.fixture
def base(http_server: tuple[str, Any]) -> str:
    """Base URL of the main test app; its request log is cleared for each test."""
    http_server[1].state.log.clear()
    return http_server[0]


@pytest.fixture
def server_log(http_server: tuple[str, Any]) -> list[tuple[str, str]]:
    """Requests the main test app received during this test."""
    log: list[tuple[str, str]] = http_server[1].state.log
    return log


@pytest.fixture(scope="session")
def petstore_server() -> Iterator[str]:
    """Base URL of the Petstore app."""
    with serve(make_petstore_app()) as url:
        yield url


@pytest.fixture
def callbacks() -> CallbackFramework:
    """A private callback framework, so tests never touch the global one."""
    return CallbackFramework()


MakeTool = Callable[..., RestfulApi]


@pytest.fixture
async def make_tool(base: str, callbacks: CallbackFramework) -> AsyncIterator[MakeTool]:
    """Build a `RestfulApi` for `base + path`; loopback allowed unless the test says not."""
    made: list[RestfulApi] = []

    def factory(
        path: str,
        *,
        properties: dict[str, Any] | None = None,
        required: list[str] | None = None,
        resolver: Any = None,
        auth: Any = None,
        **card: Any,
    ) -> RestfulApi:
        card.setdefault("name", "api")
        card.setdefault("allow_private_network", True)
        url = path if path.startswith("http") else base + path
        schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
        if required:
            schema["required"] = required
        tool = RestfulApi(
            RestfulApiCard(url=url, input_params=schema, **card),
            callbacks=callbacks,
            resolver=resolver,
            auth=auth,
        )
        made.append(tool)
        return tool

    yield factory
    for tool in made:
        await tool.aclose()
