"""`tools_from_openapi`: one `RestfulApi` per operation of an OpenAPI 3.x document."""

from __future__ import annotations

import copy
import importlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..callbacks.framework import CallbackFramework
from ..errors import ErrorCode, ToolCardError
from .card import PLACEHOLDER, RestfulApiCard
from .restful_api import AuthSpec, RestfulApi
from .ssrf import Resolver, SsrfPolicy

__all__ = [
    "MAX_DOCUMENT_NODES",
    "MAX_TOOL_SCHEMA_BYTES",
    "OpenApiOperation",
    "load_openapi",
    "tools_from_openapi",
]

logger = logging.getLogger("toolweave.http")

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch")
_LOCATIONS = {"path": "path", "query": "query", "header": "header"}
_BAD_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _invalid(message: str) -> ToolCardError:
    return ToolCardError(message, code=ErrorCode.RESTFUL_API_CARD_CONFIG_INVALID)


@dataclass(frozen=True)
class OpenApiOperation:
    """One operation of the document, as the `include` callable sees it."""

    operation_id: str | None
    method: str
    path: str
    tags: tuple[str, ...] = ()
    operation: Mapping[str, Any] = field(default_factory=dict)


def _parse_text(text: str, source: str) -> Any:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except ValueError as e:
            raise _invalid(f"{source} is not valid JSON: {e}") from e
        except RecursionError:
            raise _invalid(f"{source} is nested too deeply") from None
    try:
        yaml = importlib.import_module("yaml")
    except ImportError:
        raise _invalid(
            f"{source} looks like YAML; install PyYAML (pip install pyyaml) to read it, "
            "or pass JSON"
        ) from None
    try:
        return yaml.safe_load(text)
    except Exception as e:
        raise _invalid(f"{source} is not valid YAML: {e}") from e


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte: text, not a path
        return False


def load_openapi(spec_or_path: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """Load a document from a dict, a JSON/YAML file path, or JSON/YAML text."""
    if isinstance(spec_or_path, Mapping):
        _check_expanded_size(spec_or_path)
        try:
            doc: Any = copy.deepcopy(dict(spec_or_path))
        except RecursionError:
            raise _invalid("the OpenAPI document is nested too deeply") from None
    elif isinstance(spec_or_path, Path) or (
        isinstance(spec_or_path, str)
        and "\n" not in spec_or_path
        and not spec_or_path.lstrip().startswith("{")
        and _is_file(spec_or_path)
    ):
        path = Path(spec_or_path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise _invalid(f"cannot read OpenAPI document {str(path)!r}: {e}") from e
        doc = _parse_text(text, str(path))
        _check_expanded_size(doc)
    elif isinstance(spec_or_path, str):
        doc = _parse_text(spec_or_path, "the OpenAPI text")
        _check_expanded_size(doc)
    else:
        raise _invalid(f"expected a dict, a path or text, got {type(spec_or_path).__name__}")
    if not isinstance(doc, dict):
        raise _invalid("an OpenAPI document must be an object")
    version = str(doc.get("openapi", ""))
    if not version.startswith("3."):
        raise _invalid(
            f"only OpenAPI 3.x documents are supported (openapi: {version or 'missing'})"
        )
    return doc


MAX_DOCUMENT_NODES = 4_000_000
"""A loaded document may hold at most this many values when shared ones (YAML aliases, a
dict reused in a Python document) are counted at every place they appear."""
MAX_TOOL_SCHEMA_BYTES = 1_000_000
"""The parameters schema of one tool may be at most this long as JSON."""

_MAX_NAME = 64
_MAX_ALL_OF_MERGES = 10_000


def _check_expanded_size(doc: Any) -> None:
    """Refuse a document that is small as written but huge once shared values are followed
    (a YAML alias bomb), or that contains itself (a YAML alias cycle). Each distinct object
    is measured once (post-order, without recursion), so the check is linear in what was
    parsed."""
    sizes: dict[int, int] = {}
    started: set[int] = set()
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, finished = stack.pop()
        children = list(node.values()) if isinstance(node, Mapping) else node
        key = id(node)
        if finished:
            total = 1
            for child in children:
                total += sizes[id(child)] if isinstance(child, (Mapping, list)) else 1
            sizes[key] = min(total, MAX_DOCUMENT_NODES + 1)
            continue
        if key in sizes:
            continue
        if key in started:
            raise _invalid("the OpenAPI document contains itself (a YAML alias cycle); refused")
        started.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if isinstance(c, (Mapping, list)))
    if isinstance(doc, (Mapping, list)) and sizes[id(doc)] > MAX_DOCUMENT_NODES:
        raise _invalid(
            f"the OpenAPI document expands to more than {MAX_DOCUMENT_NODES:,} values "
            "(YAML aliases or shared objects repeated); refused"
        )


def _cut(ref: str) -> dict[str, Any]:
    name = ref.rsplit("/", 1)[-1]
    return {"type": "object", "description": f"(recursive {name}, not expanded)"}


class _Resolver:
    """Looks up local `$ref`s and follows chains of them without recursion."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def lookup(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise _invalid(f"only local $refs are supported, got {ref!r}")
        node: Any = self.root
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise _invalid(f"unresolvable $ref {ref!r}")
        return node

    def deref(self, node: Any, seen: tuple[str, ...] = ()) -> tuple[Any, tuple[str, ...]]:
        """`node` with the `$ref` chain at its top followed (the keywords next to each `$ref`
        win over its target's); returns it, unresolved inside, and the refs followed. A chain
        that comes back to a ref already in `seen` ends in the cut object."""
        layers: list[dict[str, Any]] = []
        chain = list(seen)
        while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            layers.append({k: v for k, v in node.items() if k != "$ref"})
            if ref in chain:
                node = _cut(ref)
                break
            chain.append(ref)
            node = self.lookup(ref)
        for layer in reversed(layers):
            if isinstance(node, Mapping):
                node = {**node, **layer}
        return node, tuple(chain[len(seen) :])


class _SchemaBuilder:
    """Builds the schemas of one tool. A definition is inlined where it is first used;
    later uses point to one shared copy under `$defs`, so the result grows with the number
    of distinct definitions, never with the number of paths through them. A reference back
    into a definition being built is cut (`(recursive Name, not expanded)`)."""

    def __init__(self, resolver: _Resolver) -> None:
        self.resolver = resolver
        self.defs: dict[str, Any] = {}
        self._built: dict[str, Any] = {}
        self._names: dict[str, str] = {}
        self._stack: tuple[str, ...] = ()
        self.merged: dict[int, dict[str, Any]] = {}  # by id of a built allOf part
        self.merges = 0

    def build(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.build(v) for v in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            siblings = {k: self.build(v) for k, v in node.items() if k != "$ref"}
            target = self._ref(ref)
            return {**target, **siblings} if isinstance(target, dict) else target
        return {k: self.build(v) for k, v in node.items()}

    def inline(self, node: Any) -> Any:
        """`node` (already built) with a top-level `$defs` reference replaced by its body."""
        if isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            name = node["$ref"].removeprefix("#/$defs/")
            if name in self.defs:
                rest = {k: v for k, v in node.items() if k != "$ref"}
                body = self.defs[name]
                return {**body, **rest} if rest and isinstance(body, Mapping) else body
        return node

    def _ref(self, ref: str) -> Any:
        if ref in self._stack:
            return _cut(ref)
        if ref in self._built:
            name = self._names.get(ref)
            if name is None:
                base = _BAD_NAME.sub("_", ref.rsplit("/", 1)[-1])[:_MAX_NAME] or "def"
                name, n = base, 2
                while name in self.defs:
                    name, n = f"{base}_{n}", n + 1
                self._names[ref] = name
                self.defs[name] = self._built[ref]
            return {"$ref": f"#/$defs/{name}"}
        target, chain = self.resolver.deref({"$ref": ref}, self._stack)
        saved = self._stack
        self._stack = (*saved, *chain)
        try:
            body = self.build(target)
        finally:
            self._stack = saved
        for followed in chain:
            self._built.setdefault(followed, body)
        return body


def _merge_all_of(schema: dict[str, Any], builder: _SchemaBuilder) -> dict[str, Any]:
    parts = schema.get("allOf")
    if not isinstance(parts, list):
        return schema
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    props: dict[str, Any] = dict(merged.get("properties") or {})
    required: list[str] = list(merged.get("required") or [])
    for part in parts:
        part = builder.inline(part)
        if not isinstance(part, Mapping):
            continue
        done = builder.merged.get(id(part))
        if done is None:
            builder.merges += 1
            if builder.merges > _MAX_ALL_OF_MERGES:
                raise _invalid(
                    f"allOf parts nest too widely to merge (over {_MAX_ALL_OF_MERGES:,})"
                )
            done = builder.merged[id(part)] = _merge_all_of(dict(part), builder)
        part = done
        props.update(part.get("properties") or {})
        required.extend(r for r in part.get("required") or [] if r not in required)
        for key, value in part.items():
            if key not in ("properties", "required"):
                merged.setdefault(key, value)
    merged["properties"] = props
    if required:
        merged["required"] = required
    merged.setdefault("type", "object")
    return merged


def _clean(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {}
    out = {
        k: v
        for k, v in schema.items()
        if k not in ("example", "examples", "xml", "externalDocs", "readOnly", "deprecated")
    }
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _tool_name(op_id: str | None, method: str, path: str, taken: set[str]) -> str:
    base = _BAD_NAME.sub("_", op_id or "").strip("_")
    if not base:
        base = _BAD_NAME.sub("_", f"{method}_{path}").strip("_")
    base = re.sub(r"_+", "_", base)[:64] or method
    name, n = base, 2
    while name in taken:
        suffix = f"_{n}"
        name = base[: 64 - len(suffix)] + suffix
        n += 1
    taken.add(name)
    return name


def _server_url(doc: Mapping[str, Any]) -> str | None:
    servers = doc.get("servers") or []
    if not servers or not isinstance(servers[0], Mapping) or not servers[0].get("url"):
        return None
    server = servers[0]
    url = str(server["url"])
    for name, var in (server.get("variables") or {}).items():
        url = url.replace("{" + name + "}", str(var.get("default", "")))
    return url


def _wanted(include: Any, op: OpenApiOperation, name: str) -> bool:
    if include is None:
        return True
    if callable(include):
        return bool(include(op))
    wanted = {include} if isinstance(include, str) else set(include)
    return bool(wanted & {op.operation_id, name, *op.tags})


def _parameters(resolver: _Resolver, owner: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The `parameters` of a path item or operation, each `$ref` followed."""
    raw = owner.get("parameters")
    out: list[Mapping[str, Any]] = []
    for p in raw if isinstance(raw, list) else []:
        p, _ = resolver.deref(p)
        if isinstance(p, Mapping):
            out.append(p)
    return out


def _body(
    builder: _SchemaBuilder, operation: Mapping[str, Any], where: str
) -> tuple[dict[str, Any], list[str], str | None]:
    body, _ = builder.resolver.deref(operation.get("requestBody"))
    if not body or not isinstance(body, Mapping):
        return {}, [], None
    content: Mapping[str, Any] = body.get("content") or {}
    chosen: tuple[str, Any] | None = None
    for media, entry in content.items():
        m = media.split(";")[0].strip().lower()
        if m == "application/json" or m.endswith("+json"):
            chosen = ("body", entry)
            break
        if m in _FORM_TYPES and chosen is None:
            chosen = ("form", entry)
    if chosen is None:
        logger.warning("%s: request body %s not supported; skipped", where, list(content))
        return {}, [], None
    location, entry = chosen
    raw = entry.get("schema") if isinstance(entry, Mapping) else None
    schema = _merge_all_of(_clean(builder.inline(builder.build(raw or {}))), builder)
    props = schema.get("properties")
    if schema.get("type", "object") != "object" or not isinstance(props, Mapping):
        logger.warning("%s: only object request bodies are supported; skipped", where)
        return {}, [], None
    out = {n: {**_clean(p), "location": location} for n, p in props.items()}
    # properties of an optional body are optional too
    required = [r for r in schema.get("required") or [] if r in out] if body.get("required") else []
    return out, required, location


def tools_from_openapi(
    spec_or_path: Mapping[str, Any] | str | Path,
    base_url: str | None = None,
    include: Iterable[str] | str | Callable[[OpenApiOperation], bool] | None = None,
    auth: AuthSpec | None = None,
    allow_private_network: bool = False,
    *,
    ssrf_policy: SsrfPolicy | None = None,
    timeout: float | None = None,
    callbacks: CallbackFramework | None = None,
    resolver: Resolver | None = None,
) -> list[RestfulApi]:
    """Build one `RestfulApi` per operation of an OpenAPI 3.x document.

    `spec_or_path` is a dict, a JSON/YAML file path, or JSON/YAML text (YAML needs PyYAML).
    `base_url` defaults to `servers[0].url`. `include` keeps operations whose operationId,
    tool name or tag is listed, or for which a callable returns True. Path, query and header
    parameters and JSON or form request bodies become schema properties with their
    `location`; local `$ref`s are resolved (cycles are cut). Tool names come from the
    operationId (sanitised to ^[a-zA-Z0-9_-]{1,64}$), else from method and path, and are
    unique. `auth`, `allow_private_network`, `ssrf_policy`, `timeout`, `callbacks` and
    `resolver` are passed to every tool.
    """
    try:
        return _tools(
            load_openapi(spec_or_path),
            base_url,
            include,
            {
                "auth": auth,
                "allow_private_network": allow_private_network,
                "ssrf_policy": ssrf_policy,
                "timeout": timeout,
                "callbacks": callbacks,
                "resolver": resolver,
            },
        )
    except RecursionError:
        raise _invalid(
            "the OpenAPI document is nested too deeply (or has a $ref chain too long) to import"
        ) from None
    except (AttributeError, TypeError, KeyError, IndexError) as e:
        # a value of the wrong type where the specification says object, list or string
        raise _invalid(f"the OpenAPI document is malformed ({type(e).__name__}: {e})") from e


def _tools(
    doc: dict[str, Any],
    base_url: str | None,
    include: Iterable[str] | str | Callable[[OpenApiOperation], bool] | None,
    options: dict[str, Any],
) -> list[RestfulApi]:
    resolver_ = _Resolver(doc)
    root = base_url or _server_url(doc)
    if not root or not re.match(r"^https?://", root, re.IGNORECASE):
        raise _invalid(
            f"no absolute base URL (servers[0].url is {root!r}); pass base_url="
            if root
            else "the document has no servers; pass base_url="
        )
    root = root.rstrip("/")
    taken: set[str] = set()
    tools: list[RestfulApi] = []
    for path, raw_item in (doc.get("paths") or {}).items():
        item, _ = resolver_.deref(raw_item)
        if not isinstance(item, Mapping):
            continue
        shared = _parameters(resolver_, item)
        for method in _METHODS:
            operation = item.get(method)
            if not isinstance(operation, Mapping):
                continue
            op_id = operation.get("operationId")
            name = _tool_name(op_id, method, path, set(taken))
            op = OpenApiOperation(
                operation_id=op_id,
                method=method.upper(),
                path=path,
                tags=tuple(operation.get("tags") or ()),
                operation=operation,
            )
            if not _wanted(include, op, name):
                continue
            taken.add(name)
            where = f"{method.upper()} {path}"
            builder = _SchemaBuilder(resolver_)
            params: dict[tuple[str, str], Mapping[str, Any]] = {}
            for p in [*shared, *_parameters(resolver_, operation)]:
                if isinstance(p, Mapping) and p.get("name") and p.get("in"):
                    params[(str(p["name"]), str(p["in"]))] = p
            properties: dict[str, Any] = {}
            required: list[str] = []
            for (pname, where_in), p in params.items():
                location = _LOCATIONS.get(where_in)
                if location is None:
                    logger.warning("%s: %s parameter %r not supported", where, where_in, pname)
                    continue
                prop = _clean(builder.inline(builder.build(p.get("schema") or {"type": "string"})))
                if p.get("description"):
                    prop["description"] = p["description"]
                properties[pname] = {**prop, "location": location}
                if p.get("required") or location == "path":
                    required.append(pname)
            for placeholder in PLACEHOLDER.findall(path):
                if placeholder not in properties:  # undeclared in the document: a string
                    properties[placeholder] = {"type": "string", "location": "path"}
                    required.append(placeholder)
            body_props, body_required, _ = _body(builder, operation, where)
            for bname, bprop in body_props.items():
                if bname in properties:
                    logger.warning("%s: body property %r clashes with a parameter", where, bname)
                    continue
                properties[bname] = bprop
                if bname in body_required:
                    required.append(bname)
            schema: dict[str, Any] = {"type": "object", "properties": properties}
            if required:
                schema["required"] = required
            if builder.defs:
                schema["$defs"] = builder.defs
            size = len(json.dumps(schema))
            if size > MAX_TOOL_SCHEMA_BYTES:
                raise _invalid(
                    f"{where}: the parameters schema is {size:,} bytes as JSON, over the "
                    f"limit of {MAX_TOOL_SCHEMA_BYTES:,}; use include= to leave it out"
                )
            text = "\n\n".join(
                str(t) for t in (operation.get("summary"), operation.get("description")) if t
            )
            card_kwargs: dict[str, Any] = {
                "name": name,
                "description": text or where,
                "input_params": schema,
                "url": root + path,
                "method": method.upper(),
                "allow_private_network": options["allow_private_network"],
                "ssrf_policy": options["ssrf_policy"],
                "metadata": {
                    "openapi": {
                        "operationId": op_id,
                        "method": method.upper(),
                        "path": path,
                        "tags": list(op.tags),
                    }
                },
            }
            if options["timeout"] is not None:
                card_kwargs["timeout"] = options["timeout"]
            card = RestfulApiCard(**card_kwargs)
            tools.append(
                RestfulApi(
                    card,
                    callbacks=options["callbacks"],
                    auth=options["auth"],
                    resolver=options["resolver"],
                )
            )
    return tools
