"""A bounded schemathesis run over the server's own ``/openapi.json`` (over the engine-loop test double):
every operation, a fixed number of generated bodies each (schema-valid and not), derandomized; no answer
may be a 5xx and the log may hold no traceback."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from server_http import LogRecords

EXAMPLES = 20  # per operation: the fuzz stays a few seconds of the fast lane
BUDGET_S = 120.0  # a whole run past this is a failure, not a slow test nobody sees


@pytest.fixture(scope="module")
def server():
    from server_testloop import FakeLoop, FakeParams

    from kvviz.server.app import create_app
    from kvviz.server.config import ServerConfig
    from kvviz.server.uvicorn_server import ServerThread

    loop = FakeLoop(step_s=0.0005)
    thread = ServerThread(create_app(lambda: loop, ServerConfig(port=0, presenter_key="pk"),
                                     make_params=FakeParams)).start()
    yield thread.url
    thread.stop()
    loop.close()


def test_schemathesis_finds_no_5xx_and_no_traceback(server):
    import schemathesis

    schema = schemathesis.openapi.from_url(f"{server}/openapi.json")
    log = LogRecords().attach()
    started, seen, failures = time.monotonic(), {}, []
    try:
        for result in schema.get_all_operations():
            operation = result.ok()

            @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                      phases=[Phase.explicit, Phase.generate],
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy())
            def fuzz(case):
                response = case.call(base_url=server, timeout=30)
                seen[response.status_code] = seen.get(response.status_code, 0) + 1
                if response.status_code >= 500:
                    failures.append(f"{case.operation.label} -> {response.status_code}: {case.body!r:.300}")

            fuzz()
            assert time.monotonic() - started < BUDGET_S, f"the fuzz ran past {BUDGET_S} s"
    finally:
        log.detach()
    assert failures == []
    assert log.tracebacks() == []
    assert sum(seen.values()) >= EXAMPLES and any(200 <= c < 300 for c in seen), seen
    assert any(400 <= c < 500 for c in seen), seen  # the fuzz reached the validation, not only the happy path
