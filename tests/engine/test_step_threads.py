"""The serving loop's thread policy (kvviz.engine.threads): small steps leave a core to the API server unless
a thread count was given; the loop applies it before each forward pass and restores torch's count on close."""

from __future__ import annotations

import pytest
import torch
from tiny_llm import tiny_lm

from kvviz import settings as S
from kvviz.engine import EngineConfig, EngineLoop, LLMEngine, SamplingParams
from kvviz.engine.threads import SMALL_STEP_TOKENS, StepThreads, ThreadPolicy, default_policy


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_small_steps_get_one_thread_fewer_large_ones_all():
    policy = default_policy(S.parse({}), torch_threads=2)
    assert (policy.full, policy.small) == (2, 1)
    assert policy.threads_for(1) == policy.threads_for(SMALL_STEP_TOKENS) == 1
    assert policy.threads_for(SMALL_STEP_TOKENS + 1) == policy.threads_for(1024) == 2
    assert default_policy(S.parse({}), torch_threads=1) == ThreadPolicy(1, 1, SMALL_STEP_TOKENS)  # never 0


def test_a_server_stepping_in_its_main_thread_spares_no_core():
    assert default_policy(S.parse({}), torch_threads=2, spare_a_core=False) == ThreadPolicy(2, 2, SMALL_STEP_TOKENS)
    fixed = default_policy(S.parse({"KVVIZ_STEP_THREADS": "1"}), torch_threads=2, spare_a_core=False)
    assert (fixed.threads_for(1), fixed.threads_for(4096)) == (1, 1)  # an explicit count still wins


def test_kvviz_serve_builds_its_loop_to_step_in_the_main_thread_on_every_core(monkeypatch):
    from kvviz.cli import serve

    built = {}

    class Loop:
        def __init__(self, engine, threads, own_thread=True):
            built.update(threads=threads, own_thread=own_thread)

    monkeypatch.setattr("kvviz.engine.EngineLoop", Loop)
    monkeypatch.setattr("kvviz.engine.LLMEngine", lambda lm, config: None)
    monkeypatch.setattr("kvviz.model.load_model", lambda: None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("KVVIZ_STEP_THREADS", raising=False)
    serve._engine_loop(_serve_args())
    assert built["own_thread"] is False
    assert built["threads"].policy.small == built["threads"].policy.full


def _serve_args():
    from kvviz.cli import build_parser

    return build_parser().parse_args(["serve"])


def test_an_explicit_thread_count_holds_for_every_step():
    assert default_policy(S.parse({"OMP_NUM_THREADS": "2"}), torch_threads=2) == ThreadPolicy(2, 2, SMALL_STEP_TOKENS)
    fixed = default_policy(S.parse({"KVVIZ_STEP_THREADS": "3", "OMP_NUM_THREADS": "2"}), torch_threads=2)
    assert (fixed.threads_for(1), fixed.threads_for(4096)) == (3, 3)


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5", "1025"])
def test_a_bad_step_thread_count_is_an_error_and_keeps_the_policy(bad):
    s = S.parse({"KVVIZ_STEP_THREADS": bad})
    assert s.step_threads is None and s.errors["KVVIZ_STEP_THREADS"].startswith(f"KVVIZ_STEP_THREADS={bad!r}")


def test_step_threads_sets_torch_only_on_a_change_and_restores():
    torch.set_num_threads(2)
    threads = StepThreads(ThreadPolicy(2, 1, 4))
    assert threads.before_step(1) == 1 and torch.get_num_threads() == 1
    assert threads.before_step(5) == 2 and torch.get_num_threads() == 2
    threads.before_step(3)
    threads.restore()
    assert torch.get_num_threads() == 2


def test_the_loop_runs_each_step_on_its_policy_count():
    torch.set_num_threads(2)
    seen: list[tuple[int, int]] = []
    engine = LLMEngine(tiny_lm(seed=7), EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256))
    real = engine.execute_step

    def noting(work):
        seen.append((work.plan.num_batched_tokens, torch.get_num_threads()))
        return real(work)

    engine.execute_step = noting
    loop = EngineLoop(engine, StepThreads(ThreadPolicy(2, 1, 4)))
    try:
        loop.submit("a", list(range(1, 11)), SamplingParams(max_tokens=3, ignore_eos=True)).result()
    finally:
        loop.close()
    assert seen[0] == (10, 2) and all(n == 1 for tokens, n in seen[1:]) and len(seen) == 3
    assert torch.get_num_threads() == 2  # restored on close


def test_serve_refuses_a_bad_step_thread_count_in_one_line(monkeypatch, capsys):
    from kvviz.cli import main

    monkeypatch.setenv("KVVIZ_STEP_THREADS", "zero")
    assert main(["serve", "--port", "0"]) == 2  # before any socket or model
    err = capsys.readouterr().err.strip()
    assert "KVVIZ_STEP_THREADS='zero'" in err and "\n" not in err and "Traceback" not in err
