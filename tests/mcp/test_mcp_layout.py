"""toolweave.mcp's own modules import each other without a cycle (TYPE_CHECKING imports
included), and use no private module of the SDK."""

from __future__ import annotations

import ast
from pathlib import Path

import toolweave.mcp

PACKAGE = Path(toolweave.mcp.__file__).parent


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                out.add(node.module.split(".")[0])
            elif node.level == 1:
                out.update(a.name for a in node.names)
            elif node.level == 0 and node.module:
                out.add("sdk:" + node.module)
        elif isinstance(node, ast.Import):
            out.update("sdk:" + a.name for a in node.names)
    return out


def test_no_import_cycle_inside_toolweave_mcp() -> None:
    modules = {p.stem: _imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    graph = {m: {d for d in deps if d in modules} for m, deps in modules.items()}
    assert "client" not in graph["tool"]

    def visit(node: str, path: list[str]) -> None:
        assert node not in path, f"import cycle: {' -> '.join([*path, node])}"
        for dep in graph[node]:
            visit(dep, [*path, node])

    for module in graph:
        visit(module, [])


def test_no_private_sdk_module() -> None:
    for path in PACKAGE.glob("*.py"):
        for name in _imports(path):
            if name.startswith("sdk:mcp"):
                assert not any(part.startswith("_") for part in name[4:].split(".")), (
                    f"{path.name} imports the SDK's private {name[4:]}"
                )
