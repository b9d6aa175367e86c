"""npm packages for the MCP interoperability tests, installed once into a cache.

Packages are pinned; each pin gets its own directory under ``~/.cache/toolweave/npm``
(``TOOLWEAVE_NPM_CACHE`` overrides), so a fresh machine installs them on first use and later
runs start at once. When npm is missing or the install fails, the tests that need it fail
in CI (``CI`` set) and are skipped with the reason elsewhere.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CONFORMANCE = "@modelcontextprotocol/conformance@0.1.16"
CONFORMANCE_NEXT = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
"""The newest suite, with the 2026-07-28 server requirements and the tasks extension."""
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
FILESYSTEM = "@modelcontextprotocol/server-filesystem@2026.8.31"
TS_SDK = "@modelcontextprotocol/sdk@1.32.2"

LOOPBACK_PRELOAD = str(Path(__file__).resolve().parent / "node_loopback.cjs")
"""``node --require`` this to make every server the process starts listen on 127.0.0.1."""

NPM_INSTALL_TIMEOUT = 600


def npm_cache() -> Path:
    return Path(os.environ.get("TOOLWEAVE_NPM_CACHE") or Path.home() / ".cache/toolweave/npm")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"npm packages are needed in CI: {reason}", pytrace=False)
    pytest.skip(f"npm packages unavailable: {reason}")


def npm_install(*specs: str) -> Path:
    """The ``node_modules`` directory holding `specs` (pinned ``name@version``), installing
    them on first use; safe against parallel test processes (a file lock)."""
    key = "+".join(re.sub(r"[^A-Za-z0-9.@_-]", "_", s.lstrip("@")) for s in sorted(specs))
    root = npm_cache() / key
    modules = root / "node_modules"
    stamp = root / ".installed"
    if stamp.exists():
        return modules
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        _unavailable("node and npm are not on PATH")
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return modules
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        (root / "package.json").write_text('{"private": true}\n')
        try:
            proc = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *specs],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=NPM_INSTALL_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            _unavailable(f"npm install {' '.join(specs)} took over {NPM_INSTALL_TIMEOUT} s")
        if proc.returncode != 0:
            _unavailable(f"npm install {' '.join(specs)} failed: {proc.stderr.strip()[-2000:]}")
        stamp.touch()
    return modules


def script_beside(spec: str, source: Path) -> Path:
    """`source` (a Node script) copied next to `spec`'s node_modules, so its imports resolve;
    named after its content, since test runs of other checkouts share that directory, and
    written atomically."""
    data = source.read_bytes()
    path = npm_install(spec).parent / f"{source.stem}-{hashlib.sha1(data).hexdigest()[:12]}.mjs"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path


def conformance_cli(spec: str = CONFORMANCE) -> Path:
    """The entry script of the conformance suite `spec` (a pinned ``name@version``), patched
    to load on Node 20.

    0.1.16 and 0.2.0 import ``globSync`` from ``fs`` (Node 22+) for their ``tier-check``
    command only; the copy replaces that import with a stub, so every other command works on
    Node 20.
    """
    modules = npm_install(spec)
    dist = modules / "@modelcontextprotocol/conformance/dist"
    patched = dist / "index-node20.js"
    if not patched.exists():
        source = (dist / "index.js").read_text()
        fs_import = re.search(r'import\{[^}]*\}from"fs";', source)
        assert fs_import is not None, "the conformance script no longer imports from fs"
        glob = re.search(r"globSync as (\w+),", fs_import.group(0))
        text = fs_import.group(0)
        if glob is not None:
            stub = f'const {glob.group(1)}=()=>{{throw new Error("globSync needs Node 22")}};'
            text = text.replace(glob.group(0), "") + stub
        tmp = patched.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source.replace(fs_import.group(0), text, 1))
        tmp.replace(patched)
    return patched
