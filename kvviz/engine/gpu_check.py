"""``make gpu-check``: on a CUDA machine, generate with the engine on the GPU and on the CPU (fp32 both) and
compare the tokens and the K/V of a cached block. Without CUDA it says so and exits with status 0.

Exit status: 0 (match, or no GPU), 1 (a mismatch). Prints one JSON object.
"""

from __future__ import annotations

import json
import sys

_STORY = ("The history of the printing press begins in Mainz, where Johannes Gutenberg combined movable metal type, "
          "an oil-based ink and a wooden screw press into a system that could print a whole book in weeks. ")
#: two prompts of several full blocks sharing a prefix (the second's first blocks are prefix-cache hits)
PROMPTS = [_STORY * 2, _STORY * 2 + "Within fifty years presses were running in more than two hundred cities"]
NEW = 32
TOL = 1e-3  # fp32 GPU vs CPU kernels differ in summation order


def _run(device: str) -> tuple[list[list[int]], object, object]:
    from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
    from kvviz.model import load_model

    lm = load_model(device=device, dtype="float32", backend="native")
    engine = LLMEngine(lm, EngineConfig(kv_cache_bytes=64 << 20))
    ids = [lm.tokenizer(p, add_special_tokens=False).input_ids for p in PROMPTS]
    for i, p in enumerate(ids):
        engine.add_request(f"g{i}", p, SamplingParams(max_tokens=NEW, ignore_eos=True))
    done = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[out.request_id] = out.token_ids
    block = engine.pool.get_cached_block(engine.manager.request_block_hashes(ids[0])[0])
    k, v, _tokens = engine.kv_of_block(block.block_id)
    return [done[f"g{i}"] for i in range(len(ids))], k, v


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"gpu": False, "message": "no CUDA device here: nothing to compare (run on a GPU machine)"}))
        return 0
    gpu_tokens, gk, gv = _run("cuda")
    cpu_tokens, ck, cv = _run("cpu")
    k_diff = (gk.float() - ck.float()).abs().max().item()
    v_diff = (gv.float() - cv.float()).abs().max().item()
    same = gpu_tokens == cpu_tokens
    ok = same and k_diff <= TOL and v_diff <= TOL
    print(json.dumps({"gpu": True, "device": torch.cuda.get_device_name(0), "tokens_equal": same,
                      "first_mismatch": next((i for i, (a, b) in enumerate(zip(gpu_tokens[0], cpu_tokens[0], strict=True))
                                              if a != b), None),
                      "block_k_max_abs_diff": k_diff, "block_v_max_abs_diff": v_diff, "tolerance": TOL, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
