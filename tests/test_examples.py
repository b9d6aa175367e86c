"""The examples run, so they cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_weather_example_prints_the_conversation() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "weather.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert 'model -> tool call get_weather({"city":"杭州"}) [id=call_abc123]' in out
    assert "tool  -> '杭州今天 22℃，天气晴。'" in out
    assert "model: 杭州今天天气晴" in out
