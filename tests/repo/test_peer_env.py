"""The peer lane starts each engine at its own defaults: no thread or OpenMP setting of the calling shell (the
Makefile's OMP_WAIT_POLICY=PASSIVE among them) reaches either server; the same-threads run sets its own."""

from __future__ import annotations

from bench import peer_servers as ps


def test_no_thread_setting_of_the_shell_reaches_an_engine(monkeypatch):
    for name, value in (("OMP_WAIT_POLICY", "PASSIVE"), ("OMP_NUM_THREADS", "7"), ("GOMP_SPINCOUNT", "0"),
                        ("KVVIZ_STEP_THREADS", "1"), ("VLLM_CPU_OMP_THREADS_BIND", "0")):
        monkeypatch.setenv(name, value)
    env = ps._base_env()
    assert not set(ps.ENGINE_THREAD_VARIABLES) & set(env)
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
