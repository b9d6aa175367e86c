"""`toolweave call` and `toolweave chat` show non-text parts by type, size and name."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from toolweave.cli import app
from toolweave.cli._render import render_stream
from toolweave.execution import ToolExecution, ToolExecutionRequest
from toolweave.execution.executor import to_result
from toolweave.service import ToolExecutionFinished

from .media_tools import picture

MEDIA = str(Path(__file__).resolve().parent / "media_tools.py")
SHOWN = [
    "a cat",
    "[image (image/png, 2.0 kB)]",
    "[file report.pdf (application/pdf, 8 B)]",
    "[resource link readme (file:///r.md, text/markdown)]",
]


def test_call_shows_parts_in_place() -> None:
    result = CliRunner().invoke(app, ["call", MEDIA, "picture", "{}"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == SHOWN


def test_chat_rendering_shows_parts() -> None:
    now = datetime.now(UTC)
    execution = ToolExecution(
        ToolExecutionRequest(id="c1", name="picture"),
        to_result(picture.invoke({}), "picture"),
        now,
        now,
    )
    out = io.StringIO()
    render_stream([ToolExecutionFinished(execution)], Console(file=out, width=200))
    text = out.getvalue()
    assert "tool result" in text
    for line in SHOWN:
        assert line in text
