"""The `toolweave` command line, through typer's CliRunner and as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolweave.cli import app

HERE = Path(__file__).resolve().parent
TOOLS = str(HERE / "sample_tools.py")
runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def assert_one_line_error(code: int, stderr: str, needle: str) -> None:
    assert code == 1
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error:") and needle in lines[0], stderr


@pytest.mark.parametrize(
    "args",
    [[], ["schema"], ["call"], ["chat"], ["mcp"], ["mcp", "serve"], ["demo"]],
)
def test_help(args: list[str]) -> None:
    result = runner.invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.stdout


def test_top_level_help_lists_commands() -> None:
    out = runner.invoke(app, ["--help"]).stdout
    for command in ("schema", "call", "chat", "mcp", "demo"):
        assert command in out


@pytest.mark.parametrize(
    ("dialect", "name_path"),
    [
        ("openai", ("function", "name")),
        ("openai-strict", ("function", "name")),
        ("responses", ("name",)),
        ("anthropic", ("name",)),
        ("gemini", ("name",)),
    ],
)
def test_schema_dialects(dialect: str, name_path: tuple[str, ...]) -> None:
    code, out, err = run("schema", TOOLS, "--dialect", dialect)
    assert code == 0, err
    declarations = json.loads(out)
    names = set()
    for item in declarations:
        for key in name_path:
            item = item[key]
        names.add(item)
    assert {"add", "get_weather", "explode", "norm1"} <= names
    if dialect == "openai-strict":
        assert all(d["function"]["strict"] is True for d in declarations)
    if dialect == "anthropic":
        assert all("input_schema" in d for d in declarations)


def test_schema_of_one_object_and_of_a_class_and_a_plain_function() -> None:
    code, out, _ = run("schema", f"{TOOLS}:add")
    assert code == 0 and [d["function"]["name"] for d in json.loads(out)] == ["add"]
    code, out, _ = run("schema", f"{TOOLS}:Calculator")
    assert code == 0 and [d["function"]["name"] for d in json.loads(out)] == ["mul"]
    code, out, _ = run("schema", f"{TOOLS}:plain", "-d", "anthropic")
    assert code == 0 and json.loads(out)[0]["name"] == "plain"


def test_schema_by_dotted_module_name() -> None:
    code, out, _ = run("schema", "toolweave.cli._demo")
    assert code == 0 and json.loads(out)[0]["function"]["name"] == "get_weather"


def test_call() -> None:
    code, out, err = run("call", TOOLS, "add", '{"a": 2, "b": 3}')
    assert (code, out.strip()) == (0, "5"), err
    code, out, _ = run("call", TOOLS, "norm1", '{"p": {"x": -2, "y": 5}}')
    assert (code, out.strip()) == (0, "7")
    code, out, _ = run("call", f"{TOOLS}:Calculator", "mul", '{"a": 6, "b": 7}')
    assert (code, out.strip()) == (0, "42")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["schema", "no_such_module_xyz"], "no module named 'no_such_module_xyz'"),
        (["schema", "missing/file.py"], "no such file"),
        (["schema", f"{TOOLS}:nothing"], "no attribute 'nothing'"),
        (["schema", "json"], "defines no tools"),
        (["schema", f"{TOOLS}:add", "-d", "openai-strict"], ""),  # fine: checked below
        (["call", TOOLS, "nope", "{}"], "no tool named 'nope'"),
        (["call", TOOLS, "add", "{bad json"], "invalid JSON"),
        (["call", TOOLS, "add", "[1, 2]"], "must be a JSON object"),
        # written for the person at the shell, not the model's "Invalid arguments for tool"
        (["call", TOOLS, "add", '{"a": 1}'], "invalid arguments for add: b: missing"),
        (["call", TOOLS, "add", '{"a": "x", "b": 1}'], "invalid arguments for add: a:"),
        (["call", TOOLS, "explode", '{"reason": "r"}'], "boom: r"),
        (["chat", "--tools", TOOLS, "--provider", "martian", "-M", "hi"], "unknown provider"),
    ],
)
def test_errors_are_one_line(args: list[str], needle: str) -> None:
    code, _, err = run(*args)
    if not needle:
        assert code == 0
        return
    assert_one_line_error(code, err, needle)


def test_chat_shows_tool_calls_results_and_answer() -> None:
    code, out, err = run(
        "chat", "--tools", TOOLS, "--provider", f"{TOOLS}:scripted_model", "-M", "Weather in Paris?"
    )
    assert code == 0, err
    lines = out.splitlines()
    call = next(i for i, line in enumerate(lines) if line.startswith("tool call get_weather"))
    result = next(i for i, line in enumerate(lines) if line.startswith("tool result"))
    answer = next(i for i, line in enumerate(lines) if "It is sunny in Paris." in line)
    assert call < result < answer
    assert "id=call_1" in lines[call] and "id=call_1" in lines[result]
    assert "Paris: 21 degrees, sunny" in lines[result]


def test_chat_leaves_the_temperature_to_the_model_unless_given() -> None:
    # an explicit None would override the model's own default (the local model's greedy 0)
    model = f"{TOOLS}:parameters_model"
    code, out, err = run("chat", "--tools", TOOLS, "--provider", model, "-M", "Hi")
    assert code == 0, err
    assert "parameters set: []" in out
    code, out, err = run(
        "chat", "--tools", TOOLS, "--provider", model, "--temperature", "0.5", "-M", "Hi"
    )
    assert code == 0, err
    assert "parameters set: ['temperature']" in out


def test_chat_interactive_reads_lines_until_eof() -> None:
    result = runner.invoke(
        app,
        ["chat", "--tools", TOOLS, "--provider", f"{TOOLS}:scripted_model"],
        input="Weather in Paris?\n",
    )
    assert result.exit_code == 0, result.stderr
    assert "tool call get_weather" in result.stdout and "It is sunny in Paris." in result.stdout


def test_demo_with_a_given_provider() -> None:
    code, out, err = run("demo", "--provider", f"{TOOLS}:scripted_model")
    assert code == 0, err
    assert "tool call get_weather" in out and "tool result" in out and "1 tool call(s)" in out


def test_demo_fails_when_the_model_calls_no_tool() -> None:
    code, _, err = run("demo", "--provider", f"{TOOLS}:silent_model")
    assert_one_line_error(code, err, "without calling get_weather")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TOOLWEAVE_DEBUG", None)
    return env


def test_python_dash_m_and_error_exit_codes_in_a_subprocess() -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "toolweave", "call", TOOLS, "add", '{"a": 1, "b": 2}'],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert (ok.returncode, ok.stdout.strip()) == (0, "3"), ok.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "toolweave", "call", "no.such.module", "t", "{}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert bad.returncode == 1
    assert "Traceback" not in bad.stderr and bad.stderr.strip().count("\n") == 0
    assert bad.stderr.startswith("error:")


def test_mcp_serve_stdio() -> None:
    from toolweave.mcp import McpServerConfig, SyncMcpClient

    config = McpServerConfig(
        server_name="cli",
        params={
            "command": sys.executable,
            "args": ["-m", "toolweave", "mcp", "serve", TOOLS],
            "cwd": str(HERE),
        },
        connect_timeout=30,
        call_timeout=30,
    )
    with SyncMcpClient(config) as client:
        tools = {t.card.name: t for t in client.list_tools()}
        assert {"add", "get_weather", "explode", "norm1"} <= set(tools)
        assert str(tools["add"].invoke({"a": 20, "b": 22})) == "42"


def test_chat_with_the_responses_and_azure_providers() -> None:
    """`--provider openai-responses` / `azure-responses` against a loopback server speaking
    the Responses API: the tool is called and the answer printed."""
    from servers.provider_server import RunningServer

    def answer(output: list[dict[str, object]]) -> dict[str, object]:
        return {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "m",
            "status": "completed",
            "output": output,
        }

    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    }
    text = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny in Paris.", "annotations": []}],
    }
    running = RunningServer()
    server = running.start()
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "AZURE_OPENAI_API_KEY": "az-test"}
    try:
        for provider, extra, path in [
            ("openai-responses", ["--base-url", f"{server.url}/v1"], "/v1/responses"),
            (
                "azure-responses",
                ["--base-url", server.url, "-m", "gpt-5-prod"],
                "/openai/responses",
            ),
        ]:
            server.reset()
            server.enqueue(
                {"sse": [_completed(answer([call]))]}, {"sse": [_completed(answer([text]))]}
            )
            result = runner.invoke(
                app,
                ["chat", "--tools", TOOLS, "--provider", provider, *extra, "-M", "Paris?"],
                env=env,
            )
            assert result.exit_code == 0, result.stderr
            assert "Sunny in Paris." in result.stdout
            assert [r.path for r in server.requests] == [path, path]
            outputs = [
                i for i in server.bodies[1]["input"] if i.get("type") == "function_call_output"
            ]
            assert outputs and outputs[0]["call_id"] == "call_1"
    finally:
        running.stop()


def _completed(response: dict[str, object]) -> str:
    event = {"type": "response.completed", "sequence_number": 0, "response": response}
    return f"event: response.completed\ndata: {json.dumps(event)}\n\n"


def test_azure_without_a_deployment_says_so() -> None:
    code, _, err = run("chat", "--tools", TOOLS, "--provider", "azure", "-M", "hi")
    assert_one_line_error(code, err, "needs --model (the deployment name)")
