"""The interop package costs nothing until used: `import toolweave` (and using tools) imports
no framework and no `toolweave.interop` module; each adapter imports only its framework, and
a missing framework is an ImportError naming the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

FRAMEWORKS = {
    # adapter module: (the framework's top-level modules, the extra)
    "langchain": (("langchain_core", "langchain", "langsmith"), "langchain"),
    "pydantic_ai": (("pydantic_ai",), "pydantic-ai"),
    "openai_agents": (("agents",), "openai-agents"),
    "llamaindex": (("llama_index",), "llamaindex"),
}
ALL = sorted({m for mods, _ in FRAMEWORKS.values() for m in mods})


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_import_toolweave_imports_no_framework() -> None:
    _run(
        "import sys\n"
        "import toolweave\n"
        "from toolweave import ToolService, tool\n"
        "@tool\n"
        "def f(x: int) -> int:\n"
        "    return x\n"
        "assert f.invoke({'x': 1}) == 1\n"
        "ToolService().tools(f)\n"
        f"loaded = [m for m in sys.modules if m.split('.')[0] in {ALL!r}]\n"
        "assert not loaded, loaded\n"
        "assert not [m for m in sys.modules if m.startswith('toolweave.interop')]\n"
    )


@pytest.mark.parametrize("adapter", sorted(FRAMEWORKS))
def test_each_adapter_imports_only_its_framework(adapter: str) -> None:
    mine, _ = FRAMEWORKS[adapter]
    pytest.importorskip(mine[0])
    others = sorted({m for a, (mods, _) in FRAMEWORKS.items() if a != adapter for m in mods})
    _run(
        "import sys\n"
        f"from toolweave.interop import {adapter}\n"
        f"loaded = [m for m in sys.modules if m.split('.')[0] in {others!r}]\n"
        "assert not loaded, loaded\n"
    )


def test_the_package_resolves_names_lazily() -> None:
    pytest.importorskip("langchain_core")
    _run(
        "import sys\n"
        "import toolweave.interop as interop\n"
        "assert 'langchain_core' not in sys.modules\n"
        "assert interop.to_langchain.__module__ == 'toolweave.interop.langchain'\n"
        "assert 'langchain_core' in sys.modules\n"
        "assert 'pydantic_ai' not in sys.modules\n"
    )


@pytest.mark.parametrize("adapter", sorted(FRAMEWORKS))
def test_a_missing_framework_names_the_extra(adapter: str) -> None:
    mine, extra = FRAMEWORKS[adapter]
    out = _run(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {mine!r}:\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import toolweave.interop\n"
        "try:\n"
        f"    import toolweave.interop.{adapter}\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    assert f"pip install 'toolweave[{extra}]'" in out
