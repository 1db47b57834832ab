"""The compiled CPU paged-attention kernel (``kvviz.engine.kernels``) against torch's SDPA over gathered K/V:
prefill chunks from scratch and after a past, lone decode tokens and mixed steps, over scattered block tables,
for every block size and head_dim it takes and several query-heads-per-K/V-head groups; and the engine's
forward pass on a tiny Llama of head_dim 64 gives the same logits and tokens with the kernel as with SDPA."""

from __future__ import annotations

import random
import shutil

import pytest
import torch
import torch.nn.functional as F
from tiny_llm import tiny_lm

from kvviz.engine import EngineConfig, LLMEngine, kernels
from kvviz.engine.attention import KERNEL_TILE, PagedAttention
from kvviz.engine.kv_memory import KVLayout, PagedKVMemory
from kvviz.engine.runner import SeqInput
from kvviz.engine.sampling import SamplingParams
from kvviz.settings import settings

pytestmark = pytest.mark.skipif(shutil.which("g++") is None or not settings().attention_kernel,
                                reason="no C++ compiler here (or KVVIZ_ATTENTION_KERNEL=0): the engine uses SDPA")
# with g++ here (and ninja, pinned in requirements.txt) the kernel must build: the fixture below fails otherwise


@pytest.fixture(scope="module")
def op():
    built = kernels.paged_attention_op()
    assert built is not None, kernels.unavailable_reason()  # a compiler is here: the kernel must build
    return built


def _as_float(memory: PagedKVMemory) -> PagedKVMemory:
    """The same blocks in fp32 (the reference's inputs: the bf16 values, exactly)."""
    copy = PagedKVMemory(memory.num_blocks, memory.block_size, KVLayout(1, memory.layout.num_kv_heads,
                         memory.layout.head_dim, 4), torch.device("cpu"), torch.float32)
    copy.k[0].copy_(memory.k[0])
    copy.v[0].copy_(memory.v[0])
    return copy


def _reference(q, memory: PagedKVMemory, layer: int, seqs: list[SeqInput]) -> torch.Tensor:
    """SDPA of each sequence's queries over its K/V gathered from its blocks (query start+i sees 0..start+i)."""
    bs, outs, row = memory.block_size, [], 0
    for s in seqs:
        n = len(s.token_ids)
        table = torch.tensor(s.block_ids[:-(-s.end // bs)])
        k = memory.k[layer][table].flatten(0, 1)[:s.end]  # [end, kv_heads, d]
        v = memory.v[layer][table].flatten(0, 1)[:s.end]
        mask = torch.arange(s.end)[None, :] <= (s.start + torch.arange(n))[:, None]
        o = F.scaled_dot_product_attention(q[row:row + n].transpose(0, 1)[None], k.transpose(0, 1)[None],
                                           v.transpose(0, 1)[None], attn_mask=mask, enable_gqa=True)
        outs.append(o[0].transpose(0, 1))
        row += n
    return torch.cat(outs)


@pytest.mark.parametrize("bs", [16, 32, 64])
@pytest.mark.parametrize("head_dim,heads,kv_heads", [(64, 9, 3), (64, 4, 4), (128, 8, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_kernel_equals_sdpa_over_scattered_blocks(op, bs, head_dim, heads, kv_heads, dtype):
    rng = random.Random(bs * head_dim + heads)
    torch.manual_seed(bs + heads)
    memory = PagedKVMemory(64, bs, KVLayout(1, kv_heads, head_dim, dtype.itemsize), torch.device("cpu"), dtype)
    shapes = [(1, 5 * bs + 3), (KERNEL_TILE + 7, 0), (1, 0), (2 * bs + 1, bs - 1), (1, bs), (3, 2 * bs - 3)]
    seqs, free = [], list(range(1, 64))
    rng.shuffle(free)
    for n, start in shapes:
        blocks = [free.pop() for _ in range(-(-(start + n) // bs))]
        seqs.append(SeqInput(list(range(n)), start, blocks, True))
    rows = sum(len(s.token_ids) for s in seqs)
    q = torch.randn(rows, heads + 2 * kv_heads, head_dim).to(dtype)[:, :heads]  # strided rows, as the model's
    k, v = torch.randn(rows, kv_heads, head_dim).to(dtype), torch.randn(rows, kv_heads, head_dim).to(dtype)
    for s in seqs:  # the past of every sequence in its blocks; the step's own K/V are written by attend
        past = torch.randn(s.start, kv_heads, head_dim).to(dtype), torch.randn(s.start, kv_heads, head_dim).to(dtype)
        for p in range(s.start):
            slot = s.block_ids[p // bs] * bs + p % bs
            memory.k[0].view(-1, kv_heads, head_dim)[slot] = past[0][p]
            memory.v[0].view(-1, kv_heads, head_dim)[slot] = past[1][p]
    attn = PagedAttention(memory, seqs, heads, kv_heads, head_dim)
    assert attn.kernel is op
    out = attn.attend(0, q, k, v)
    assert out.shape == (rows, heads, head_dim) and out.dtype == dtype
    if dtype == torch.float32:
        assert (out - _reference(q, memory, 0, seqs)).abs().max().item() <= 2e-6
    else:
        ref = _reference(q.float(), _as_float(memory), 0, seqs)
        err = (out.float() - ref).abs()  # [rows, heads, d]
        # a decode token's rows: computed in fp32 from the bf16 values, then rounded once (one bf16 step)
        decode = torch.tensor([len(s.token_ids) == 1 for s in seqs for _ in s.token_ids])
        assert (err[decode] <= ref[decode].abs() * 2 ** -8 + 1e-6).all()
        # longer tiles with AVX512-BF16 dot products also round P to bf16 for P V, as torch's bf16 flash
        # attention does: each weight moves by at most 2^-9 of itself, the weighted mean by 2^-9 of the largest |V|
        vmax = memory.v[0].float().abs().max().item()
        assert (err <= ref.abs() * 2 ** -8 + vmax * 2 ** -9 + 1e-6).all()


def test_engine_logits_and_tokens_equal_with_and_without_the_kernel(op, monkeypatch):
    lm = tiny_lm(seed=3, heads=4, kv_heads=2, head_dim=64)
    ids = [(5 * i + 2) % 60 + 1 for i in range(150)]

    def run() -> tuple[torch.Tensor, list[int]]:
        engine = LLMEngine(lm, EngineConfig(kv_cache_bytes=8 << 20, block_size=16))
        logits = engine.runner.execute([SeqInput(ids, 0, list(range(1, 11)), True)], all_logits=True)
        engine.add_request("a", ids[:70], SamplingParams(max_tokens=12, ignore_eos=True))
        engine.add_request("b", ids[:40] + [3, 4], SamplingParams(max_tokens=12, ignore_eos=True))
        tokens: dict[str, list[int]] = {}
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    tokens[out.request_id] = out.token_ids
        return logits, tokens["a"] + tokens["b"]

    with_kernel = run()
    monkeypatch.setenv("KVVIZ_ATTENTION_KERNEL", "0")
    without = run()
    # this random model amplifies rounding (the engine's packed products alone move its logits ~1e-4 from the
    # plain decoder's): the kernel is compared with the same engine using SDPA, which it must equal closely
    tol = 1e-5 * without[0].abs().max().item()
    assert (with_kernel[0] - without[0]).abs().max().item() <= tol
    assert with_kernel[1] == without[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_fused_silu_and_mul_equals_torch(op, dtype):
    from kvviz.engine.kernels import compiled_op
    from kvviz.model.llama import silu_and_mul

    fused = compiled_op("silu_and_mul")
    assert fused is not None
    torch.manual_seed(1)
    for rows in (3, 37):  # 3 x 1,539 on the calling thread, 37 x 1,539 over the OpenMP team
        x = (torch.randn(rows, 2 * 1539) * 6).to(dtype)  # 1,539: a tail shorter than one vector; values to +-30
        x[0, :4] = torch.tensor([-200.0, -88.5, 90.0, 0.0])  # past the exponent's clamps, and zero
        got, ref = fused(x), silu_and_mul(x.float())
        assert got.shape == (rows, 1539) and got.dtype == dtype
        if dtype == torch.float32:
            assert torch.allclose(got, ref, rtol=2e-6, atol=1e-6)
        else:  # one rounding to bf16 of the fp32 answer (torch rounds twice: after silu and after the product)
            assert ((got.float() - ref).abs() <= ref.abs() * 2 ** -8 + 1e-6).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_fused_rms_norm_and_rotary_equal_the_models_own(op, dtype):
    from kvviz.engine.kernels import compiled_op
    from kvviz.model.llama import RMSNorm, RotaryEmbedding, apply_rotary

    norm_op, rotary_op = compiled_op("rms_norm"), compiled_op("rotary")
    torch.manual_seed(2)
    norm = RMSNorm(576, 1e-5)
    norm.weight = torch.nn.Parameter((torch.rand(576) + 0.5).to(dtype), requires_grad=False)
    x = (torch.randn(37, 576) * 3).to(dtype)
    got, ref = norm_op(x, norm.weight, norm.eps), norm(x)
    assert got.dtype == dtype
    step = 2e-6 if dtype == torch.float32 else 2 ** -7  # one bf16 step of the weight's product, at most two
    assert ((got.float() - ref.float()).abs() <= ref.float().abs() * step + 1e-6).all()
    for rows in (37, 700):  # on the calling thread, and over the OpenMP team (past 32,768 elements)
        qkv = (torch.randn(rows, 9 + 2 * 3, 64) * 2).to(dtype)  # Q, K, V of the tokens, as the fused product
        cos, sin = RotaryEmbedding(64, 100000.0).tables(torch.arange(100, 100 + rows), dtype)
        assert torch.equal(rotary_op(qkv[:, :12], cos, sin), apply_rotary(qkv[:, :12], cos, sin))  # same rounding


def test_the_engines_bf16_rms_norm_equals_the_module_bit_for_bit(op):
    """In bf16 torch sums each row's squares and the kernel does the rest: the module's numbers exactly, on the
    calling thread and over the OpenMP team, with a tail shorter than a vector."""
    from kvviz.engine.weights import _compiled_layer_ops
    from kvviz.model.llama import RMSNorm

    engine_norm = _compiled_layer_ops(torch.bfloat16)["norm"]
    torch.manual_seed(4)
    for dim, rows in ((576, 7), (576, 300), (100, 9)):
        norm = RMSNorm(dim, 1e-5)
        norm.weight = torch.nn.Parameter((torch.rand(dim) * 2 + 0.3).to(torch.bfloat16), requires_grad=False)
        x = (torch.randn(rows, dim) * torch.logspace(-3, 2, rows)[:, None]).to(torch.bfloat16)  # small and large rows
        got = engine_norm(x, norm)
        assert got.dtype == torch.bfloat16 and torch.equal(got, norm(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_one_row_product_equals_the_exact_one(op, dtype):
    """The one-pass product of one row against the exact (float64) product: fp32 to its rounding, bf16 within one
    rounding of the output; shapes with a tail of W's rows (N % 4) and of a vector (K % 16, K % 32), on the
    calling thread and over the OpenMP team (the LM head's shape)."""
    from kvviz.engine.kernels import compiled_op

    gemv = compiled_op("gemv")
    assert gemv is not None
    torch.manual_seed(5)
    for n, k in ((7, 37), (13, 64), (960, 576), (576, 1536), (4099, 100), (49152, 576)):
        x, w = torch.randn(1, k).to(dtype), (torch.randn(n, k) / k ** 0.5).to(dtype)
        got = gemv(x, w)
        exact = x.double() @ w.double().T  # [1, N]: the inputs' values, exactly
        assert got.shape == (1, n) and got.dtype == dtype
        # an fp32 sum of k products loses at most about k ulps of the largest partial sum
        bound = (x.double().abs() @ w.double().abs().T) * k * 2 ** -24
        if dtype == torch.bfloat16:
            bound = bound + exact.abs() * 2 ** -8  # and the one rounding of the result to bf16
        assert ((got.double() - exact).abs() <= bound).all()
        assert torch.equal(got, gemv(x.clone(), w))  # deterministic: threads share rows, never one row's sum


def test_one_row_product_takes_one_row_only(op):
    from kvviz.engine.kernels import compiled_op

    gemv = compiled_op("gemv")
    with pytest.raises(RuntimeError, match="x \\[1, K\\]"):
        gemv(torch.randn(2, 8), torch.randn(4, 8))
    with pytest.raises(RuntimeError, match="both alike"):
        gemv(torch.randn(1, 8), torch.randn(4, 8).double())
