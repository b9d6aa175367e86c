"""`toolweave web` in a real browser: headless Chromium (Debian's `chromium`, installed by
scripts/ensure-chromium.sh) driven by playwright through that executable (no browser
download). Send a message, see the tool cards, approve, see the answer, call a tool from
its form, with a scripted model and with the local model (llama-server + SmolLM2, skipped
when it is not built); a screenshot of each step goes to build/test-artifacts/ui/
(TOOLWEAVE_ARTIFACTS overrides)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolweave.local import LlamaServer, find_llama_server

from . import local_scenario
from .conftest import web_server

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TOOLWEAVE_ARTIFACTS") or ROOT / "build/test-artifacts/ui")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts/ensure-chromium.sh")],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            pytest.skip(
                f"no Chromium on this machine and it cannot be installed: {proc.stderr.strip()[-500:]}"
            )
        found = proc.stdout.strip().splitlines()[-1]
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    with playwright.sync_playwright() as p:
        instance = p.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        yield instance
        instance.close()


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_conversation_with_an_approval_and_a_tool_called_by_hand(browser: Any) -> None:
    with web_server() as web:
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.set_default_timeout(20_000)
        page.goto(f"{web.base}/?token={web.token}")
        page.wait_for_selector("[data-testid=tool][data-tool=send_money]")
        assert "token=" not in page.url  # taken out of the address bar; the cookie stays
        _shot(page, "1-start")

        page.fill("[data-testid=input]", "Weather in Paris, then pay Ann 5")
        page.click("[data-testid=send]")
        weather = page.locator("[data-testid=tool-card][data-tool=get_weather]")
        weather.locator("[data-testid=tool-output]").wait_for()
        assert "Paris: sunny, 21 C" in weather.inner_text()
        pay = page.locator("[data-testid=tool-card][data-tool=send_money]")
        pay.locator("[data-testid=approve]").wait_for()
        assert '"amount": 5' in pay.locator("[data-testid=tool-args]").inner_text()
        _shot(page, "2-approval-asked")

        pay.locator("[data-testid=approve]").click()
        page.wait_for_selector(
            "[data-testid=tool-card][data-tool=send_money][data-state=output-available]"
        )
        page.locator("[data-testid=assistant-text]", has_text="Done: sunny").wait_for()
        texts = page.locator("[data-testid=assistant-text]").all_inner_texts()
        assert texts == [
            "Let me look.",
            "Paris is sunny. Now the payment.",
            "Done: sunny in Paris, and the payment went through.",
        ]
        assert "sent 5 to Ann" in pay.inner_text()
        _shot(page, "3-answered")

        tool = page.locator("[data-testid=tool][data-tool=get_weather]")
        tool.locator("summary").click()
        tool.locator("[data-testid=arg-city]").fill("Oslo")
        tool.locator("[data-testid=call]").click()
        result = tool.locator("[data-testid=tool-result]")
        result.filter(has_text="Oslo: sunny").wait_for()
        _shot(page, "4-tool-called-by-hand")
        page.close()


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    binary = find_llama_server()
    if binary is None:
        pytest.skip("llama-server is not built: run `make local-model`")
    server = LlamaServer(binary, startup_timeout=120)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_local_model_calls_a_tool_that_needs_approval(
    browser: Any, llama_server: LlamaServer
) -> None:
    # what the model writes is not asserted (a 135M model's wording); what the page shows of
    # the call is: the constrained first reply must call the one tool, the second must answer
    env = {
        local_scenario.URL_ENV: llama_server.base_url,
        local_scenario.MODEL_ENV: llama_server.model_name,
    }
    scenario = local_scenario.__file__
    with web_server(tools=scenario, provider=f"{scenario}:model", env=env) as web:
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.set_default_timeout(180_000)  # two replies of the local model on a loaded machine
        page.goto(f"{web.base}/?token={web.token}")
        page.wait_for_selector("[data-testid=tool][data-tool=get_weather]")
        page.fill("[data-testid=input]", "What is the weather in Paris today?")
        page.click("[data-testid=send]")
        card = page.locator("[data-testid=tool-card][data-tool=get_weather]")
        card.locator("[data-testid=approve]").wait_for()
        assert card.count() == 1
        assert '"city"' in card.locator("[data-testid=tool-args]").inner_text()
        assert page.locator("[data-testid=tool-output]").count() == 0  # not run before approval
        _shot(page, "local-1-approval-asked")

        card.locator("[data-testid=approve]").click()
        page.wait_for_selector(
            "[data-testid=tool-card][data-tool=get_weather][data-state=output-available]"
        )
        assert local_scenario.FORECAST in card.locator("[data-testid=tool-output]").inner_text()
        page.wait_for_selector("[data-testid=send]:not([disabled])")  # the answer has streamed
        assert page.locator("[data-testid=error]").is_hidden(), page.locator(
            "[data-testid=error]"
        ).inner_text()
        assert page.locator("[data-testid=tool-card]").count() == 1  # one round, then the answer
        last = page.locator("[data-testid=assistant-message]").last
        answer = last.locator("[data-testid=assistant-text]").all_inner_texts()
        assert "".join(answer).strip(), "the model did not answer after the tool ran"
        _shot(page, "local-2-answered")
        page.close()
