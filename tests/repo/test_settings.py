"""kvviz.settings: every KVVIZ_* and HF variable parsed in one place, with its default and its error."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz import settings as S

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_when_nothing_is_set():
    s = S.parse({})
    assert s.model is None and s.device is None and s.dtype is None and s.backend is None
    assert s.max_tokens == 2048
    assert s.presenter_key is None and not s.hf_hub_offline
    assert s.kv_cache_bytes == 256 * 2**20
    assert s.cache_dir == Path.home() / ".cache" / "kvviz" and dict(s.errors) == {}


def test_valid_values_are_parsed_and_stripped():
    s = S.parse({"KVVIZ_MODEL": " someone/model ", "KVVIZ_MAX_TOKENS": "100", "KVVIZ_KV_CACHE_MIB": "64",
                 "KVVIZ_PRESENTER_KEY": " k ", "HF_HUB_OFFLINE": "TRUE",
                 "KVVIZ_CACHE_DIR": "/tmp/kv"})
    assert (s.model, s.max_tokens, s.kv_cache_bytes) == ("someone/model", 100, 64 * 2**20)
    assert s.presenter_key == "k" and s.hf_hub_offline and s.cache_dir == Path("/tmp/kv") and not s.errors


def test_the_host_tier_size_is_off_by_default_and_zero_keeps_it_off():
    assert S.parse({}).kv_offloading_size is None
    assert S.parse({"KVVIZ_KV_OFFLOADING_SIZE": "0"}).kv_offloading_size is None
    assert S.parse({"KVVIZ_KV_OFFLOADING_SIZE": " 0.5 "}).kv_offloading_size == 0.5


def test_the_host_tiers_eviction_policy_is_lru_by_default_or_arc():
    assert S.parse({}).kv_offloading_eviction_policy == "lru"
    assert S.parse({"KVVIZ_KV_OFFLOADING_EVICTION_POLICY": " ARC "}).kv_offloading_eviction_policy == "arc"
    assert S.parse({"KVVIZ_KV_OFFLOADING_EVICTION_POLICY": "lru"}).kv_offloading_eviction_policy == "lru"


def test_a_bad_eviction_policy_stops_the_apps_engine_with_one_line(monkeypatch):
    from kvviz.errors import InputError

    monkeypatch.setenv("KVVIZ_KV_OFFLOADING_EVICTION_POLICY", "fifo")
    with pytest.raises(InputError) as caught:
        S.kv_offloading_eviction_policy_default()
    assert caught.value.code == "bad_env_kv_offloading_policy" and "\n" not in str(caught.value)
    assert str(caught.value) == "KVVIZ_KV_OFFLOADING_EVICTION_POLICY='fifo' is not an eviction policy (lru or arc)"
    monkeypatch.setenv("KVVIZ_KV_OFFLOADING_EVICTION_POLICY", "arc")
    assert S.kv_offloading_eviction_policy_default() == "arc"


@pytest.mark.parametrize("name, bad", [
    ("KVVIZ_MAX_TOKENS", "0"), ("KVVIZ_MAX_TOKENS", "1e3"), ("KVVIZ_MAX_TOKENS", "lots"),
    ("KVVIZ_KV_CACHE_MIB", "0"), ("KVVIZ_KV_CACHE_MIB", "1.5"),
    ("KVVIZ_KV_OFFLOADING_SIZE", "-1"), ("KVVIZ_KV_OFFLOADING_SIZE", "2048"), ("KVVIZ_KV_OFFLOADING_SIZE", "half"),
    ("KVVIZ_KV_OFFLOADING_EVICTION_POLICY", "fifo"), ("KVVIZ_KV_OFFLOADING_EVICTION_POLICY", "1"),
])
def test_an_invalid_value_keeps_the_default_and_names_the_variable(name, bad):
    s = S.parse({name: bad})
    assert s == dataclasses.replace(S.parse({}), errors=s.errors)
    assert list(s.errors) == [name] and s.errors[name].startswith(f"{name}={bad!r}")


def test_the_record_is_frozen_and_follows_a_changed_environment(monkeypatch):
    monkeypatch.setenv("KVVIZ_MAX_TOKENS", "64")
    first = S.settings()
    assert S.settings() is first and first.max_tokens == 64  # parsed once for one environment
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.max_tokens = 1  # type: ignore[misc]
    monkeypatch.setenv("KVVIZ_MAX_TOKENS", "32")
    assert S.settings().max_tokens == 32


def test_importing_kvviz_writes_no_environment_variable():
    code = ("import os; before = dict(os.environ); import kvviz.model, kvviz.settings, kvviz.cli; "
            "print(sorted(set(os.environ.items()) ^ set(before.items())))")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_only_the_settings_module_reads_kvviz_or_hf_variables():
    reads = re.compile(r"os\.environ|os\.getenv|getenv\(")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "kvviz").rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if reads.search(line) and p.name != "settings.py" and "dict(os.environ" not in line]
    assert found == []


def test_a_dedicated_server_keeps_openmps_own_wait_policy_and_other_commands_sleep(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    S.prefer_passive_openmp(["serve", "--port", "8000"])
    assert "OMP_WAIT_POLICY" not in os.environ
    S.prefer_passive_openmp(["generate", "hello"])
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # an explicit setting wins
    S.prefer_passive_openmp(["generate"])
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    S.prefer_passive_openmp([])  # the app, or no command
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


def test_kvviz_serve_starts_without_a_wait_policy_of_its_own():
    code = ("import os, runpy, sys; sys.argv = ['kvviz', 'serve', '--help']; "
            "import kvviz.cli; kvviz.cli.main = lambda: print(os.environ.get('OMP_WAIT_POLICY', 'unset')) or 0; "
            "runpy.run_module('kvviz', run_name='__main__')")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "unset", out.stderr
