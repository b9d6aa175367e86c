"""A bounded slice of each fuzz target (`make fuzz` runs them longer).

Each target runs in its own process, seeded with tests/fuzz/seeds, for FUZZ_SECONDS seconds
(default 10). The number of generated inputs is printed for the record.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")

HERE = Path(__file__).resolve().parent
SECONDS = int(os.environ.get("FUZZ_SECONDS", "10"))
# inputs longer than libFuzzer's default 4096 bytes (the targets amplify them further)
MAX_LEN = {"repair": ["-max_len=70000"], "openapi": ["-max_len=70000"]}


@pytest.mark.parametrize(
    "target",
    [
        "arguments",
        "dialects",
        "sse",
        "sse_limits",
        "repair",
        "openapi",
        "eventstream",
        "constrained",
        "responses",
    ],
)
def test_fuzz_target_survives(target: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    seeds = HERE / "seeds" / target
    if seeds.is_dir():
        shutil.copytree(seeds, corpus)
    else:
        corpus.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "fuzz_targets.py"),
            target,
            str(corpus),
            f"-max_total_time={SECONDS}",
            "-rss_limit_mb=2048",
            *MAX_LEN.get(target, []),
            f"-artifact_prefix={tmp_path}/",
        ],
        capture_output=True,
        text=True,
        timeout=SECONDS + 120,
    )
    done = re.search(r"Done (\d+) runs", proc.stderr)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert done is not None, proc.stderr[-2000:]
    print(f"fuzz target {target}: {done.group(1)} inputs in {SECONDS}s")
