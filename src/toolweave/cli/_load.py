"""Loading tools from `MODULE[:OBJECT]` for the command line."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ..tools import Tool, tool, tools_from

__all__ = ["CliError", "load_object", "load_tools", "loaded_module"]


class CliError(Exception):
    """A user error the command line reports in one line (exit code 1)."""


def _import_module(spec: str) -> ModuleType:
    if spec.endswith(".py") or os.sep in spec or "/" in spec:
        path = Path(spec)
        if not path.is_file():
            raise CliError(f"no such file: {spec}")
        name = f"_toolweave_cli_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise CliError(f"cannot load {spec} as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.resolve().parent))
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:
            sys.modules.pop(name, None)
            raise CliError(f"importing {spec} failed: {type(e).__name__}: {e}") from e
        return module
    # like `python -m`: modules in the current directory are importable
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        if e.name and (spec == e.name or spec.startswith(e.name + ".")):
            raise CliError(f"no module named {spec!r} (is it on PYTHONPATH?)") from e
        raise CliError(f"importing {spec!r} failed: {e}") from e
    except Exception as e:
        raise CliError(f"importing {spec!r} failed: {type(e).__name__}: {e}") from e


def loaded_module(target: str) -> ModuleType | None:
    """The module `load_object(target)` imported, when `target` names a whole module (no
    OBJECT); None otherwise. Does not import anything again."""
    if ":" in target:
        return None
    if target.endswith(".py") or os.sep in target or "/" in target:
        return sys.modules.get(f"_toolweave_cli_{Path(target).stem}")
    return sys.modules.get(target)


def load_object(target: str) -> Any:
    """Import `MODULE[:OBJECT]` (MODULE may be a dotted name or a .py file; OBJECT may be
    dotted) and return the object, or the module when there is no OBJECT."""
    module_spec, _, attr = target.partition(":")
    if not module_spec:
        raise CliError(f"expected MODULE[:OBJECT], got {target!r}")
    obj: Any = _import_module(module_spec)
    if attr:
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise CliError(f"{module_spec!r} has no attribute {attr!r}") from None
    return obj


def _as_tools(obj: Any, where: str) -> list[Tool]:
    if isinstance(obj, Tool):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        out: list[Tool] = []
        for item in obj:
            out.extend(_as_tools(item, where))
        return out
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return [tool(obj)]
    if callable(obj) and not inspect.isclass(obj):
        found: list[Tool] = list(tools_from(obj))
        return found if found else [tool(obj)]
    found = list(tools_from(obj))
    if not found:
        raise CliError(f"{where} is not a tool and has no @tool methods")
    return found


def load_tools(target: str) -> list[Tool]:
    """The tools named by `MODULE[:OBJECT]`.

    Without OBJECT: every `Tool` defined at module level (e.g. `@tool` functions). With
    OBJECT: a tool, a list of tools, a plain function (made a tool), or a class/instance
    whose `@tool` methods are collected.
    """
    obj = load_object(target)
    if isinstance(obj, ModuleType) and ":" not in target:
        tools: list[Tool] = []
        seen: set[int] = set()
        for value in vars(obj).values():
            if isinstance(value, Tool) and id(value) not in seen:
                seen.add(id(value))
                tools.append(value)
        if not tools:
            raise CliError(
                f"module {target!r} defines no tools (decorate functions with @tool, "
                "or name an object: MODULE:OBJECT)"
            )
        return tools
    try:
        tools = _as_tools(obj, target)
    except CliError:
        raise
    except Exception as e:
        raise CliError(f"{target}: {e}") from e
    if not tools:
        raise CliError(f"{target} holds no tools")
    names = [t.card.name for t in tools]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CliError(f"{target}: several tools are named {', '.join(dupes)}")
    return tools
