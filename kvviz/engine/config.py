"""EngineConfig: the sizes an engine is built with (vLLM's CacheConfig + SchedulerConfig, the parts kept).

Invariant: every field is validated here once; the engine trusts it. The KV budget default comes from
the settings (``KVVIZ_KV_CACHE_MIB``, 256 MiB).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvviz.errors import CodedError
from kvviz.mirror.hashing import DEFAULT_SEED
from kvviz.mirror.host_arc import EVICTION_POLICIES
from kvviz.mirror.limits import DEFAULT_BLOCK_SIZE
from kvviz.mirror.limits import block_size as check_block_size
from kvviz.settings import kv_cache_bytes_default

SCHEDULING_POLICIES = ("fcfs", "priority")


def _positive(name: str, value: object, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise CodedError(f"{name} must be an integer in 1..{high:,}, got {value!r}", "bad_engine_setting",
                         name=name, value=repr(value)[:40], high=high)
    return value


@dataclass(frozen=True)
class EngineConfig:
    """Block size (tokens), the K/V memory budget (bytes, null block included), the scheduler's token
    budget per step and running-request cap, the longest sequence (None: the model's limit, capped by the
    pool), chunked prefill on/off, the admission rule, and device/dtype overrides (None: the model's)."""

    block_size: int = DEFAULT_BLOCK_SIZE
    kv_cache_bytes: int = field(default_factory=kv_cache_bytes_default)
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 128  # vLLM 0.33.0's API server on a CPU (engine/arg_utils.py, cpu defaults)
    max_model_len: int | None = None
    enable_chunked_prefill: bool = True
    hash_name: str = "sha256"
    hash_seed: str | None = DEFAULT_SEED  # the NONE_HASH seed, as PYTHONHASHSEED (None: vLLM's resolution)
    scheduling_policy: str = "fcfs"  # vLLM's policies: "fcfs" or "priority" (lower value first, then arrival)
    # vLLM 0.33.0's default: admit a waiting or preempted request only if its whole sequence (less its prefix
    # hit) fits in the free blocks; False: only its first chunk must (--no-scheduler-reserve-full-isl)
    scheduler_reserve_full_isl: bool = True
    # vLLM 0.33.0's --kv-offloading-size: GiB of host memory for the offloading tier (None: off, the default)
    kv_offloading_size: float | None = None
    # vLLM 0.33.0's OffloadingConnector eviction_policy (kv_connector_extra_config): "lru" (default) or "arc"
    kv_offloading_eviction_policy: str = "lru"
    device: str | None = None
    dtype: str | None = None

    def __post_init__(self) -> None:
        check_block_size(self.block_size)
        _positive("kv_cache_bytes", self.kv_cache_bytes, 1 << 40)
        _positive("max_num_batched_tokens", self.max_num_batched_tokens, 1 << 20)
        _positive("max_num_seqs", self.max_num_seqs, 4096)
        if self.scheduling_policy not in SCHEDULING_POLICIES:
            raise CodedError(f"scheduling_policy must be one of {', '.join(SCHEDULING_POLICIES)}, got "
                             f"{self.scheduling_policy!r}", "bad_engine_setting", name="scheduling_policy",
                             value=repr(self.scheduling_policy)[:40], high=0)
        if not isinstance(self.scheduler_reserve_full_isl, bool):
            raise CodedError(f"scheduler_reserve_full_isl must be true or false, got {self.scheduler_reserve_full_isl!r}",
                             "bad_engine_setting", name="scheduler_reserve_full_isl",
                             value=repr(self.scheduler_reserve_full_isl)[:40], high=0)
        if self.max_model_len is not None:
            _positive("max_model_len", self.max_model_len, 1 << 20)
        size = self.kv_offloading_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, (int, float))
                                 or not 0 < size <= 1024):
            raise CodedError(f"kv_offloading_size must be a number of GiB in (0, 1024], got {size!r}",
                             "bad_engine_setting", name="kv_offloading_size", value=repr(size)[:40], high=1024)
        if self.kv_offloading_eviction_policy not in EVICTION_POLICIES:
            raise CodedError(f"kv_offloading_eviction_policy must be one of {', '.join(EVICTION_POLICIES)}, got "
                             f"{self.kv_offloading_eviction_policy!r}", "bad_engine_setting",
                             name="kv_offloading_eviction_policy",
                             value=repr(self.kv_offloading_eviction_policy)[:40], high=0)

    @property
    def kv_offloading_bytes(self) -> int:
        """The host tier's budget in bytes (0: off), as vLLM's ``cpu_bytes_to_use`` = GiB x 2**30."""
        return 0 if self.kv_offloading_size is None else int(self.kv_offloading_size * (1 << 30))


def check_budget_holds_max_model_len(config: EngineConfig, max_model_len: int) -> None:
    """With chunked prefill off a prompt runs in one step, so the token budget must hold the longest sequence
    (vLLM 0.33.0's ``SchedulerConfig.verify_max_model_len``); else a longer prompt would wait forever."""
    if not config.enable_chunked_prefill and config.max_num_batched_tokens < max_model_len:
        raise CodedError(f"max_num_batched_tokens ({config.max_num_batched_tokens:,}) is below max_model_len "
                         f"({max_model_len:,}) with chunked prefill off: raise the budget or lower max_model_len",
                         "bad_engine_setting", name="max_num_batched_tokens",
                         value=repr(config.max_num_batched_tokens), high=max_model_len)
