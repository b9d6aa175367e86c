"""RestfulApi against a real Starlette app on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from servers.http_app import serve_raw
from toolweave.callbacks.events import ToolCallEvents as E
from toolweave.callbacks.framework import CallbackFramework
from toolweave.errors import AbortError, ErrorCode, RestfulApiError, ToolCardError
from toolweave.execution import DefaultToolExecutor
from toolweave.execution.requests import ToolExecutionRequest
from toolweave.http import (
    RestfulApi,
    RestfulApiCard,
    RestfulApiResponseError,
    RestfulApiTimeoutError,
)

MakeTool = Callable[..., RestfulApi]

ALL_LOCATIONS = {
    "id": {"type": "string", "location": "path"},
    "q": {"type": "string", "location": "query"},
    "tags": {"type": "array", "items": {"type": "string"}, "location": "query"},
    "X-Trace": {"type": "string", "location": "header"},
    "name": {"type": "string"},
    "count": {"type": "integer", "location": "BODY"},
}


def _query(result: dict[str, Any]) -> list[list[str]]:
    query: list[list[str]] = result["data"]["query"]
    return query


# card validation -------------------------------------------------------------------------
class TestCard:
    def test_defaults(self) -> None:
        card = RestfulApiCard(name="c", url="https://api.example.com/x")
        assert card.method == "POST"
        assert card.timeout == 60.0
        assert card.max_response_byte_size == 10 * 1024 * 1024
        assert card.allow_private_network is False

    def test_method_is_normalised(self) -> None:
        assert RestfulApiCard(name="c", url="https://a.example/x", method="get").method == "GET"

    @pytest.mark.parametrize("method", ["FETCH", "TRACE", "", "CONNECT"])
    def test_unknown_method_rejected(self, method: str) -> None:
        with pytest.raises(ToolCardError) as info:
            RestfulApiCard(name="c", url="https://a.example/x", method=method)
        assert info.value.code == ErrorCode.RESTFUL_API_CARD_CONFIG_INVALID

    def test_unknown_location_rejected(self) -> None:
        with pytest.raises(ToolCardError) as info:
            RestfulApiCard(
                name="c",
                url="https://a.example/x",
                input_params={
                    "type": "object",
                    "properties": {"a": {"type": "string", "location": "cookie"}},
                },
            )
        assert info.value.code == 182100
        assert "cookie" in info.value.message

    def test_placeholder_needs_path_property(self) -> None:
        with pytest.raises(ToolCardError) as info:
            RestfulApiCard(
                name="c",
                url="https://a.example/items/{id}",
                input_params={"type": "object", "properties": {"id": {"type": "string"}}},
            )
        assert info.value.code == 182100
        assert "{id}" in info.value.message

    def test_placeholder_without_any_properties(self) -> None:
        with pytest.raises(ToolCardError) as info:
            RestfulApiCard(name="c", url="https://a.example/items/{id}")
        assert info.value.code == 182100

    def test_placeholder_with_default_in_paths_is_fine(self) -> None:
        card = RestfulApiCard(
            name="c",
            url="https://a.example/v/{version}/x",
            paths={"version": "2"},
            input_params={"type": "object", "properties": {"a": {"type": "string"}}},
        )
        assert card.paths == {"version": "2"}

    @pytest.mark.parametrize(
        "url", ["ftp://a.example/x", "file:///etc/passwd", "a.example/x", "http:///nohost"]
    )
    def test_bad_url_rejected(self, url: str) -> None:
        with pytest.raises(ToolCardError) as info:
            RestfulApiCard(name="c", url=url)
        assert info.value.code == 182100

    def test_bad_name_keeps_its_code(self) -> None:
        with pytest.raises(ToolCardError) as info:
            RestfulApiCard(name="bad name", url="https://a.example/x")
        assert info.value.code == ErrorCode.TOOL_CARD_INVALID

    def test_restful_api_needs_restful_card(self) -> None:
        from toolweave.tools import ToolCard

        with pytest.raises(ToolCardError):
            RestfulApi(ToolCard(name="x"))  # type: ignore[arg-type]

    def test_locations(self) -> None:
        card = RestfulApiCard(
            name="c",
            url="https://a.example/{id}",
            input_params={"type": "object", "properties": ALL_LOCATIONS},
        )
        assert {k: v.value for k, v in card.locations().items()} == {
            "id": "path",
            "q": "query",
            "tags": "query",
            "X-Trace": "header",
            "name": "body",
            "count": "body",
        }


# locations and methods ---------------------------------------------------------------------
async def test_every_location(make_tool: MakeTool) -> None:
    tool = make_tool("/echo/items/{id}", properties=ALL_LOCATIONS, method="POST")
    result = await tool.ainvoke(
        {"id": "a b/c", "q": "x&y", "tags": ["t1", "t2"], "X-Trace": "tr", "name": "n", "count": 2}
    )
    data = result["data"]
    assert result["code"] == 200
    assert result["message"] == "success"
    assert data["raw_path"] == "/echo/items/a%20b%2Fc"
    assert data["query"] == [["q", "x&y"], ["tags", "t1"], ["tags", "t2"]]
    assert data["headers"]["x-trace"] == "tr"
    assert data["json"] == {"name": "n", "count": 2}
    assert result["headers"]["x-echo"] == "yes"


async def test_form_location(make_tool: MakeTool) -> None:
    tool = make_tool(
        "/echo/form",
        properties={
            "user": {"type": "string", "location": "form"},
            "roles": {"type": "array", "items": {"type": "string"}, "location": "form"},
            "extra": {"type": "integer"},
        },
        headers={"Content-Type": "application/json"},
    )
    data = (await tool.ainvoke({"user": "ann", "roles": ["a", "b"], "extra": 5}))["data"]
    assert data["headers"]["content-type"].startswith("application/x-www-form-urlencoded")
    assert data["form"] == [["extra", "5"], ["user", "ann"], ["roles", "a"], ["roles", "b"]]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
async def test_methods_with_body(make_tool: MakeTool, method: str) -> None:
    tool = make_tool(
        "/echo/m/{id}",
        method=method,
        properties={"id": {"type": "integer", "location": "path"}, "v": {"type": "string"}},
    )
    data = (await tool.ainvoke({"id": 7, "v": "x"}))["data"]
    assert data["method"] == method
    assert data["path"] == "/echo/m/7"
    assert data["json"] == {"v": "x"}
    assert data["query"] == []


@pytest.mark.parametrize("method", ["GET", "DELETE", "OPTIONS"])
async def test_bodyless_methods_move_body_to_query(make_tool: MakeTool, method: str) -> None:
    tool = make_tool(
        "/echo/m",
        method=method,
        properties={"v": {"type": "string"}, "n": {"type": "array", "items": {"type": "integer"}}},
    )
    data = (await tool.ainvoke({"v": "x", "n": [1, 2]}))["data"]
    assert data["method"] == method
    assert data["query"] == [["v", "x"], ["n", "1"], ["n", "2"]]
    assert data["body"] == ""


async def test_head(make_tool: MakeTool) -> None:
    tool = make_tool("/echo/h", method="HEAD", properties={"v": {"type": "string"}})
    result = await tool.ainvoke({"v": "x"})
    assert result["code"] == 200
    assert result["headers"]["x-echo"] == "head"
    assert result["data"] == ""
    assert result["url"].endswith("/echo/h?v=x")


async def test_defaults_merge(make_tool: MakeTool) -> None:
    tool = make_tool(
        "/echo/d/{id}",
        method="GET",
        properties={
            "id": {"type": "string", "location": "path"},
            "page": {"type": "string", "location": "query"},
            "X-Mode": {"type": "string", "location": "header"},
        },
        paths={"id": "default-id"},
        queries={"page": "1", "fixed": "f"},
        headers={"X-Mode": "default", "X-Static": "s"},
    )
    data = (
        await tool.ainvoke({"id": None, "page": "", "X-Mode": None}, skip_inputs_validate=True)
    )["data"]
    assert data["path"] == "/echo/d/default-id"
    assert data["query"] == [["page", "1"], ["fixed", "f"]]
    assert data["headers"]["x-mode"] == "default"
    assert data["headers"]["x-static"] == "s"
    data = (await tool.ainvoke({"id": "mine", "page": "3", "X-Mode": "fast"}))["data"]
    assert data["path"] == "/echo/d/mine"
    assert data["query"] == [["page", "3"], ["fixed", "f"]]
    assert data["headers"]["x-mode"] == "fast"


async def test_defaults_filled_after_validation(make_tool: MakeTool) -> None:
    # a null default means "absent"; a default outside its own enum is still the default
    tool = make_tool(
        "/echo/defaults",
        method="GET",
        properties={
            "q": {"type": "string", "location": "query"},
            "note": {"type": "string", "location": "query", "default": None},
            "unit": {"type": "string", "enum": ["c", "f"], "location": "query", "default": "k"},
        },
    )
    request = ToolExecutionRequest(name="api", arguments='{"q": "x"}')
    data = (await DefaultToolExecutor(tool).aexecute_with_result(request)).result["data"]
    assert data["query"] == [["q", "x"], ["unit", "k"]]


async def test_scalar_rendering(make_tool: MakeTool) -> None:
    tool = make_tool(
        "/echo/s",
        method="GET",
        properties={
            "flag": {"type": "boolean", "location": "query"},
            "obj": {"type": "object", "location": "query"},
            "X-Num": {"type": "number", "location": "header"},
        },
    )
    data = (await tool.ainvoke({"flag": True, "obj": {"a": 1}, "X-Num": 1.5}))["data"]
    assert data["query"] == [["flag", "true"], ["obj", '{"a":1}']]
    assert data["headers"]["x-num"] == "1.5"


async def test_model_json_string_arguments(make_tool: MakeTool) -> None:
    tool = make_tool("/echo/j", properties={"n": {"type": "integer"}})
    data = (await tool.ainvoke('{"n": "4"}'))["data"]
    assert data["json"] == {"n": 4}


def test_sync_invoke(make_tool: MakeTool) -> None:
    tool = make_tool("/echo/sync/{id}", properties={"id": {"type": "string", "location": "path"}})
    try:
        result = tool.invoke({"id": "s1"})
        assert result["data"]["path"] == "/echo/sync/s1"
        # connection reuse: a second call on the same client works too
        assert tool.invoke({"id": "s2"})["data"]["path"] == "/echo/sync/s2"
    finally:
        tool.close()


# responses --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("json", {"ok": True, "n": 1}),
        ("json-charset", {"name": "café"}),
        ("problem", {"title": "nope"}),
        ("vnd", {"data": [1, 2]}),
        ("text", "hello text"),
        ("latin1", "café"),
        ("html", "<html><body><h1>Hi</h1></body></html>"),
        ("xml", "<?xml version='1.0'?><root><a>1</a></root>"),
        ("atom", "<feed/>"),
        ("empty-json", {}),
        ("empty-text", ""),
        ("no-type", "untyped body"),
    ],
)
async def test_content_types(make_tool: MakeTool, kind: str, expected: Any) -> None:
    result = await make_tool(f"/typed/{kind}", method="GET").ainvoke({})
    assert result["data"] == expected
    assert result["headers"]["x-custom"] == "custom-value"
    assert set(result) == {"code", "data", "url", "headers", "reason", "message"}


async def test_invalid_json_is_182105(make_tool: MakeTool) -> None:
    with pytest.raises(RestfulApiError) as info:
        await make_tool("/typed/bad-json", method="GET").ainvoke({})
    assert info.value.code == ErrorCode.RESTFUL_API_RESPONSE_PROCESS_ERROR


async def test_binary_is_182105(make_tool: MakeTool) -> None:
    with pytest.raises(RestfulApiError) as info:
        await make_tool("/typed/binary", method="GET").ainvoke({})
    assert info.value.code == 182105


# limits and errors ----------------------------------------------------------------------
async def test_size_limit_streamed(make_tool: MakeTool) -> None:
    tool = make_tool("/big?size=200000&chunk=1000", method="GET", max_response_byte_size=50_000)
    with pytest.raises(RestfulApiError) as info:
        await tool.ainvoke({})
    assert info.value.code == ErrorCode.RESTFUL_API_RESPONSE_SIZE_EXCEED_LIMIT
    # the same tool still works for a small body
    ok = await make_tool("/big?size=100", method="GET", max_response_byte_size=50_000).ainvoke({})
    assert ok["data"] == "a" * 100


async def test_size_limit_declared_length(make_tool: MakeTool) -> None:
    tool = make_tool("/big-declared?size=5000", method="GET", max_response_byte_size=1000)
    with pytest.raises(RestfulApiError) as info:
        await tool.ainvoke({})
    assert info.value.code == 182102


async def test_size_limit_per_call(make_tool: MakeTool) -> None:
    tool = make_tool("/big?size=3000", method="GET")
    with pytest.raises(RestfulApiError) as info:
        await tool.ainvoke({}, max_response_byte_size=100)
    assert info.value.code == 182102


def test_size_limit_sync(make_tool: MakeTool) -> None:
    tool = make_tool("/big?size=100000", method="GET", max_response_byte_size=10_000)
    try:
        with pytest.raises(RestfulApiError) as info:
            tool.invoke({})
        assert info.value.code == 182102
    finally:
        tool.close()


async def test_timeout(make_tool: MakeTool) -> None:
    tool = make_tool("/slow?delay=3", method="GET", timeout=0.2)
    with pytest.raises(RestfulApiTimeoutError) as info:
        await tool.ainvoke({})
    assert info.value.code == ErrorCode.RESTFUL_API_EXECUTION_TIMEOUT
    assert isinstance(info.value, TimeoutError)


async def test_timeout_per_call(make_tool: MakeTool) -> None:
    tool = make_tool("/slow?delay=3", method="GET")
    with pytest.raises(RestfulApiError) as info:
        await tool.ainvoke({}, timeout=0.2)
    assert info.value.code == 182101


async def test_trickle_hits_total_deadline(make_tool: MakeTool) -> None:
    # one byte every 0.1 s never trips a per-read timeout; the total deadline still fires
    tool = make_tool("/trickle?count=40&gap=0.1", method="GET", timeout=0.5)
    with pytest.raises(RestfulApiError) as info:
        await tool.ainvoke({})
    assert info.value.code == 182101


def test_timeout_sync(make_tool: MakeTool) -> None:
    tool = make_tool("/slow?delay=3", method="GET", timeout=0.2)
    try:
        with pytest.raises(RestfulApiError) as info:
            tool.invoke({})
        assert info.value.code == 182101
    finally:
        tool.close()


def test_trickle_sync_hits_total_deadline(make_tool: MakeTool) -> None:
    tool = make_tool("/trickle?count=40&gap=0.1", method="GET", timeout=0.5)
    try:
        with pytest.raises(RestfulApiError) as info:
            tool.invoke({})
        assert info.value.code == 182101
    finally:
        tool.close()


@pytest.mark.parametrize("status", [400, 401, 404, 422, 500, 502, 503])
async def test_http_errors(make_tool: MakeTool, status: int) -> None:
    with pytest.raises(RestfulApiResponseError) as info:
        await make_tool(f"/status/{status}", method="GET").ainvoke({})
    err = info.value
    assert err.code == ErrorCode.RESTFUL_API_RESPONSE_ERROR
    assert err.status == status
    assert err.body == f"error body {status}"
    assert str(status) in err.message and f"error body {status}" in err.message


async def test_http_error_returned_when_not_raising(make_tool: MakeTool) -> None:
    result = await make_tool("/status/404", method="GET").ainvoke({}, raise_for_status=False)
    assert result["code"] == 404
    assert result["message"] == "Not Found"
    assert result["data"] == "error body 404"


async def test_redirect_is_returned_not_followed(
    make_tool: MakeTool, server_log: list[Any]
) -> None:
    result = await make_tool("/redirect?to=/typed/json", method="GET").ainvoke({})
    assert result["code"] == 302
    assert result["headers"]["location"] == "/typed/json"
    assert result["message"] == "Found"
    assert server_log == [("GET", "/redirect")]


async def test_redirect_to_private_address_is_not_followed(
    make_tool: MakeTool, server_log: list[Any]
) -> None:
    # even a card allowed to reach loopback never follows a 3xx into the metadata service
    tool = make_tool("/redirect?to=http://169.254.169.254/latest/meta-data/", method="GET")
    result = await tool.ainvoke({})
    assert result["code"] == 302
    assert result["headers"]["location"] == "http://169.254.169.254/latest/meta-data/"
    assert server_log == [("GET", "/redirect")]


async def test_connection_refused_is_182104(make_tool: MakeTool) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(RestfulApiError) as info:
        await make_tool(f"http://127.0.0.1:{port}/x", method="GET").ainvoke({})
    assert info.value.code == ErrorCode.RESTFUL_API_EXECUTION_ERROR


@pytest.mark.parametrize(
    "reply",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
        b"HTTP/1.1 abc Weird\r\n\r\n",
        b"",
    ],
)
async def test_malformed_responses_are_182104(make_tool: MakeTool, reply: bytes) -> None:
    with serve_raw(reply) as url, pytest.raises(RestfulApiError) as info:
        await make_tool(url + "/x", method="GET").ainvoke({})
    assert info.value.code == ErrorCode.RESTFUL_API_EXECUTION_ERROR


async def test_html_body_announced_as_json(make_tool: MakeTool) -> None:
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n"
        b"Connection: close\r\n\r\n<html/>!!"
    )
    with serve_raw(reply) as url, pytest.raises(RestfulApiError) as info:
        await make_tool(url + "/x", method="GET").ainvoke({})
    assert info.value.code == 182105


async def test_missing_path_value(make_tool: MakeTool) -> None:
    from toolweave.errors import ToolArgumentsError

    tool = make_tool("/echo/{id}", properties={"id": {"type": "string", "location": "path"}})
    with pytest.raises(ToolArgumentsError):
        await tool.ainvoke({})


def test_stream_not_supported(make_tool: MakeTool) -> None:
    from toolweave.errors import ToolNotSupportedError

    with pytest.raises(ToolNotSupportedError) as info:
        make_tool("/echo/x").stream({})
    assert info.value.code == ErrorCode.TOOL_STREAM_NOT_SUPPORTED


# tool_auth ---------------------------------------------------------------------------------
async def test_tool_auth_adds_headers_and_query(
    make_tool: MakeTool, callbacks: CallbackFramework
) -> None:
    seen: list[dict[str, Any]] = []

    def auth(tool_name: str, card: RestfulApiCard, url: str, method: str) -> dict[str, Any]:
        seen.append({"tool_name": tool_name, "card": card, "url": url, "method": method})
        return {"headers": {"X-Api-Key": "secret"}, "query": {"token": "t0k"}}

    callbacks.register(E.TOOL_AUTH, auth)
    tool = make_tool("/secured", method="GET", name="secured_api")
    result = await tool.ainvoke({})
    assert result["data"]["authorized"] is True
    assert seen[0]["tool_name"] == "secured_api"
    assert seen[0]["card"] is tool.card
    assert seen[0]["method"] == "GET"
    # the credential added to the query never reaches the model through the result URL
    assert "t0k" not in result["url"]
    assert "token=%2A%2A%2A" in result["url"] or "token=***" in result["url"]


async def test_tool_auth_async_callback(make_tool: MakeTool, callbacks: CallbackFramework) -> None:
    async def auth(**kwargs: Any) -> dict[str, Any]:
        assert kwargs["tool_type"] == "restful_api"
        return {"headers": {"X-Api-Key": "secret"}, "params": {"token": "t0k"}}

    callbacks.register(E.TOOL_AUTH, auth)
    assert (await make_tool("/secured", method="GET").ainvoke({}))["code"] == 200


def test_tool_auth_sync_invoke(make_tool: MakeTool, callbacks: CallbackFramework) -> None:
    callbacks.register(
        E.TOOL_AUTH, lambda: {"headers": {"X-Api-Key": "secret"}, "query": {"token": "t0k"}}
    )
    tool = make_tool("/secured", method="GET")
    try:
        assert tool.invoke({})["data"]["authorized"] is True
    finally:
        tool.close()


async def test_without_auth_is_401(make_tool: MakeTool) -> None:
    with pytest.raises(RestfulApiResponseError) as info:
        await make_tool("/secured", method="GET").ainvoke({})
    assert info.value.status == 401


async def test_tool_auth_abort_vetoes(
    make_tool: MakeTool, callbacks: CallbackFramework, server_log: list[Any]
) -> None:
    def veto() -> None:
        raise AbortError("no credentials for this tool")

    callbacks.register(E.TOOL_AUTH, veto)
    with pytest.raises(AbortError):
        await make_tool("/secured", method="GET").ainvoke({})
    assert server_log == []


async def test_tool_auth_tls_settings_pick_a_client(
    make_tool: MakeTool, callbacks: CallbackFramework
) -> None:
    callbacks.register(
        E.TOOL_AUTH,
        lambda: {"verify": False, "headers": {"X-Api-Key": "secret"}, "query": {"token": "t0k"}},
    )
    tool = make_tool("/secured", method="GET")
    assert (await tool.ainvoke({}))["code"] == 200


async def test_static_auth(make_tool: MakeTool) -> None:
    tool = make_tool(
        "/secured",
        method="GET",
        auth={"headers": {"X-Api-Key": "secret"}, "query": {"token": "t0k"}},
    )
    assert (await tool.ainvoke({}))["data"]["authorized"] is True


async def test_broken_auth_callback_is_logged_not_fatal(
    make_tool: MakeTool, callbacks: CallbackFramework
) -> None:
    def broken() -> None:
        raise RuntimeError("observer bug")

    callbacks.register(E.TOOL_AUTH, broken)
    with pytest.raises(RestfulApiResponseError):
        await make_tool("/secured", method="GET").ainvoke({})


# executor ----------------------------------------------------------------------------------
async def test_through_default_executor(make_tool: MakeTool) -> None:
    tool = make_tool(
        "/echo/exec/{id}",
        properties={"id": {"type": "integer", "location": "path"}, "v": {"type": "string"}},
        required=["id"],
    )
    executor = DefaultToolExecutor(tool)
    result = await executor.aexecute_with_result(
        ToolExecutionRequest(id="c1", name=tool.name, arguments='{"id": 3, "v": "hi"}')
    )
    assert not result.is_error
    assert result.result["data"]["path"] == "/echo/exec/3"
    assert '"path": "/echo/exec/3"' in result.text or '"path":"/echo/exec/3"' in result.text


async def test_executor_error_result(make_tool: MakeTool) -> None:
    tool = make_tool("/status/500", method="GET")
    result = await DefaultToolExecutor(tool).aexecute_with_result(
        ToolExecutionRequest(id="c2", name=tool.name, arguments="{}")
    )
    assert result.is_error
    assert "HTTP 500" in result.text and "error body 500" in result.text


async def test_executor_timeout_result(make_tool: MakeTool) -> None:
    tool = make_tool("/slow?delay=3", method="GET", timeout=0.2)
    result = await DefaultToolExecutor(tool).aexecute_with_result(
        ToolExecutionRequest(id="c3", name=tool.name, arguments="{}")
    )
    assert result.is_error
    assert "0.2" in result.text


def test_through_sync_executor(make_tool: MakeTool) -> None:
    tool = make_tool(
        "/echo/sync-exec/{id}", properties={"id": {"type": "integer", "location": "path"}}
    )
    try:
        text = DefaultToolExecutor(tool).execute(
            ToolExecutionRequest(id="c4", name=tool.name, arguments='{"id": 9}')
        )
        assert "/echo/sync-exec/9" in text
    finally:
        tool.close()


async def test_httpx2_log_line_masks_query_credentials(
    make_tool: MakeTool, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx2 logs every request's URL at INFO, as sent: auth query values are masked there,
    raw and percent-encoded (base64-like keys contain `+`, `/` and `=`)."""
    import logging

    caplog.set_level(logging.INFO, logger="httpx2")
    key = "k3y+with/odd=chars"
    tool = make_tool("/echo/logged", method="GET", auth={"query": {"api_key": key}})
    assert (await tool.ainvoke({}))["code"] == 200
    [line] = [r.getMessage() for r in caplog.records if r.name == "httpx2"]
    assert "api_key=***" in line
    assert "k3y" not in line and "odd" not in line
