"""The seed's weather scenario, for `toolweave demo`."""

from __future__ import annotations

from ..tools import tool

__all__ = ["LOCAL_QUESTION", "SEED_QUESTION", "get_weather"]

SEED_QUESTION = "杭州今天天气怎么样？"
"""The seed's question (asked of cloud models)."""

LOCAL_QUESTION = "What is the weather in Hangzhou today?"
"""The same question in English, for the small local model (SmolLM2 is English-only)."""

_FORECASTS = {
    "杭州": "杭州今天 22℃，天气晴。 (Hangzhou: 22°C, sunny)",
    "hangzhou": "Hangzhou: 22°C, sunny.",
    "paris": "Paris: 14°C, light rain.",
    "beijing": "Beijing: 18°C, cloudy.",
}


@tool(strict=False)
def get_weather(city: str) -> str:
    """查询指定城市的当前天气 (current weather for a city)

    Args:
        city: 城市名 (city name)
    """
    key = city.strip()
    return _FORECASTS.get(key) or _FORECASTS.get(key.lower()) or f"{city}: no data"
