"""The runnable examples of the user guide: every ```python block in docs/*.md whose first
line is `# doctest: run` is executed (offline; the blocks of one file share a namespace,
in order)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
MARKER = "# doctest: run"
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def runnable_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number, code) of the marked python blocks of `path`."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in _BLOCK.finditer(text):
        code = match.group(1)
        if code.lstrip().startswith(MARKER):
            blocks.append((text.count("\n", 0, match.start()) + 2, code))
    return blocks


DOC_FILES = sorted(p for p in DOCS.glob("*.md") if runnable_blocks(p))


def test_the_guide_has_runnable_examples() -> None:
    names = {p.name for p in DOC_FILES}
    assert {"cli.md", "local-model.md", "migration.md"} <= names


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_doc_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem.replace('-', '_')}"}
    for line, code in runnable_blocks(path):
        # pad so tracebacks point at the line in the .md file
        compiled = compile("\n" * (line - 1) + code, str(path), "exec")
        exec(compiled, namespace)
