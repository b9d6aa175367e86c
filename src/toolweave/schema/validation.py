"""Argument validation and coercion, compiled once per tool.

Two validators share one interface (`validate_json` for the model's raw string,
`validate_python` for a dict), both returning the keyword arguments to call with:

- `ModelArgumentsValidator` wraps the pydantic model built from a Python signature;
- `JsonSchemaArgumentsValidator` serves hand-written, MCP and HTTP schemas.

Coercion (the same table for both, see docs/declaring-tools.md):

| schema type | accepted besides its own type | rejected |
|---|---|---|
| integer | `"3"` → 3, `2.0` → 2 | `2.5`, `"abc"`, `true` |
| number | `"1.5"` → 1.5, `3` → 3.0 | `"abc"`, `true` |
| string | `12` → `"12"`, `1.5` → `"1.5"` | objects, arrays, booleans |
| boolean | nothing: only `true`/`false` | `"true"`, `1` |
| array / object | a JSON string holding one (double encoding) | anything else |

Unknown top-level keys are rejected unless the schema allows extra properties.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Protocol

import pydantic
from pydantic import BaseModel
from pydantic_core import SchemaValidator

from .._utils.jsondepth import nested_deeper_than
from .._utils.jsonencode import json_encoder
from ..errors import ToolArgumentsError, ToolCardError
from .arguments import MAX_ARGUMENTS_BYTES, parse_arguments

__all__ = [
    "ArgumentsValidator",
    "JsonSchemaArgumentsValidator",
    "ModelArgumentsValidator",
    "accepts_null",
    "format_errors",
]

_INPUT_REPR_LIMIT = 60


class ArgumentsValidator(Protocol):
    """Validates and coerces tool arguments; raises `ToolArgumentsError`."""

    def validate_json(self, raw: str | bytes) -> dict[str, Any]: ...

    def validate_python(self, data: Mapping[str, Any]) -> dict[str, Any]: ...


_encode = json_encoder(repr)
"""`json.dumps(value, ensure_ascii=False, default=repr)`, set up once."""


def _short(value: Any) -> str:
    try:
        text = _encode(value)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= _INPUT_REPR_LIMIT else text[: _INPUT_REPR_LIMIT - 3] + "..."


def format_errors(
    tool_name: str | None, errors: list[dict[str, Any]], expected: list[str] | None = None
) -> str:
    """The message a model receives for invalid arguments: one line per problem."""
    lines = [f"Invalid arguments for tool {tool_name!r}:" if tool_name else "Invalid arguments:"]
    for err in errors:
        loc = ".".join(map(str, err.get("loc", ()))) or "(arguments)"
        msg = err.get("msg", "invalid value")
        if "input" in err and err.get("type") not in ("missing",):
            lines.append(f"- {loc}: {msg} (got {_short(err['input'])})")
        else:
            lines.append(f"- {loc}: {msg}")
    if expected is not None:
        lines.append(f"Expected parameters: {', '.join(expected) if expected else '(none)'}.")
    lines.append("Fix these arguments and call the tool again.")
    return "\n".join(lines)


def _pydantic_errors(
    e: pydantic.ValidationError, raw: list[Any] | None = None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for err in raw if raw is not None else e.errors(include_url=False, include_context=False):
        item: dict[str, Any] = {"loc": err["loc"], "msg": err["msg"], "type": err["type"]}
        if err["type"] == "missing":
            item["msg"] = "missing required argument"
        elif err["type"] == "extra_forbidden":
            item["msg"] = "unknown argument"
            item["input"] = err.get("input")
        else:
            item["input"] = err.get("input")
        out.append(item)
    return out


def _fields_validator(model: type[BaseModel]) -> SchemaValidator | None:
    """A validator of `model`'s fields alone, when the model is nothing more (no model
    validators, custom __init__ or post-init): it gives ``(values, extra, fields_set)``
    without building an instance, the same values and errors, in about half the time.
    None when the model's core schema is not of that shape."""
    schema: Any = model.__pydantic_core_schema__
    definitions: Any = None
    if schema.get("type") == "definitions":
        definitions, schema = schema, schema.get("schema")
    if (
        not isinstance(schema, dict)
        or schema.get("type") != "model"
        or schema.get("custom_init")
        or schema.get("root_model")
        or schema.get("post_init")
        or schema.get("schema", {}).get("type") != "model-fields"
    ):
        return None
    fields = schema["schema"]
    if definitions is not None:
        fields = {**definitions, "schema": fields}
    try:
        return SchemaValidator(fields, schema.get("config"))
    except Exception:  # a schema pydantic-core will not take on its own: use the model's
        return None


_PARSE_ERRORS = frozenset(("json_invalid", "model_type", "model_attributes_type"))


class ModelArgumentsValidator:
    """Validator over a pydantic model generated from a function signature."""

    __slots__ = (
        "_field_to_param",
        "_fields_only",
        "_identity",
        "_json_fields",
        "_null_defaults",
        "_validator",
        "expected",
        "model",
        "tool_name",
    )

    def __init__(
        self,
        model: type[BaseModel],
        *,
        tool_name: str,
        field_to_param: dict[str, str],
        json_fields: frozenset[str] = frozenset(),
        null_defaults: frozenset[str] = frozenset(),
    ) -> None:
        self.model = model
        self.tool_name = tool_name
        fields_validator = _fields_validator(model)
        self._fields_only = fields_validator is not None
        """Whether `_validator` checks the fields alone (see `_fields_validator`)."""
        self._validator: Any = (
            fields_validator if fields_validator is not None else model.__pydantic_validator__
        )
        self._field_to_param = field_to_param
        self._identity = all(k == v for k, v in field_to_param.items())
        self._json_fields = json_fields
        self._null_defaults = null_defaults
        """Parameters whose default applies when the model sends null (strict-mode schemas)."""
        self.expected = [f.alias or n for n, f in model.model_fields.items()]

    def _kwargs(self, validated: Any) -> dict[str, Any]:
        if self._fields_only:  # (values, extra, fields set); values is a new dict
            values, extra, _ = validated
            if self._identity:
                return values | extra if extra else values  # type: ignore[no-any-return]
        else:  # a model instance
            values = validated.__dict__
            extra = validated.__pydantic_extra__
            if self._identity:
                return values | extra if extra else dict(values)  # type: ignore[no-any-return]
        out = {self._field_to_param[k]: v for k, v in values.items()}
        if extra:
            out.update(extra)
        return out

    def _fail(
        self, e: pydantic.ValidationError, raw: list[Any] | None = None
    ) -> ToolArgumentsError:
        errors = _pydantic_errors(e, raw)
        return ToolArgumentsError(
            format_errors(self.tool_name, errors, self.expected),
            tool_name=self.tool_name,
            errors=errors,
        )

    def validate_json(self, raw: str | bytes) -> dict[str, Any]:
        """Parse and validate the model's raw argument string in one pass (repairing if needed)."""
        if not raw or len(raw) > MAX_ARGUMENTS_BYTES:
            return self.validate_python(parse_arguments(raw, tool_name=self.tool_name))
        try:
            return self._kwargs(self._validator.validate_json(raw))
        except pydantic.ValidationError as e:
            errs = e.errors(include_url=False, include_context=False)
            if not self._parse_may_help(errs):
                raise self._fail(e, errs) from None
        return self.validate_python(parse_arguments(raw, tool_name=self.tool_name))

    def _parse_may_help(self, errs: list[Any]) -> bool:
        """Whether the errors of the one-pass validation may go once the string is parsed
        (repaired, double-encoded fields decoded, nulls dropped) and validated as a dict."""
        json_fields = self._json_fields
        for err in errs:
            kind = err["type"]
            loc = err["loc"]
            if (
                kind in _PARSE_ERRORS
                or not loc
                or (loc[0] in json_fields and isinstance(err.get("input"), str))
                or (err.get("input", 0) is None and kind != "missing")
            ):
                return True
        return False

    def validate_python(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Validate an already-parsed dict of arguments."""
        if not isinstance(data, Mapping):
            raise ToolArgumentsError(
                f"The arguments must be a JSON object, got {type(data).__name__}.",
                tool_name=self.tool_name,
            )
        if self._json_fields:
            data = _preparse_json_strings(data, self._json_fields)
        if self._null_defaults:
            data = {k: v for k, v in data.items() if v is not None or k not in self._null_defaults}
        try:
            return self._kwargs(self._validator.validate_python(data))
        except pydantic.ValidationError as e:
            retried = self._retry_without_nulls(data, e)
            if retried is not None:
                return retried
            raise self._fail(e) from None
        except RecursionError:
            raise ToolArgumentsError(
                "The arguments are nested too deeply. Send a flatter JSON object.",
                tool_name=self.tool_name,
            ) from None

    def _retry_without_nulls(
        self, data: Mapping[str, Any], error: pydantic.ValidationError
    ) -> dict[str, Any] | None:
        """Strict-mode schemas make optional nested fields nullable: a `null` the model sent
        for a field that has a default means "use the default". Drop those nulls and try
        again; None when that does not help (the original errors are then reported)."""
        errs = error.errors(include_url=False, include_context=False)
        locs = [e["loc"] for e in errs if e.get("input", 0) is None and e["type"] != "missing"]
        if not locs or len(locs) != len(errs):
            return None
        cleaned: Any = dict(data)
        for loc in locs:
            cleaned = _without(cleaned, loc)
            if cleaned is None:
                return None
        try:
            return self._kwargs(self._validator.validate_python(cleaned))
        except pydantic.ValidationError:
            return None


def _without(data: Any, loc: tuple[Any, ...]) -> Any:
    """A copy of `data` with the key at path `loc` removed (None if the path is not found)."""
    head, rest = loc[0], loc[1:]
    if isinstance(data, Mapping):
        if head not in data:
            return None
        out = dict(data)
        if not rest:
            del out[head]
            return out
        inner = _without(out[head], rest)
        if inner is None:
            return None
        out[head] = inner
        return out
    if isinstance(data, list) and isinstance(head, int) and rest and 0 <= head < len(data):
        inner = _without(data[head], rest)
        if inner is None:
            return None
        items = list(data)
        items[head] = inner
        return items
    return None


def _preparse_json_strings(data: Mapping[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    out = dict(data)
    for key in keys:
        value = out.get(key)
        if isinstance(value, str) and value[:1] in ("[", "{") and not nested_deeper_than(value):
            try:
                out[key] = json.loads(value)
            except (ValueError, RecursionError):
                pass
    return out


def _types_of(schema: Mapping[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)}
    return set()


class JsonSchemaArgumentsValidator:
    """Validator for a plain JSON Schema (Draft 2020-12), with the documented coercions."""

    __slots__ = (
        "_defaults",
        "_extra_allowed",
        "_plain",
        "_properties",
        "_required_defaults",
        "_validator",
        "schema",
        "tool_name",
    )

    def __init__(self, schema: Mapping[str, Any], *, tool_name: str) -> None:
        self.schema = dict(schema)
        self.tool_name = tool_name
        import jsonschema  # loaded when first needed (import time)

        cls = jsonschema.validators.validator_for(
            self.schema, default=jsonschema.Draft202012Validator
        )
        try:
            cls.check_schema(self.schema)
        except jsonschema.SchemaError as e:
            raise ToolCardError(
                f"the input schema of tool {tool_name!r} is not valid JSON Schema: {e.message}"
            ) from e
        self._validator = cls(self.schema, format_checker=None)
        props = self.schema.get("properties")
        self._properties: dict[str, Any] = dict(props) if isinstance(props, Mapping) else {}
        self._defaults = {
            k: v["default"]
            for k, v in self._properties.items()
            if isinstance(v, Mapping) and "default" in v
        }
        required = self.schema.get("required")
        self._required_defaults = {
            k: v
            for k, v in self._defaults.items()
            if v is not None and isinstance(required, list) and k in required
        }
        extra = self.schema.get("additionalProperties")
        # Keys the schema does not name are refused (a misspelt argument gets a clear error)
        # only when it names some: `{"type": "object"}` alone, as many MCP servers declare,
        # accepts any, and patternProperties are left to the schema validator.
        self._extra_allowed = (
            extra is True
            or isinstance(extra, Mapping)
            or "patternProperties" in self.schema
            or (extra is None and not isinstance(props, Mapping))
        )
        self._plain = _PlainSchema.of(self.schema, cls, self._required_defaults)
        """The fast path's tables; None when the schema is not plain (see `_PlainSchema`)."""

    def validate_json(self, raw: str | bytes) -> dict[str, Any]:
        """Parse (with repair) and validate the model's raw argument string."""
        return self.validate_python(parse_arguments(raw, tool_name=self.tool_name))

    def validate_python(self, data: Mapping[str, Any] | None) -> dict[str, Any]:
        """Coerce and validate a dict of arguments, then fill defaults.

        `default` is an annotation: what the model sent is validated, and only then are
        the defaults of the properties it left out (or sent as null) filled in, so a
        default outside its own schema never fails a valid call. A null default means
        "absent": nothing is filled in. A required property with a default is filled before
        validation (the model may leave it out)."""
        if data is None:
            data = {}
        plain = self._plain
        if plain is not None and type(data) is dict:
            out = plain.validate(data, self._extra_allowed)
            if out is not None:
                return out
        return self._validate_slow(data)

    def _validate_slow(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The general path: coercion, the schema validator, error reports."""
        if not isinstance(data, Mapping):
            raise ToolArgumentsError(
                f"The arguments must be a JSON object, got {type(data).__name__}.",
                tool_name=self.tool_name,
            )
        errors: list[dict[str, Any]] = []
        if not self._extra_allowed and self._properties is not None:
            for key in data:
                if key not in self._properties:
                    errors.append(
                        {"loc": (key,), "msg": "unknown argument", "type": "extra_forbidden"}
                    )
        out = {k: v for k, v in data.items() if k not in self._defaults or v is not None}
        for k, v in self._required_defaults.items():
            if k not in out:
                out[k] = copy.deepcopy(v)
        try:
            out = _coerce(out, self.schema, self.schema)
            for err in self._validator.iter_errors(out):
                loc = tuple(err.absolute_path)
                if err.validator == "required":
                    missing = err.message.split("'")[1] if "'" in err.message else err.message
                    errors.append(
                        {
                            "loc": (*loc, missing),
                            "msg": "missing required argument",
                            "type": "missing",
                        }
                    )
                elif (
                    err.validator == "additionalProperties" and not loc and not self._extra_allowed
                ):
                    continue  # reported above, one line per key
                else:
                    errors.append(
                        {
                            "loc": loc,
                            "msg": err.message
                            if len(err.message) < 200
                            else err.message[:197] + "...",
                            "type": str(err.validator),
                            "input": err.instance,
                        }
                    )
        except RecursionError:
            raise ToolArgumentsError(
                "The arguments are nested too deeply. Send a flatter JSON object.",
                tool_name=self.tool_name,
            ) from None
        if errors:
            raise ToolArgumentsError(
                format_errors(self.tool_name, errors, list(self._properties)),
                tool_name=self.tool_name,
                errors=errors,
            )
        for k, v in self._defaults.items():
            if k not in out and v is not None:
                out[k] = copy.deepcopy(v)
        _fill_null_defaults(data, out, self.schema, self.schema)
        return dict(out)


_PLAIN_ROOT_KEYWORDS = frozenset(
    (
        "type",
        "properties",
        "required",
        "additionalProperties",
        "title",
        "description",
        "examples",
        "$comment",
        "$schema",
    )
)
_PLAIN_KEYWORDS = frozenset(
    ("type", "enum", "format", "title", "description", "default", "examples", "$comment")
)
_PLAIN_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset((str,)),
    "integer": frozenset((int,)),
    "number": frozenset((int, float)),
    "boolean": frozenset((bool,)),
}
_UNKNOWN: Any = object()


def _atomic(value: Any) -> bool:
    """Whether `copy.deepcopy(value)` is `value` itself (no copy needed)."""
    return type(value) in (str, int, float, bool)


class _PlainSchema:
    """The fast path of `JsonSchemaArgumentsValidator` for a flat schema of scalars: an
    object whose properties have one scalar type (string, integer, number, boolean, or
    none at all) and only annotations besides (title, description, default, examples,
    `format`, which is not checked, and `enum` of strings on a string). It accepts only
    arguments that need no coercion and break no rule (every value of its property's
    exact type, no null, no unknown key where refused, every required key present) and
    returns what the general path returns for them; anything else goes that path, the one
    source of coercions and error messages."""

    __slots__ = ("checks", "defaults", "required", "required_defaults")

    def __init__(
        self,
        checks: dict[str, tuple[frozenset[type] | None, frozenset[str] | None]],
        required: tuple[str, ...],
        required_defaults: tuple[tuple[str, Any, bool], ...],
        defaults: tuple[tuple[str, Any, bool], ...],
    ) -> None:
        self.checks = checks
        """Property → (exact Python types accepted or None for any, enum or None)."""
        self.required = required
        self.required_defaults = required_defaults
        """(key, default, atomic) filled before the check, as the general path does."""
        self.defaults = defaults
        """(key, default, atomic) of every non-null default, filled after it."""

    @classmethod
    def of(
        cls, schema: Mapping[str, Any], validator_cls: Any, required_defaults: Mapping[str, Any]
    ) -> _PlainSchema | None:
        """The fast path for `schema`, or None when it is not plain."""
        import jsonschema

        if validator_cls not in (
            jsonschema.Draft4Validator,
            jsonschema.Draft6Validator,
            jsonschema.Draft7Validator,
            jsonschema.Draft201909Validator,
            jsonschema.Draft202012Validator,
        ):
            return None
        if schema.get("type") != "object" or not _PLAIN_ROOT_KEYWORDS.issuperset(schema):
            return None
        if not isinstance(schema.get("additionalProperties", False), bool):
            return None
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(k, str) for k in required):
            return None
        props = schema.get("properties", {})
        if not isinstance(props, Mapping):
            return None
        checks: dict[str, tuple[frozenset[type] | None, frozenset[str] | None]] = {}
        defaults: list[tuple[str, Any, bool]] = []
        for key, sub in props.items():
            if not isinstance(key, str) or not isinstance(sub, Mapping):
                return None
            if not _PLAIN_KEYWORDS.issuperset(sub):
                return None
            kind = sub.get("type")
            if kind is None:
                if "enum" in sub or "format" in sub:
                    return None
                types = None
            elif isinstance(kind, str) and kind in _PLAIN_TYPES:
                types = _PLAIN_TYPES[kind]
            else:
                return None
            enum: frozenset[str] | None = None
            if "enum" in sub:
                members = sub["enum"]
                if kind != "string" or not isinstance(members, list):
                    return None
                if not all(type(m) is str for m in members):
                    return None
                enum = frozenset(members)
            if "format" in sub and kind != "string":
                return None
            checks[key] = (types, enum)
            if "default" in sub and sub["default"] is not None:
                defaults.append((key, sub["default"], _atomic(sub["default"])))
        for key, value in required_defaults.items():
            # filled before validation and coerced there: must pass as is to stay equivalent
            types, enum = checks[key]
            if types is not None and (
                type(value) not in types or (enum is not None and value not in enum)
            ):
                return None
        return cls(
            checks,
            tuple(required),
            tuple((k, v, _atomic(v)) for k, v in required_defaults.items()),
            tuple(defaults),
        )

    def validate(self, data: dict[str, Any], extra_allowed: bool) -> dict[str, Any] | None:
        """The validated arguments, or None when the general path must decide."""
        checks = self.checks
        for key, value in data.items():
            check = checks.get(key, _UNKNOWN)
            if check is _UNKNOWN:
                if extra_allowed:
                    continue
                return None
            if value is None:
                return None
            types, enum = check
            if types is not None and (
                type(value) not in types or (enum is not None and value not in enum)
            ):
                return None
        out = dict(data)
        for key, value, atomic in self.required_defaults:
            if key not in out:
                out[key] = value if atomic else copy.deepcopy(value)
        for key in self.required:
            if key not in out:
                return None
        for key, value, atomic in self.defaults:
            if key not in out:
                out[key] = value if atomic else copy.deepcopy(value)
        return out


def _fill_null_defaults(
    sent: Any, out: Any, schema: Any, root: Mapping[str, Any], depth: int = 0
) -> None:
    """After validation: fill the defaults of nested properties the model sent as null
    (`_coerce` dropped them; strict mode makes every property nullable)."""
    if not isinstance(schema, Mapping) or depth > 64:
        return
    schema = _resolve(schema, root)
    if isinstance(sent, Mapping) and isinstance(out, dict):
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            return
        for k, sub in props.items():
            if k not in sent or not isinstance(sub, Mapping):
                continue
            if k not in out:
                if sent[k] is None and depth and sub.get("default") is not None:
                    out[k] = copy.deepcopy(sub["default"])
            else:
                _fill_null_defaults(sent[k], out[k], sub, root, depth + 1)
    elif isinstance(sent, list) and isinstance(out, list) and len(sent) == len(out):
        items = schema.get("items")
        for a, b in zip(sent, out, strict=True):
            _fill_null_defaults(a, b, items, root, depth + 1)


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            if not isinstance(node, Mapping) or part not in node:
                return schema
            node = node[part]
        return node if isinstance(node, Mapping) else schema
    return schema


_CONSTRAINTS = ("type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref")


def accepts_null(schema: Any, root: Mapping[str, Any] | None = None, depth: int = 0) -> bool:
    """Whether `null` may be valid for `schema`: an unconstrained schema (no type, enum,
    const, combinator or reference) accepts it, and a `$ref` is judged by its target in
    `root` (the document holding the `$defs`; `schema` itself when None). The one rule for
    argument coercion (an optional property sent as null) and for providers' strict forms."""
    if not isinstance(schema, Mapping) or depth > 32:
        return True
    if root is None:
        root = schema
    schema = _resolve(schema, root)
    if not any(key in schema for key in _CONSTRAINTS):
        return True
    if "null" in _types_of(schema) or None in (schema.get("enum") or ()):
        return True
    if "const" in schema and schema["const"] is None:
        return True
    branches = schema.get("anyOf") or schema.get("oneOf") or ()
    return any(accepts_null(b, root, depth + 1) for b in branches)


def _coerce(value: Any, schema: Any, root: Mapping[str, Any], depth: int = 0) -> Any:
    if not isinstance(schema, Mapping) or depth > 64:
        return value
    schema = _resolve(schema, root)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and value is not None:
        non_null = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
        if len(non_null) == 1:
            return _coerce(value, non_null[0], root, depth + 1)
        return value
    types_ = _types_of(schema)
    if isinstance(value, str):
        stripped = value.strip()
        if "integer" in types_ and "string" not in types_:
            try:
                return int(stripped)
            except ValueError:
                return value
        if "number" in types_ and "string" not in types_:
            try:
                number = float(stripped)
            except ValueError:
                return value
            return number
        if (
            ("array" in types_ or "object" in types_)
            and stripped[:1] in ("[", "{")
            and not nested_deeper_than(stripped)
        ):
            try:
                value = json.loads(stripped)
            except (ValueError, RecursionError):
                return value
    elif isinstance(value, float) and "integer" in types_ and value.is_integer():
        return int(value)
    elif (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and "string" in types_
        and not ({"integer", "number"} & types_)
    ):
        return str(value)
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            required = schema.get("required")
            required = required if isinstance(required, list) else ()
            out: dict[str, Any] = {}
            for k, v in value.items():
                sub = props.get(k)
                if v is None and isinstance(sub, Mapping):
                    # OpenAI's strict form makes optional properties required and nullable:
                    # null then means "not given" (the default, filled in after validation,
                    # or absent).
                    if "default" in sub:
                        if k in required and sub["default"] is not None:
                            out[k] = copy.deepcopy(sub["default"])
                        continue
                    if k not in required and not accepts_null(sub, root):
                        continue
                out[k] = _coerce(v, sub, root, depth + 1) if k in props else v
            return out
        return value
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [_coerce(v, items, root, depth + 1) for v in value]
    return value
