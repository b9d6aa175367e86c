"""`make dist` builds a wheel that installs and runs (README: installing from a wheel)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_dist_builds_an_installable_wheel(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    venv = Path(sys.executable).parent.parent  # the running interpreter's environment
    done = subprocess.run(
        ["make", "-s", "dist", f"VENV={venv}", f"DIST={dist}"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    wheels = list(dist.glob("toolweave-*-py3-none-any.whl"))
    assert len(wheels) == 1, done.stdout
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
         str(wheels[0])],
        check=True, timeout=300,
    )  # fmt: skip
    # the installed copy (not the checkout) is imported, and its command runs
    code = "import toolweave, sys; print(toolweave.__file__); sys.argv=['toolweave','--help']; from toolweave.cli import main; main()"
    ran = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "COLUMNS": "100"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(str(target)) and "Usage: toolweave" in ran.stdout
    assert (target / "toolweave" / "py.typed").is_file()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_shows_progress_and_runs_everything() -> None:
    dry = subprocess.run(
        ["make", "-n", "test", "VENV=/nonexistent"], cwd=REPO, capture_output=True, text=True
    )
    pytest_lines = [line for line in dry.stdout.splitlines() if "/bin/pytest" in line]
    assert pytest_lines == ["/nonexistent/bin/pytest "]  # no -q, no -m: every test, per file
    skipping = subprocess.run(
        ["make", "-n", "test", "VENV=/x", 'PYTEST_ARGS=-m "not local_model and not durable"'],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert '/x/bin/pytest -m "not local_model and not durable"' in skipping.stdout


def test_the_heavy_tests_carry_their_markers() -> None:
    def collected(marker: str) -> set[str]:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", marker,
             "tests/e2e", "tests/durable", "tests/test_docs.py"],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        return {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}

    assert "tests/e2e/test_local_model.py" in collected("local_model")
    assert "tests/e2e/test_local_server.py" not in collected("local_model")
    durable = collected("durable")
    if durable:  # the durable extra is installed
        assert all(path.startswith("tests/durable/") for path in durable)
