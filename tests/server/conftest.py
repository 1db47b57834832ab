"""Fixtures of the server's unit tests: the API over the engine-loop test double, on 127.0.0.1."""

from __future__ import annotations

import pytest
from server_testloop import FakeLoop, FakeParams

from kvviz.server.app import create_app
from kvviz.server.config import ServerConfig
from kvviz.server.uvicorn_server import ServerThread


class Served:
    """A running app: its URL, its engine double and its config."""

    def __init__(self, config: ServerConfig, warm: bool = True, **loop_kw: object) -> None:
        self.loop = FakeLoop(**loop_kw)  # type: ignore[arg-type]
        self.config = config
        self.app = create_app(lambda: self.loop, config, make_params=FakeParams)
        if warm:  # as `kvviz serve` does: the engine exists before the first request
            assert self.app.state.serving.loop is self.loop
        self.thread = ServerThread(self.app, "127.0.0.1", 0).start()
        self.url = self.thread.url

    def close(self) -> None:
        self.loop.gate.set()
        self.thread.stop()
        self.loop.close()


@pytest.fixture
def served():
    made: list[Served] = []

    def make(**kw: object) -> Served:
        loop_kw = {k: kw.pop(k) for k in ("step_s", "max_model_len") if k in kw}
        warm = bool(kw.pop("warm", True))
        s = Served(ServerConfig(port=0, presenter_key="pk", **kw), warm, **loop_kw)  # type: ignore[arg-type]
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
