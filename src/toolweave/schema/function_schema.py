"""From a Python signature and docstring to a canonical JSON Schema and a compiled validator.

The schema and the validator come from one pydantic model per function, so what the model is
told and what is accepted can never disagree. Declaring a tool is cheap: for parameters of
the common types (str, int, float, bool, None, Any, lists, sets, tuples, str-keyed dicts,
literals and unions of these, with JSON defaults) the schema is written directly, exactly
as pydantic writes it (tests/core/test_function_schema_fast.py holds the two equal), and the
model is only built when the tool validates its first call. Other types go through pydantic
at declaration.
"""

from __future__ import annotations

import inspect
import types
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import PydanticCustomError

from ..context import ToolContext
from ..errors import ToolCardError
from .docstrings import parse_docstring
from .markers import Injected, P
from .validation import ModelArgumentsValidator

__all__ = ["FunctionSchema", "InjectedParam", "function_schema"]

_SKIP_FIRST = {"self", "cls"}


class ToolJsonSchema(GenerateJsonSchema):
    """JSON Schema generation for tools: no property titles, no root title."""

    def _named_required_fields_schema(self, named_required_fields: Any) -> JsonSchemaValue:
        s = super()._named_required_fields_schema(named_required_fields)
        for prop in s.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        return s


@dataclass(frozen=True, slots=True)
class InjectedParam:
    """A parameter hidden from the model and filled at call time."""

    name: str
    key: str
    kind: Literal["context", "value"]
    has_default: bool = False
    default: Any = None


@dataclass(slots=True)
class FunctionSchema:
    """Everything needed to describe and call a function as a tool. `validator` is built on
    first use when the schema did not need the pydantic model."""

    description: str
    json_schema: dict[str, Any]
    build_validator: Callable[[], ModelArgumentsValidator]
    positional: tuple[str, ...] = ()
    """Parameters passed positionally (only when the function has `*args`)."""
    var_positional: str | None = None
    var_keyword: bool = False
    injected: tuple[InjectedParam, ...] = ()
    renamed: dict[str, str] = field(default_factory=dict)
    """Model-facing name -> Python parameter name, for parameters renamed with `P(name=...)`."""
    _validator: ModelArgumentsValidator | None = None

    @property
    def validator(self) -> ModelArgumentsValidator:
        """The compiled validator (the pydantic model is built on first use)."""
        if self._validator is None:
            self._validator = self.build_validator()
        return self._validator


def _reject_bool_int(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer, not a boolean")
    return value


def _reject_bool_float(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "Input should be a valid number, not a boolean")
    return value


_NO_BOOL = {int: BeforeValidator(_reject_bool_int), float: BeforeValidator(_reject_bool_float)}


def _strict_bools(tp: Any) -> Any:
    """Apply the coercion table's strict rules: `bool` accepts only true/false (not `"true"`
    or 1), and `int`/`float` do not accept booleans (pydantic's lax mode would)."""
    if tp is bool:
        return Annotated[bool, Strict()]
    if tp is int or tp is float:
        return Annotated[tp, _NO_BOOL[tp]]
    origin = get_origin(tp)
    if origin is None:
        return tp
    args = get_args(tp)
    if origin is Annotated:
        if args[0] is int or args[0] is float:
            # the bool check goes last (outermost) so constraints still apply to the number
            return Annotated[(args[0], *tp.__metadata__, _NO_BOOL[args[0]])]  # type: ignore[attr-defined]
        return Annotated[(_strict_bools(args[0]), *tp.__metadata__)]  # type: ignore[attr-defined]
    if origin is Literal:
        return tp
    if origin in (Union, types.UnionType):
        return Union[tuple(_strict_bools(a) for a in args)]  # noqa: UP007
    new_args = tuple(a if a is Ellipsis else _strict_bools(a) for a in args)
    if new_args == args:
        return tp
    try:
        return origin[new_args]
    except TypeError:
        return tp


def _split_annotated(tp: Any) -> tuple[Any, list[Any]]:
    if get_origin(tp) is Annotated:
        return tp, list(tp.__metadata__)
    return tp, []


def _is_optional(tp: Any) -> bool:
    base = get_args(tp)[0] if get_origin(tp) is Annotated else tp
    return get_origin(base) in (Union, types.UnionType) and type(None) in get_args(base)


def _needs_json_preparse(tp: Any) -> bool:
    """Whether a string value for this type is worth trying as JSON (double-encoded input)."""
    base = get_args(tp)[0] if get_origin(tp) is Annotated else tp
    origin = get_origin(base)
    if origin in (Union, types.UnionType):
        return any(_needs_json_preparse(a) for a in get_args(base) if a is not type(None))
    if base is str or origin is Literal:
        return False
    if origin in (list, set, frozenset, tuple, dict) or base in (list, dict, set, tuple):
        return True
    return isinstance(base, type) and (
        issubclass(base, BaseModel)
        or hasattr(base, "__dataclass_fields__")
        or typing.is_typeddict(base)
    )


class _Unsupported(Exception):
    """A type the direct schema writer leaves to pydantic."""


_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    None: "null",
}


def _type_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema pydantic generates for `tp` (keys sorted, as pydantic sorts them), for
    the common types only; raises `_Unsupported` otherwise."""
    if tp is Any:
        return {}
    try:
        scalar = _SCALARS.get(tp)
    except TypeError:  # an unhashable annotation
        raise _Unsupported from None
    if scalar is not None:
        return {"type": scalar}
    origin = get_origin(tp)
    if origin is None:
        if tp is list or tp is tuple:
            return {"items": {}, "type": "array"}
        if tp is dict:
            return {"additionalProperties": True, "type": "object"}
        if tp is set or tp is frozenset:
            return {"items": {}, "type": "array", "uniqueItems": True}
        raise _Unsupported
    args = get_args(tp)
    if origin is list and len(args) == 1:
        return {"items": _type_schema(args[0]), "type": "array"}
    if origin in (set, frozenset) and len(args) == 1:
        return {"items": _type_schema(args[0]), "type": "array", "uniqueItems": True}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"items": _type_schema(args[0]), "type": "array"}
    if origin is dict and len(args) == 2 and args[0] is str:
        values = True if args[1] is Any else _type_schema(args[1])
        return {"additionalProperties": values, "type": "object"}
    if origin is Literal:
        return _literal_schema(args)
    if origin is Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        if len(members) == len(args):
            return {"anyOf": [_type_schema(a) for a in args]}
        if len(members) == 1:  # Optional: pydantic puts null last
            return {"anyOf": [_type_schema(members[0]), {"type": "null"}]}
    raise _Unsupported


def _literal_schema(values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {type(v) for v in values}
    if len(set(values)) != len(values) or not kinds <= {str, int, bool}:
        raise _Unsupported
    if len(kinds) > 1:
        if bool in kinds or len(values) == 1:
            raise _Unsupported
        return {"enum": list(values)}
    kind = _SCALARS[kinds.pop()]
    if len(values) == 1:
        return {"const": values[0], "type": kind}
    if kind == "boolean":
        raise _Unsupported
    return {"enum": list(values), "type": kind}


def _json_default(value: Any) -> Any:
    """A default as pydantic writes it into the schema (JSON values only)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _Unsupported
        return value
    if type(value) in (list, tuple):
        return [_json_default(v) for v in value]
    if type(value) in (set, frozenset, dict) and not value:
        return [] if type(value) is not dict else {}
    raise _Unsupported


def _field_name(name: str, index: int) -> str:
    return name if name.isidentifier() and not name.startswith("_") else f"param_{index}"


def function_schema(
    func: Callable[..., Any],
    *,
    name: str,
    description: str | None = None,
    auto_extract: bool = True,
) -> FunctionSchema:
    """Build the canonical schema and validator for `func`.

    Rules (see docs/declaring-tools.md): `self`/`cls` are skipped; `ToolContext` and
    `Injected` parameters are hidden; a parameter with a default, or typed `T | None`, is not
    required (the latter defaults to None); `*args` becomes an array property named after it;
    `**kwargs` lets the schema accept extra keys, passed through as keyword arguments.
    Parameter descriptions come from `P`, then `Field(description=...)`, then a plain string
    in `Annotated`, then the docstring.
    """
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as e:
        raise ToolCardError(f"cannot read the signature of {func!r}: {e}") from e
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as e:
        raise ToolCardError(
            f"cannot resolve the type hints of tool {name!r}: {e}. "
            "Define the referenced types at module level or import them."
        ) from e
    if auto_extract:
        # parse_docstring cleans the text itself; getdoc (which cleans it too) only for the
        # docstring a method inherits
        raw = getattr(func, "__doc__", None)
        doc = parse_docstring(raw if isinstance(raw, str) else inspect.getdoc(func))
    else:
        doc = parse_docstring(None)
    fields: dict[str, Any] = {}
    positional: list[str] = []
    var_positional: str | None = None
    var_keyword = False
    injected: list[InjectedParam] = []
    renamed: dict[str, str] = {}
    field_to_param: dict[str, str] = {}
    json_fields: set[str] = set()
    null_defaults: set[str] = set()
    direct: dict[str, Any] | None = {}  # the schema's properties, written without pydantic
    direct_required: list[str] = []
    params = list(sig.parameters.values())
    for index, param in enumerate(params):
        if index == 0 and param.name in _SKIP_FIRST and param.annotation is inspect.Parameter.empty:
            continue
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            var_keyword = True
            continue
        tp = hints.get(param.name, Any)
        base, metadata = _split_annotated(tp)
        inner = get_args(base)[0] if metadata else base
        if inner is ToolContext or any(m is ToolContext for m in metadata):
            injected.append(InjectedParam(param.name, param.name, "context"))
            continue
        marker = next((m for m in metadata if isinstance(m, Injected)), None) if metadata else None
        if marker is not None:
            has_default = param.default is not inspect.Parameter.empty
            injected.append(
                InjectedParam(
                    param.name,
                    marker.key or param.name,
                    "value",
                    has_default,
                    param.default if has_default else None,
                )
            )
            continue
        p_marker: P | None = None
        field_desc: str | None = None
        str_desc: str | None = None
        if metadata:
            p_marker = next((m for m in metadata if isinstance(m, P)), None)
            field_desc = next(
                (m.description for m in metadata if isinstance(m, FieldInfo) and m.description),
                None,
            )
            str_desc = next((m for m in metadata if isinstance(m, str)), None)
        default_desc = param.default.description if isinstance(param.default, FieldInfo) else None
        desc = (
            (p_marker.description if p_marker else None)
            or field_desc
            or default_desc
            or str_desc
            or doc.params.get(param.name)
        )
        model_name = (p_marker.name if p_marker and p_marker.name else None) or param.name
        if model_name != param.name:
            renamed[model_name] = param.name
        if metadata:
            kept = [m for m in metadata if not isinstance(m, (P, str))]
            tp = Annotated[(inner, *kept)] if kept else inner
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            var_positional = param.name
            tp = list[tp] if tp is not Any else list[Any]  # type: ignore[valid-type]
            default: Any = []
        elif isinstance(param.default, FieldInfo):
            # `x: int = Field(3, ge=0)`: the FieldInfo carries the default and constraints
            field_default = param.default
            default = (
                ...
                if field_default.is_required()
                else field_default.get_default(call_default_factory=True)
            )
            if field_default.metadata:
                tp = Annotated[(tp, *field_default.metadata)]
        elif param.default is not inspect.Parameter.empty:
            default = param.default
        elif _is_optional(tp) and not (p_marker and p_marker.required):
            default = None
        else:
            default = ...
        if p_marker is not None and p_marker.required is False and default is ...:
            default = None
            tp = tp | None
        if param.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            positional.append(param.name)
        fname = _field_name(param.name, index)
        field_to_param[fname] = param.name
        if _needs_json_preparse(tp):
            json_fields.add(model_name)
        if default is not ... and default is not None and not _is_optional(tp):
            null_defaults.add(model_name)
        info_kwargs: dict[str, Any] = {"alias": model_name}
        if desc:
            info_kwargs["description"] = desc
        if direct is not None:
            try:
                if isinstance(param.default, FieldInfo) or get_origin(tp) is Annotated:
                    raise _Unsupported
                prop = _type_schema(tp)
                if default is ...:
                    direct_required.append(model_name)
                else:
                    prop["default"] = _json_default(default)
                if desc:
                    prop["description"] = desc
                direct[model_name] = dict(sorted(prop.items()))
            except _Unsupported:
                direct = None
        fields[fname] = (tp, default, info_kwargs)
    config = ConfigDict(
        extra="allow" if var_keyword else "forbid",
        coerce_numbers_to_str=True,
        validate_by_alias=True,
        validate_by_name=False,
        arbitrary_types_allowed=False,
        defer_build=False,
    )

    def build_model() -> type[BaseModel]:
        try:
            definitions = {
                fname: (
                    _strict_bools(tp),
                    Field(**info) if default is ... else Field(default, **info),
                )
                for fname, (tp, default, info) in fields.items()
            }
            return pydantic.create_model(  # type: ignore[no-any-return, call-overload]
                f"{name}_arguments", __config__=config, **definitions
            )
        except pydantic.PydanticUserError as e:
            raise ToolCardError(f"cannot build a schema for tool {name!r}: {e}") from e
        except pydantic.PydanticSchemaGenerationError as e:
            raise ToolCardError(
                f"cannot build a schema for tool {name!r}: a parameter type is not supported: {e}"
            ) from e

    model: type[BaseModel] | None = None
    if direct is not None and len(direct) == len(fields):  # (two parameters, one alias: pydantic)
        ordered: dict[str, Any] = {"type": "object", "properties": direct}
        if direct_required:
            ordered["required"] = direct_required
    else:
        model = build_model()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                schema = model.model_json_schema(schema_generator=ToolJsonSchema, by_alias=True)
        except pydantic.PydanticUserError as e:
            raise ToolCardError(f"cannot build a schema for tool {name!r}: {e}") from e
        except pydantic.PydanticSchemaGenerationError as e:
            raise ToolCardError(
                f"cannot build a schema for tool {name!r}: a parameter type is not supported: {e}"
            ) from e
        schema.pop("title", None)
        schema.pop("additionalProperties", None)
        ordered = {"type": "object", "properties": schema.pop("properties", {})}
        if "required" in schema:
            ordered["required"] = schema.pop("required")
        ordered.update(schema)
    ordered["additionalProperties"] = var_keyword
    if var_positional is None:
        # Without *args only positional-only parameters must be passed positionally.
        positional = [
            n for n in positional if sig.parameters[n].kind is inspect.Parameter.POSITIONAL_ONLY
        ]

    def build_validator() -> ModelArgumentsValidator:
        return ModelArgumentsValidator(
            model or build_model(),
            tool_name=name,
            field_to_param=field_to_param,
            json_fields=frozenset(json_fields),
            null_defaults=frozenset(null_defaults),
        )

    return FunctionSchema(
        description=description if description is not None else doc.description,
        json_schema=ordered,
        build_validator=build_validator,
        positional=tuple(positional),
        var_positional=var_positional,
        var_keyword=var_keyword,
        injected=tuple(injected),
        renamed=renamed,
    )
