"""`launch()` without a reachable database: a typed toolweave error naming the URL (its
password masked) and what to start; a later launch with a good URL still works."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from toolweave import AiMessage, ScriptedChatModel, ToolweaveError
from toolweave.errors import ErrorCode


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_database_is_a_typed_error(postgres: Any) -> None:
    from toolweave.durable import DurableDatabaseError, DurableToolService, launch, shutdown

    service = DurableToolService("launchcheck", model=ScriptedChatModel([AiMessage("up")]))
    port = _closed_port()
    url = f"postgresql://bob:s3cr3t-pw@127.0.0.1:{port}/toolweave"
    with pytest.raises(DurableDatabaseError) as info:
        launch(url, app_name="twlaunch", log_level="CRITICAL")
    error = info.value
    assert isinstance(error, ToolweaveError) and isinstance(error, ConnectionError)
    assert error.code == ErrorCode.DURABLE_DATABASE_UNAVAILABLE
    assert error.url == f"postgresql://bob:***@127.0.0.1:{port}/toolweave"
    text = str(error)
    assert "s3cr3t-pw" not in text
    assert error.url in text and "Connection refused" in text
    assert "Start PostgreSQL" in text
    # the failed attempt left nothing behind: launching against a running server works
    launch(postgres.url_for("tw_launch"), app_name="twlaunch", log_level="WARNING")
    try:
        result = asyncio.run(service.arun("hi", conversation_id="c-launch", timeout=60))
        assert result.text == "up"
    finally:
        shutdown()
