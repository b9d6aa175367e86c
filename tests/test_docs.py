"""Every ```python block of the README and docs/*.md runs as pasted into a file: each is
written to its own `example.py` and run with `python example.py` in an empty directory
(no API keys set; the `toolweave` command on PATH) holding only the files the page asked
the reader to save before it (```python file=notes.py blocks, which are not run). Blocks that would call OpenAI get a
loopback stand-in through `OPENAI_BASE_URL` (tests/servers/docs_model.py), as a reader's
`OPENAI_API_KEY` would get the real API. Blocks that start the local model are marked
`local_model` and run when llama-server is built. The few that cannot run here are listed
in EXEMPT with the reason."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servers.docs_model import DocsModelServer
from toolweave.local import find_llama_server

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)
_FILE = re.compile(r"\bfile=(\S+)")
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")

EXEMPT: dict[tuple[str, str], str] = {
    # (file, text found in the block): why it is not run here
    ("durable.md", 'launch("postgresql://'): (
        "needs a PostgreSQL server and worker processes; tests/durable runs this scenario"
    ),
    ("http-tools.md", "https://api.github.com/repos/{owner}"): (
        "calls the public GitHub API (no internet here); tests/http runs such cards against "
        "loopback servers"
    ),
}


def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """(line number, code, file name) of every ```python block of `path`; the file name is
    set for blocks the reader is asked to save (```python file=notes.py)."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for m in _BLOCK.finditer(text):
        named = _FILE.search(m.group(1))
        line = text.count("\n", 0, m.start()) + 2
        blocks.append((line, m.group(2), named.group(1) if named else None))
    return blocks


def _cases() -> Iterator[object]:
    for path in DOC_FILES:
        saved: dict[str, str] = {}  # the files the reader saved so far (file= blocks)
        for line, code, name in python_blocks(path):
            if name is not None:
                saved[name] = code
                compile(code, f"{path.name}:{line}", "exec")  # at least valid Python
                continue
            marks: list[pytest.MarkDecorator] = []
            reason = next(
                (why for (name, text), why in EXEMPT.items() if name == path.name and text in code),
                None,
            )
            if reason:
                marks.append(pytest.mark.skip(reason=f"exempt: {reason}"))
            if "local_chat_model(" in code or "LlamaServer(" in code:
                marks.append(pytest.mark.local_model)
            yield pytest.param(path, line, code, dict(saved), id=f"{path.name}:{line}", marks=marks)


CASES = list(_cases())


@pytest.fixture(scope="module")
def docs_model() -> Iterator[DocsModelServer]:
    server = DocsModelServer().start()
    yield server
    server.stop()


def test_the_docs_have_python_examples() -> None:
    names = {p.name for p in DOC_FILES if python_blocks(p)}
    assert {"README.md", "cli.md", "local-model.md", "loop.md", "mcp.md"} <= names
    assert len(CASES) >= 30 and len(EXEMPT) <= 3  # exemptions stay few


@pytest.mark.parametrize(("path", "line", "code", "saved"), CASES)
def test_doc_example_runs_as_pasted(
    path: Path,
    line: int,
    code: str,
    saved: dict[str, str],
    tmp_path: Path,
    docs_model: DocsModelServer,
) -> None:
    local = "local_chat_model(" in code or "LlamaServer(" in code
    if local and find_llama_server() is None:
        pytest.skip("llama-server is not built (python -m toolweave.local build)")
    for name, content in saved.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
    env["OPENAI_BASE_URL"] = docs_model.url
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        timeout=900 if local else 180,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"{path.name}:{line} fails as pasted:\n{done.stderr[-3000:]}", pytrace=False)
