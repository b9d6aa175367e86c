"""Provider dialects: the canonical schema of a `ToolCard` rewritten for each wire format.

Each function is pure and cached per (card, dialect, strict): the second call for the same
card returns the same object, so **treat the returned dicts as read-only**. Every dialect
first drops toolweave's own property keywords (`location`, which places an HTTP tool's
parameter) and `x-*` extensions from the top-level properties.

`openai_tool(card, strict=None)` — Chat Completions `tools[]` entry
  `{"type": "function", "function": {"name", "description"?, "parameters", "strict"?}}`.
  `strict` falls back to `card.strict`; `None` means "strict when the schema allows it".
  Strict rewriting (`to_openai_strict`): every object schema gets
  `additionalProperties: false` and lists all its properties in `required`; a property that
  was optional becomes nullable (`"type": [T, "null"]`, or `anyOf` + `{"type": "null"}`; enums
  gain `null`) so the model may send `null` and the executor applies the default; `default`
  is dropped and said in the description instead (`Default: "c"; null uses the default.`),
  `title`, `$schema`, `discriminator` are dropped; `oneOf` becomes `anyOf`; a `$ref` with
  sibling keywords becomes `anyOf: [{"$ref"}]` plus the siblings; `minLength`, `maxLength`,
  `uniqueItems`, `minProperties`, `maxProperties`, `patternProperties` and unsupported
  `format`s move into the description as `key=value` notes. Free-form objects
  (`dict[str, Any]`, `**kwargs`, `additionalProperties` other than false) and untyped
  values (`Any`, bare `list`) cannot be strict: with `strict=True` that is a `SchemaError`
  naming the property; with `strict=None` the tool is sent non-strict.
`openai_responses_tool(card, strict=None)` — Responses API `tools[]` entry, flat:
  `{"type": "function", "name", "description"?, "parameters", "strict": bool}`; same rules.
`anthropic_tool(card, strict=None)` — Messages `tools[]` entry
  `{"name", "description"?, "input_schema", "strict"?}`. `input_schema` is the canonical
  object schema unchanged. Strict (only when `strict`/`card.strict` is True) sets
  `additionalProperties: false` on every object (free-form objects are a `SchemaError`) and
  sends `"strict": true`; `required` is kept as it is. Keywords strict tool use does not
  take move into the description as `key=value` notes: numeric bounds (`minimum`,
  `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`), `minLength`,
  `maxLength`, array bounds but `minItems` 0 or 1, `uniqueItems`, `contains`,
  `minProperties`, `maxProperties`, `patternProperties`, `propertyNames` and `format`s
  other than date-time, time, date, duration, email, hostname, uri, ipv4, ipv6, uuid;
  `default` is dropped and said in the description (`Default: "c".`), `$schema`,
  `discriminator`, `examples` are dropped.
`gemini_function_declaration(card, mode="openapi")` — one `functionDeclarations[]` entry.
  `mode="json_schema"` sends `parametersJsonSchema`: the canonical schema without `title`
  and `$schema`, `const` as a one-value `enum`. `mode="openapi"` sends `parameters` in the
  OpenAPI subset: `$defs` inlined (a recursive `$ref`, or a schema past 200,000 values once
  inlined, is a `SchemaError`: use json_schema mode), `anyOf[T, null]` and `type: [T, "null"]` become `T` + `nullable: true`,
  `additionalProperties`, `title`, `default`, `$schema`, `examples` dropped (a default is
  said in the description: `Default: "c".`), `const` and
  non-string enums handled (Gemini enums are strings: a numeric enum keeps its numeric type and
  lists the allowed values in the description, other enums become strings), tuple
  `prefixItems` widened to `items: {anyOf}` with `minItems`/`maxItems`; a real union stays
  `anyOf` (never collapsed to its first branch). A tool with no parameters sends no
  `parameters` key at all (Gemini rejects an empty object schema).

Every dialect needs an object schema at the root of the parameters: a root `anyOf`/`oneOf`/
`allOf`/`$ref` is a `SchemaError` (never sent, never silently dropped), and a root without
`"type"` gets `"type": "object"`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from ._utils.jsoncopy import copy_json
from .errors import SchemaError
from .tools.card import ToolCard

__all__ = [
    "anthropic_tool",
    "anthropic_tools",
    "gemini_function_declaration",
    "gemini_function_declarations",
    "openai_responses_tool",
    "openai_tool",
    "openai_tools",
    "to_anthropic_strict",
    "to_gemini_json_schema",
    "to_gemini_openapi",
    "to_openai_strict",
]

_OPENAI_FORMATS = {
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
}
_OPENAI_MOVED = (
    "minLength",
    "maxLength",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "patternProperties",
)
_DROPPED_STRICT = ("default", "title", "$schema", "discriminator", "examples")


_F = TypeVar("_F", bound=Callable[..., dict[str, Any]])


def _guarded(transform: _F) -> _F:
    """Turn a crash on a malformed schema (e.g. `"enum": "x"`) into a `SchemaError` that
    names the first JSON Schema violation."""

    @functools.wraps(transform)
    def wrapper(schema: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return transform(schema)
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
            if isinstance(e, SchemaError):
                raise
            import jsonschema  # loaded when first needed (import time)

            problem = jsonschema.exceptions.best_match(
                jsonschema.Draft202012Validator(
                    jsonschema.Draft202012Validator.META_SCHEMA
                ).iter_errors(schema)
            )
            detail = problem.message if problem is not None else f"{type(e).__name__}: {e}"
            raise SchemaError(f"the schema is not valid JSON Schema: {detail}") from None
        except RecursionError:
            raise SchemaError("the schema is nested too deeply") from None

    return wrapper  # type: ignore[return-value]


class _NotStrict(Exception):
    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where or '(root)'}: {why}")


def _hit(card: ToolCard, key: tuple[Any, ...]) -> Any:
    # the hot path of every dialect call: one dict lookup on the card's private cache
    private = card.__pydantic_private__
    return private["_dialects"].get(key) if private is not None else None


def _cached(card: ToolCard, key: tuple[Any, ...], build: Any) -> Any:
    cache = card.dialect_cache()
    value = cache.get(key)
    if value is None:
        value = build()
        cache[key] = value
    return value


def _is_object(schema: Mapping[str, Any]) -> bool:
    t = schema.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t) or "properties" in schema


def _note(schema: dict[str, Any], notes: list[str]) -> None:
    if notes:
        desc = schema.get("description", "")
        extra = ", ".join(notes)
        schema["description"] = f"{desc} ({extra})" if desc else extra


def _with_default_note(schema: Any, nullable: bool) -> Any:
    """`schema` with its `default` said in the description, for dialects that drop the
    keyword: the model still learns what it gets by leaving the value out (or sending null,
    when strict mode makes the property nullable). A null default says nothing new."""
    if not isinstance(schema, Mapping) or schema.get("default") is None:
        return schema
    text = "Default: " + json.dumps(schema["default"], ensure_ascii=False, default=str)
    if nullable:
        text += "; null uses the default"
    out = dict(schema)
    desc = str(out.get("description") or "").rstrip()
    if desc and not desc.endswith((".", "!", "?")):
        desc += "."
    out["description"] = f"{desc} {text}." if desc else f"{text}."
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        ref = {"$ref": schema.pop("$ref")}
        return {"anyOf": [ref, {"type": "null"}], **schema}
    if "anyOf" in schema:
        if not any(isinstance(b, Mapping) and b.get("type") == "null" for b in schema["anyOf"]):
            schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
        return schema
    t = schema.get("type")
    if isinstance(t, str) and t != "null":
        schema["type"] = [t, "null"]
    elif isinstance(t, list) and "null" not in t:
        schema["type"] = [*t, "null"]
    elif t is None:
        return {"anyOf": [schema, {"type": "null"}]}
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _strict_node(schema: Any, where: str) -> Any:
    if not isinstance(schema, Mapping):
        return schema
    s = {k: v for k, v in schema.items() if k not in _DROPPED_STRICT}
    if "oneOf" in s:
        s["anyOf"] = s.pop("oneOf")
    notes = [f"{k}={s.pop(k)}" for k in _OPENAI_MOVED if k in s]
    fmt = s.get("format")
    if fmt is not None and fmt not in _OPENAI_FORMATS:
        notes.append(f"format={s.pop('format')}")
    _note(s, notes)
    if "$ref" in s and len(s) > 1:
        ref = s.pop("$ref")
        s = {"anyOf": [{"$ref": ref}], **s}
    if "allOf" in s:
        if len(s["allOf"]) == 1:
            inner = s.pop("allOf")[0]
            s = {**inner, **s}
        else:
            raise _NotStrict(where, "allOf with several branches is not supported in strict mode")
    for key in ("anyOf",):
        if key in s:
            s[key] = [_strict_node(b, f"{where}|{i}") for i, b in enumerate(s[key])]
    for key in ("$defs", "definitions"):
        if key in s:
            s[key] = {n: _strict_node(d, f"$defs.{n}") for n, d in s[key].items()}
    if not any(k in s for k in ("type", "anyOf", "$ref", "enum", "const")):
        raise _NotStrict(where, "a value without a type (Any) cannot be strict")
    if _is_object(s):
        extra = s.get("additionalProperties")
        if extra not in (None, False):
            raise _NotStrict(
                where, "a free-form object (dict[str, ...] or **kwargs) cannot be strict"
            )
        props = s.get("properties") or {}
        required = set(s.get("required") or [])
        new_props: dict[str, Any] = {}
        for name, prop in props.items():
            optional = name not in required
            node = _strict_node(
                _with_default_note(prop, optional), f"{where}.{name}" if where else name
            )
            if optional and isinstance(node, dict):
                node = _nullable(node)
            new_props[name] = node
        s["properties"] = new_props
        s["required"] = list(props)
        s["additionalProperties"] = False
        s.setdefault("type", "object")
    t = s.get("type")
    if t == "array" or (isinstance(t, list) and "array" in t):
        items = s.get("items")
        if not items:
            raise _NotStrict(where, "an array without an item type (bare list) cannot be strict")
        if "prefixItems" in s:
            raise _NotStrict(where, "fixed-length tuples cannot be strict")
        s["items"] = _strict_node(items, f"{where}[]")
    return s


@_guarded
def to_openai_strict(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAI strict form of an object schema; raises `SchemaError` when impossible."""
    if not _is_object(schema) or "anyOf" in schema or "oneOf" in schema:
        raise SchemaError("strict mode needs an object schema at the root (not a union)")
    try:
        out = _strict_node(copy_json(dict(schema)), "")
    except _NotStrict as e:
        raise SchemaError(f"the schema cannot be made strict: {e}") from None
    assert isinstance(out, dict)
    return out


def _object_root(card: ToolCard, dialect: str) -> dict[str, Any]:
    """The card's schema checked to be an object schema at the root, as every provider
    requires; a root union (`anyOf`/`oneOf`) or a `$ref` is a `SchemaError`, and a missing
    `"type": "object"` is added."""
    schema = card.input_params
    if not schema:
        return {"type": "object", "properties": {}}
    for key in ("anyOf", "oneOf", "allOf", "$ref"):
        if key in schema:
            raise SchemaError(
                f"tool {card.name!r}: {dialect} needs an object schema at the root of the "
                f"parameters, but the schema has a root {key!r}. Wrap the union in a property, "
                'e.g. {"type": "object", "properties": {"value": {"anyOf": [...]}}}.'
            )
    schema = _without_placement(schema)
    if "type" not in schema:
        return {"type": "object", **schema}
    return schema


def _private_key(key: str) -> bool:
    return key == "location" or key.startswith("x-")


def _without_placement(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop toolweave's own property keywords (`location`, used by HTTP tools to place a
    parameter) and `x-*` extensions, which no provider needs and strict modes reject."""
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not any(
        isinstance(p, Mapping) and any(_private_key(k) for k in p) for p in props.values()
    ):
        return schema
    cleaned = {
        name: {k: v for k, v in p.items() if not _private_key(k)} if isinstance(p, Mapping) else p
        for name, p in props.items()
    }
    return {**schema, "properties": cleaned}


def _resolve_strict(
    card: ToolCard, strict: bool | None, dialect: str
) -> tuple[bool, dict[str, Any]]:
    want = strict if strict is not None else card.strict
    schema = _object_root(card, dialect)
    if want is False:
        return False, schema
    try:
        return True, to_openai_strict(schema)
    except SchemaError as e:
        if want is True:
            raise SchemaError(f"tool {card.name!r}: {e.message}") from None
        return False, schema


def openai_tool(card: ToolCard, strict: bool | None = None) -> dict[str, Any]:
    """The Chat Completions `tools[]` entry for `card` (see the module docstring)."""
    hit = _hit(card, ("openai", strict))
    if hit is not None:
        return hit  # type: ignore[no-any-return]

    def build() -> dict[str, Any]:
        is_strict, params = _resolve_strict(card, strict, "OpenAI")
        fn: dict[str, Any] = {"name": card.name}
        if card.description:
            fn["description"] = card.description
        fn["parameters"] = params
        if is_strict:
            fn["strict"] = True
        return {"type": "function", "function": fn}

    return _cached(card, ("openai", strict), build)  # type: ignore[no-any-return]


def openai_responses_tool(card: ToolCard, strict: bool | None = None) -> dict[str, Any]:
    """The Responses API `tools[]` entry for `card` (flat, `strict` always present)."""
    hit = _hit(card, ("responses", strict))
    if hit is not None:
        return hit  # type: ignore[no-any-return]

    def build() -> dict[str, Any]:
        is_strict, params = _resolve_strict(card, strict, "OpenAI")
        out: dict[str, Any] = {"type": "function", "name": card.name}
        if card.description:
            out["description"] = card.description
        out["parameters"] = params
        out["strict"] = is_strict
        return out

    return _cached(card, ("responses", strict), build)  # type: ignore[no-any-return]


# Anthropic strict tool use (structured outputs): keywords its docs list as unsupported go
# into the description as notes (a 400 otherwise); `default` is said there too, as the
# official SDK's transform does. The executor still enforces all of them.
_ANTHROPIC_DROPPED = ("default", "$schema", "discriminator", "examples")
_ANTHROPIC_MOVED = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
)
_ANTHROPIC_FORMATS = {*_OPENAI_FORMATS, "uri"}


def _anthropic_strict_node(schema: Any, where: str) -> Any:
    if isinstance(schema, list):
        return [_anthropic_strict_node(s, where) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    s = {k: v for k, v in schema.items() if k not in _ANTHROPIC_DROPPED}
    notes = [f"{k}={s.pop(k)}" for k in _ANTHROPIC_MOVED if k in s]
    if s.get("minItems", 0) not in (0, 1):
        notes.append(f"minItems={s.pop('minItems')}")
    fmt = s.get("format")
    if fmt is not None and fmt not in _ANTHROPIC_FORMATS:
        notes.append(f"format={s.pop('format')}")
    _note(s, notes)
    if _is_object(s):
        extra = s.get("additionalProperties")
        if extra not in (None, False):
            raise SchemaError(
                f"{where or '(root)'}: a free-form object cannot be strict for Anthropic"
            )
        s["additionalProperties"] = False
    for key, value in list(s.items()):
        if key == "properties" and isinstance(value, Mapping):
            s[key] = {
                n: _anthropic_strict_node(_with_default_note(p, False), f"{where}.{n}".lstrip("."))
                for n, p in value.items()
            }
        elif key in ("items", "anyOf", "oneOf", "allOf", "prefixItems"):
            s[key] = _anthropic_strict_node(value, where)
        elif key in ("$defs", "definitions") and isinstance(value, Mapping):
            s[key] = {n: _anthropic_strict_node(d, f"$defs.{n}") for n, d in value.items()}
    return s


@_guarded
def to_anthropic_strict(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The Anthropic strict form of an object schema (see the module docstring);
    `SchemaError` for free-form objects."""
    out = _anthropic_strict_node(copy_json(dict(schema)), "")
    assert isinstance(out, dict)
    return out


def anthropic_tool(card: ToolCard, strict: bool | None = None) -> dict[str, Any]:
    """The Messages API `tools[]` entry for `card` (see the module docstring)."""
    hit = _hit(card, ("anthropic", strict))
    if hit is not None:
        return hit  # type: ignore[no-any-return]

    def build() -> dict[str, Any]:
        want = strict if strict is not None else card.strict
        out: dict[str, Any] = {"name": card.name}
        if card.description:
            out["description"] = card.description
        schema = _object_root(card, "Anthropic")
        if want:
            try:
                out["input_schema"] = to_anthropic_strict(schema)
            except SchemaError as e:
                raise SchemaError(f"tool {card.name!r}: {e.message}") from None
            out["strict"] = True
        else:
            out["input_schema"] = schema
        return out

    return _cached(card, ("anthropic", strict), build)  # type: ignore[no-any-return]


# Gemini ------------------------------------------------------------------------------------
_GEMINI_DROP = ("additionalProperties", "title", "default", "$schema", "examples", "$id")
_GEMINI_FORMATS = {"date-time", "enum", "int32", "int64", "float", "double"}


def _const_to_enum(s: dict[str, Any]) -> None:
    if "const" in s:
        value = s.pop("const")
        s["enum"] = [value]
        if "type" not in s:
            s["type"] = (
                "string"
                if isinstance(value, str)
                else "boolean"
                if isinstance(value, bool)
                else "integer"
                if isinstance(value, int)
                else "number"
                if isinstance(value, float)
                else "string"
            )


def _json_schema_node(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_json_schema_node(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    s: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("title", "$schema"):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):
            s[key] = {n: _json_schema_node(v) for n, v in value.items()}
        elif isinstance(value, (Mapping, list)) and key != "enum" and key != "required":
            s[key] = _json_schema_node(value)
        else:
            s[key] = value
    _const_to_enum(s)
    return s


@_guarded
def to_gemini_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The `parametersJsonSchema` form (full JSON Schema, lightly cleaned)."""
    out = _json_schema_node(schema)
    assert isinstance(out, dict)
    return out


def _openapi_node(schema: Any, defs: Mapping[str, Any], stack: tuple[str, ...], where: str) -> Any:
    if not isinstance(schema, Mapping):
        return schema
    s = dict(schema)
    ref = s.pop("$ref", None)
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        if name in stack:
            raise SchemaError(
                f"{where or '(root)'}: the recursive type {name!r} cannot be expressed in "
                "Gemini's OpenAPI schema subset; use mode='json_schema'"
            )
        if name not in defs:
            raise SchemaError(f"{where or '(root)'}: unresolved $ref {ref!r}")
        resolved = _openapi_node(defs[name], defs, (*stack, name), where)
        own = _openapi_node(s, defs, stack, where)
        if "description" in resolved and "description" in own:
            # both say something (the type's notes, the property's default): keep both
            own["description"] = f"{own['description']} {resolved['description']}"
        return {**resolved, **own}
    if "default" in s:
        s = _with_default_note(s, nullable=False)
    for key in _GEMINI_DROP:
        s.pop(key, None)
    s.pop("$defs", None)
    s.pop("definitions", None)
    _const_to_enum(s)
    notes: list[str] = []
    fmt = s.get("format")
    if fmt is not None and fmt not in _GEMINI_FORMATS:
        notes.append(f"format={s.pop('format')}")
    if "oneOf" in s:
        s["anyOf"] = s.pop("oneOf")
    if "allOf" in s and len(s["allOf"]) == 1:
        s = {**s.pop("allOf")[0], **s}
    t = s.get("type")
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        if "null" in t:
            s["nullable"] = True
        if len(non_null) == 1:
            s["type"] = non_null[0]
        else:
            s.pop("type")
            s["anyOf"] = [{"type": x} for x in non_null]
    if "anyOf" in s:
        branches = [
            b for b in s["anyOf"] if not (isinstance(b, Mapping) and b.get("type") == "null")
        ]
        if len(branches) < len(s["anyOf"]):
            s["nullable"] = True
        if len(branches) == 1:
            s.pop("anyOf")
            inner = _openapi_node(branches[0], defs, stack, where)
            s = {**inner, **s}
        else:
            s["anyOf"] = [_openapi_node(b, defs, stack, where) for b in branches]
    if "enum" in s:
        values = [v for v in s["enum"] if v is not None]
        if None in s["enum"]:
            s["nullable"] = True
        numeric = values and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
        )
        if numeric:
            # Gemini enums are strings only; a string "1" would then fail validation, so a
            # numeric enum keeps its numeric type and lists the allowed values in the text.
            s.pop("enum")
            s["type"] = "integer" if all(isinstance(v, int) for v in values) else "number"
            notes.append("allowed values: " + ", ".join(str(v) for v in values))
        else:
            if any(not isinstance(v, str) for v in values):
                notes.append("allowed values: " + ", ".join(str(v) for v in values))
            s["enum"] = [str(v) for v in values]
            s["type"] = "string"
            s["format"] = "enum"
    if "properties" in s:
        s["properties"] = {
            n: _openapi_node(p, defs, stack, f"{where}.{n}".lstrip("."))
            for n, p in s["properties"].items()
        }
        s.setdefault("type", "object")
    if "prefixItems" in s:
        prefix = [_openapi_node(p, defs, stack, where) for p in s.pop("prefixItems")]
        s["items"] = prefix[0] if len(prefix) == 1 else {"anyOf": prefix}
        s.setdefault("minItems", len(prefix))
        s.setdefault("maxItems", len(prefix))
    elif "items" in s:
        s["items"] = _openapi_node(s["items"], defs, stack, f"{where}[]")
    _note(s, notes)
    return s


_MAX_INLINED_NODES = 200_000


def _inlined_size(schema: Any, defs: Mapping[str, Any]) -> int:
    """How many values `schema` has once every `$ref` to `defs` is inlined (each definition
    measured once; a recursive one counts once, `_openapi_node` reports it)."""
    sizes: dict[str, int] = {}

    def size(node: Any) -> int:
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            total = 1
            if isinstance(ref, str):
                name = ref.rsplit("/", 1)[-1]
                if name not in sizes and name in defs:
                    sizes[name] = 1  # while measuring: a cycle counts once
                    sizes[name] = size(defs[name])
                total += sizes.get(name, 1)
            return total + sum(size(v) for k, v in node.items() if k not in ("$defs", "$ref"))
        if isinstance(node, list):
            return 1 + sum(size(v) for v in node)
        return 1

    return size(schema)


@_guarded
def to_gemini_openapi(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAPI-subset `parameters` form; raises `SchemaError` for recursive types and
    for schemas whose shared `$defs` would grow past 200,000 values once inlined."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    if defs and _inlined_size(schema, defs) > _MAX_INLINED_NODES:
        raise SchemaError(
            f"the schema grows past {_MAX_INLINED_NODES:,} values when its shared $defs are "
            "inlined for Gemini's OpenAPI schema subset; use mode='json_schema'"
        )
    out = _openapi_node(copy_json(dict(schema)), defs, (), "")
    assert isinstance(out, dict)
    if out.get("type") != "object":
        raise SchemaError("Gemini function parameters must be an object schema")
    return out


def gemini_function_declaration(
    card: ToolCard, mode: Literal["openapi", "json_schema"] = "openapi"
) -> dict[str, Any]:
    """The `functionDeclarations[]` entry for `card` (see the module docstring)."""
    hit = _hit(card, ("gemini", mode))
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    if mode not in ("openapi", "json_schema"):
        raise ValueError(f"mode must be 'openapi' or 'json_schema', got {mode!r}")

    def build() -> dict[str, Any]:
        out: dict[str, Any] = {"name": card.name}
        if card.description:
            out["description"] = card.description
        schema = _object_root(card, "Gemini")
        if schema.get("properties") or schema.get("additionalProperties") not in (None, False):
            try:
                if mode == "openapi":
                    out["parameters"] = to_gemini_openapi(schema)
                else:
                    out["parametersJsonSchema"] = to_gemini_json_schema(schema)
            except SchemaError as e:
                raise SchemaError(f"tool {card.name!r}: {e.message}") from None
        return out

    return _cached(card, ("gemini", mode), build)  # type: ignore[no-any-return]


# Whole tool lists ---------------------------------------------------------------------------
# A request carries every tool each turn; with thousands of tools even cached per-card lookups
# add up, so the list is cached too, keyed by the identity of the (immutable) tuple of cards
# that `ToolService` passes unchanged from turn to turn.
_LIST_CACHE: dict[tuple[Any, ...], tuple[tuple[ToolCard, ...], tuple[dict[str, Any], ...]]] = {}
_LIST_CACHE_SIZE = 64


def _tool_list(
    cards: Sequence[ToolCard], key: tuple[Any, ...], build: Callable[[ToolCard], dict[str, Any]]
) -> list[dict[str, Any]]:
    if not isinstance(cards, tuple):
        return [build(card) for card in cards]
    full_key = (*key, id(cards))
    hit = _LIST_CACHE.get(full_key)
    if hit is not None and hit[0] is cards:
        return list(hit[1])
    entries = tuple(build(card) for card in cards)
    if len(_LIST_CACHE) >= _LIST_CACHE_SIZE:
        _LIST_CACHE.pop(next(iter(_LIST_CACHE)))
    _LIST_CACHE[full_key] = (cards, entries)
    return list(entries)


def openai_tools(cards: Sequence[ToolCard], strict: bool | None = None) -> list[dict[str, Any]]:
    """`openai_tool` for every card (a card's own `strict` wins over `strict`); the list is
    cached per tuple of cards, so a large toolset costs one copy per request."""
    return _tool_list(
        cards,
        ("openai", strict),
        lambda card: openai_tool(card, card.strict if card.strict is not None else strict),
    )


def anthropic_tools(cards: Sequence[ToolCard], strict: bool | None = None) -> list[dict[str, Any]]:
    """`anthropic_tool` for every card, cached like `openai_tools`."""
    return _tool_list(
        cards,
        ("anthropic", strict),
        lambda card: anthropic_tool(card, card.strict if card.strict is not None else strict),
    )


def gemini_function_declarations(
    cards: Sequence[ToolCard], mode: Literal["openapi", "json_schema"] = "openapi"
) -> list[dict[str, Any]]:
    """`gemini_function_declaration` for every card, cached like `openai_tools`."""
    return _tool_list(cards, ("gemini", mode), lambda card: gemini_function_declaration(card, mode))
