"""The package's layering, read from its source: no import circle anywhere in src/, and no
provider module (one that defines a chat model class) imported by another module of
providers/ (the shared private modules, `_base`, `_http`, `_sse`, ..., and the layers over
the protocol, `constrained`, `probe`, are fine).

Imports are read statically, so the ones inside functions and under `TYPE_CHECKING` count:
a lazy import is still a dependency, it only hides the circle from the interpreter."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import toolweave
from toolweave.chat.model import BaseChatModel

SRC = Path(toolweave.__file__).resolve().parent.parent
PACKAGE = "toolweave"
Graph = dict[str, set[str]]


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in (SRC / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _imports(name: str, path: Path, is_package: bool, modules: set[str]) -> set[str]:
    """The package's modules `name` imports: the module an import statement names (a
    submodule when `from pkg import submodule`), not the packages around it."""
    here = name.split(".") if is_package else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in modules else target)
    return {m for m in out if m in modules and m != name}


def import_graph() -> Graph:
    modules = _modules()
    names = set(modules)
    return {name: _imports(name, *modules[name], names) for name in modules}


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def provider_modules(graph: Graph) -> set[str]:
    """The public modules of providers/ that define a chat model class (a provider's own
    module; `_base` defines the shared base class)."""
    out = set()
    for name in graph:
        if not name.startswith(f"{PACKAGE}.providers.") or name.rsplit(".", 1)[1][0] == "_":
            continue
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, BaseChatModel):
                out.add(name)
    return out


def test_the_walker_sees_imports_and_circles() -> None:
    graph = import_graph()
    assert "toolweave.providers._base" in graph["toolweave.providers.openai_chat"]
    assert "toolweave.tools._deadline" in graph["toolweave.tools.base"]  # `from . import x`
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_package() -> None:
    found = cycles(import_graph())
    assert not found, "import circles (each a set of modules that import each other):\n" + (
        "\n".join(" <-> ".join(c) for c in found)
    )


def test_no_provider_module_imports_another_providers_module() -> None:
    graph = import_graph()
    providers = provider_modules(graph)
    assert {"toolweave.providers.openai_chat", "toolweave.providers.gemini_chat"} <= providers
    offending = {
        name: sorted(graph[name] & providers)
        for name in graph
        if name.startswith(f"{PACKAGE}.providers.") and graph[name] & providers
    }
    assert not offending, f"provider modules imported inside providers/: {offending}"
