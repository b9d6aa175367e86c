"""The server the official MCP conformance suite expects, written with toolweave only.

Served by ``toolweave mcp serve tests/servers/mcp_conformance_server.py --transport http``;
the tool, resource and prompt names and answers are the ones the suite's server scenarios
(``@modelcontextprotocol/conformance``) ask for.
"""

from __future__ import annotations

import asyncio
import json

from toolweave import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    LocalFunction,
    TextContent,
    ToolCard,
    tool,
)
from toolweave.context import ToolContext
from toolweave.errors import ToolNotSupportedError
from toolweave.mcp import completion, prompt, resource

IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


# --- tools -------------------------------------------------------------------------------------
@tool
def test_simple_text() -> str:
    """Tests simple text content response"""
    return "This is a simple text response for testing."


@tool
def test_image_content() -> ImageContent:
    """Tests image content response"""
    return ImageContent(data=IMAGE, mime_type="image/png")


@tool
def test_audio_content() -> AudioContent:
    """Tests audio content response"""
    return AudioContent(data=AUDIO, mime_type="audio/wav")


@tool
def test_embedded_resource() -> EmbeddedResource:
    """Tests embedded resource content response"""
    return EmbeddedResource(
        uri="test://embedded-resource",
        mime_type="text/plain",
        text="This is an embedded resource content.",
    )


@tool
def test_multiple_content_types() -> list[object]:
    """Tests response with multiple content types (text, image, resource)"""
    return [
        TextContent(text="Multiple content types test:"),
        ImageContent(data=IMAGE, mime_type="image/png"),
        EmbeddedResource(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text=json.dumps({"test": "data", "value": 123}),
        ),
    ]


@tool
async def test_tool_with_logging(ctx: ToolContext) -> str:
    """Tests tool that emits log messages during execution"""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.alog("info", message)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@tool
def test_tool_with_progress(ctx: ToolContext) -> str:
    """Tests tool that reports progress notifications (a sync tool: the sync face)"""
    for step in (0, 50, 100):
        ctx.report_progress(step, 100, f"Completed step {step} of 100")
    return "progress reported"


@tool
async def test_reconnection() -> str:
    """Tests SSE stream disconnection and client reconnection (SEP-1699)"""
    await asyncio.sleep(0.1)
    return (
        "Reconnection test completed successfully. If you received this, the client "
        "properly reconnected after stream closure."
    )


@tool
def test_error_handling() -> str:
    """Tests error response handling"""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool
async def test_sampling(prompt: str, ctx: ToolContext) -> str:
    """Tests server-initiated sampling (LLM completion request)

    Args:
        prompt: The prompt to send to the LLM
    """
    answer = await ctx.asample(prompt, max_tokens=100)
    return f"LLM response: {answer}"


@tool
async def test_elicitation(message: str, ctx: ToolContext) -> str:
    """Tests server-initiated elicitation (user input request)

    Args:
        message: The message to show the user
    """
    schema = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    answer = await ctx.aelicit(message, schema)
    return f"User response: action={answer.action}, content={json.dumps(answer.content or {})}"


@tool
async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> str:
    """Tests elicitation with default values per SEP-1034"""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    answer = await ctx.aelicit("Please review and update the form fields with defaults", schema)
    return (
        f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content or {})}"
    )


@tool
async def test_elicitation_sep1330_enums(ctx: ToolContext) -> str:
    """Tests elicitation with enum schema improvements per SEP-1330"""
    titled = [
        {"const": "value1", "title": "First Option"},
        {"const": "value2", "title": "Second Option"},
        {"const": "value3", "title": "Third Option"},
    ]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": ["option1", "option2", "option3"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": titled,
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        "required": [],
    }
    answer = await ctx.aelicit("Please select options from the enum fields", schema)
    return (
        f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content or {})}"
    )


def _schema_2020_12(**args: object) -> str:
    return f"JSON Schema 2020-12 tool called with: {json.dumps(args)}"


# A hand-written card: its JSON Schema 2020-12 ($schema, $defs, additionalProperties) is
# served verbatim.
json_schema_2020_12_tool = LocalFunction(
    ToolCard(
        name="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
        input_params={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
    _schema_2020_12,
)


# --- 2026-07-28 (conformance 0.2.0: server-stateless, http-custom-header-server-validation) --
@tool
async def test_missing_capability(ctx: ToolContext) -> str:
    """Samples the client's model: refused with -32021 when sampling was not declared"""
    return await ctx.asample("Say hello", max_tokens=20)


@tool
async def test_streaming_elicitation(ctx: ToolContext) -> str:
    """Asks the user a question while the call runs"""
    answer = await ctx.aelicit(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


@tool
async def test_logging_tool(ctx: ToolContext) -> str:
    """Logs while it runs (sent only to a request that set a log level)"""
    await ctx.alog("info", "test_logging_tool ran")
    return "logged"


# A parameter mirrored into an HTTP header (SEP-2243): the SDK's transport checks the
# Mcp-Param-Region header against the body.
@tool(
    input_params={
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        "required": ["region"],
    }
)
def test_custom_header(region: str) -> str:
    """Echoes the region it was called with (also sent as the Mcp-Param-Region header)"""
    return f"region: {region}"


# --- input-required results (2026-07-28, SEP-2322): ordinary ToolContext questions, which a
# 2026-07-28 request gets as input-required results; the tool runs again with the answers.
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@tool
async def test_input_required_result_elicitation(ctx: ToolContext) -> str:
    """Asks the user's name"""
    answer = await ctx.aelicit("What is your name?", NAME_FORM, key="user_name")
    return f"Hello, {(answer.content or {}).get('name')}!"


@tool
async def test_input_required_result_sampling(ctx: ToolContext) -> str:
    """Asks the client's model a question"""
    return await ctx.asample(
        "What is the capital of France?", max_tokens=100, key="capital_question"
    )


@tool
async def test_input_required_result_list_roots(ctx: ToolContext) -> str:
    """Lists the client's roots"""
    roots = await ctx.alist_roots(key="client_roots")
    return "roots: " + ", ".join(r.uri for r in roots)


@tool
async def test_input_required_result_request_state(ctx: ToolContext) -> str:
    """Asks for a confirmation"""
    form = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = await ctx.aelicit("Please confirm", form, key="confirm")
    return f"state-ok: confirmed={(answer.content or {}).get('ok')}"


@tool
async def test_input_required_result_multiple_inputs(ctx: ToolContext) -> str:
    """Asks the user, the model and for the roots at once"""
    answer, greeting, roots = await asyncio.gather(
        ctx.aelicit("What is your name?", NAME_FORM, key="user_name"),
        ctx.asample("Generate a greeting", max_tokens=50, key="greeting"),
        ctx.alist_roots(key="client_roots"),
    )
    name = (answer.content or {}).get("name")
    return f"{greeting} {name} ({len(roots)} roots)"


@tool
async def test_input_required_result_multi_round(ctx: ToolContext) -> str:
    """Asks two questions, one after the other"""
    first = await ctx.aelicit("Step 1: What is your name?", NAME_FORM, key="step1")
    color_form = {
        "type": "object",
        "properties": {"color": {"type": "string"}},
        "required": ["color"],
    }
    second = await ctx.aelicit("Step 2: What is your favorite color?", color_form, key="step2")
    name, color = (first.content or {}).get("name"), (second.content or {}).get("color")
    return f"{name} likes {color}"


@tool
async def test_input_required_result_tampered_state(ctx: ToolContext) -> str:
    """Asks for a confirmation (its request state is sealed)"""
    form = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = await ctx.aelicit("Please confirm", form, key="confirm")
    return f"confirmed={(answer.content or {}).get('ok')}"


@tool
async def test_input_required_result_capabilities(ctx: ToolContext) -> str:
    """Asks the user when the client can, else its model"""
    try:
        answer = await ctx.aelicit("What is your name?", NAME_FORM, key="user_name")
        return f"Hello, {(answer.content or {}).get('name')}!"
    except ToolNotSupportedError:
        return await ctx.asample("Make up a name", max_tokens=20, key="made_up_name")


# --- resources ---------------------------------------------------------------------------------
@resource("test://static-text", title="Static Text Resource", mime_type="text/plain")
def static_text() -> str:
    """A static text resource for testing"""
    return "This is the content of the static text resource."


@resource("test://static-binary", title="Static Binary Resource", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (image) for testing"""
    import base64

    return base64.b64decode(IMAGE)


@resource("test://template/{id}/data", name="template", mime_type="application/json")
def template(id: str) -> str:
    """A resource template with parameter substitution"""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched() -> str:
    """A resource that auto-updates every 3 seconds"""
    return "Watched resource content"


# --- prompts -----------------------------------------------------------------------------------
@prompt(title="Simple Test Prompt")
def test_simple_prompt() -> str:
    """A simple prompt without arguments"""
    return "This is a simple prompt for testing."


@prompt(title="Prompt With Arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments"""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@prompt(title="Prompt With Embedded Resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[object]:
    """A prompt that includes an embedded resource (here as the SDK's own block)"""
    import mcp_types

    embedded = mcp_types.EmbeddedResource(
        type="resource",
        resource=mcp_types.TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        ),
    )
    return [
        {"role": "user", "content": embedded},
        "Please process the embedded resource above.",
    ]


@prompt(title="Prompt With Image")
def test_prompt_with_image() -> list[object]:
    """A prompt that includes image content"""
    return [
        {"role": "user", "content": ImageContent(data=IMAGE, mime_type="image/png")},
        {"role": "user", "content": TextContent(text="Please analyze the image above.")},
    ]


@prompt(title="Prompt That Asks First")
async def test_input_required_result_prompt(ctx: ToolContext) -> str:
    """A prompt that asks the user for its context"""
    form = {
        "type": "object",
        "properties": {"context": {"type": "string"}},
        "required": ["context"],
    }
    answer = await ctx.aelicit("What context should the prompt use?", form, key="user_context")
    return f"Use this context: {(answer.content or {}).get('context')}"


@completion("test_prompt_with_arguments", "arg1")
def complete_arg1(value: str) -> list[str]:
    return [v for v in ("alpha", "beta", "gamma") if v.startswith(value)]
