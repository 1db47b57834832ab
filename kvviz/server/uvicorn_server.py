"""Run the API app with uvicorn, on a socket kvviz binds itself (so a busy port is a one-line error in
the caller, and port 0 picks a free one): in a background thread (the app's process, tests), or beside work that
keeps the main thread (``python -m kvviz serve``: the engine loop)."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable

import uvicorn
from starlette.types import ASGIApp

START_TIMEOUT_S = 30.0


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; ValueError (one line) when it cannot be bound."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ValueError(f"cannot resolve host {host!r}: {exc}") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _server(app: ASGIApp, log_level: str) -> uvicorn.Server:
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on",
                            timeout_graceful_shutdown=2, timeout_keep_alive=5)
    return uvicorn.Server(config)


class ServerThread:
    """uvicorn serving ``app`` on ``host:port`` in a daemon thread; ``url`` once started; ``stop`` ends it."""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning",
                 sock: socket.socket | None = None) -> None:
        self.sock = sock if sock is not None else bind(host, port)  # ``sock``: already bound by the caller
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.server = _server(app, log_level)
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"kvviz-api :{self.port}")
        self.exception: BaseException | None = None  # what ended the server, if anything did

    @property
    def error(self) -> str | None:
        """What ended the server, in one line (None while it runs or when it stopped cleanly)."""
        return None if self.exception is None else f"{type(self.exception).__name__}: {self.exception}"

    @property
    def url(self) -> str:
        return url_of(self.host, self.port)

    def _run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        except BaseException as exc:  # noqa: BLE001 - kept for the caller, never raised into a page
            self.exception = exc

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ServerThread:
        """Start and wait until uvicorn accepts connections (its lifespan done); RuntimeError if it died."""
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the API server did not start: {self.error or 'timed out'}")
            self.thread.join(0.01)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)
        self.sock.close()


def url_of(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve_beside(app: ASGIApp, sock: socket.socket, work: Callable[[Callable[[], bool]], None],
                 log_level: str = "warning") -> None:
    """Serve on the bound ``sock`` in a ``ServerThread`` while ``work(stopped)`` runs in this (the main) thread
    until ``stopped()`` is true: the server has ended. Ctrl-C or SIGTERM stops the server as uvicorn's own
    handlers would (gracefully; a second one at once); an error that ended the server is raised here."""
    api = ServerThread(app, log_level=log_level, sock=sock)

    def stop(signum: int, frame: object) -> None:  # only sets flags: safe wherever the main thread was
        if api.server.should_exit:
            api.server.force_exit = True
        api.server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    api.thread.start()
    try:
        work(lambda: not api.thread.is_alive())
    finally:
        api.stop(timeout_s=15.0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if api.exception is not None:
        raise api.exception
