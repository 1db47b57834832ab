"""``python -m kvviz paging``: contiguous vs paged KV memory on one seeded request stream.

Calls the same function the "Paged vs contiguous memory" page calls (kvviz.analysis.paging.sim.compare_layouts).
"""

from __future__ import annotations

import argparse
from typing import Any

from kvviz.analysis.paging.experiment import RESERVATION_POLICIES, PagingConfig
from kvviz.analysis.paging.sim import compare_layouts
from kvviz.cli import CliError, add_block_size_flag, add_json_flag

_DEFAULTS = PagingConfig()


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "paging",
        help="contiguous max-length reservation vs paged blocks: utilisation, waste, requests that fit",
        description="Serve one seeded stream of requests (shared prefix + random prompt + random output) "
        "from a fixed KV memory twice: contiguous slabs (first-fit) and paged blocks with prefix sharing. "
        "Memory is counted in token slots (one token's K and V for every layer).",
    )
    p.add_argument("--memory-tokens", type=int, default=_DEFAULTS.memory_tokens, help="KV memory in token slots")
    add_block_size_flag(p, _DEFAULTS.block_size)
    p.add_argument("--requests", type=int, default=_DEFAULTS.num_requests, help="number of requests")
    p.add_argument("--shared-prefix", type=int, default=_DEFAULTS.shared_prefix,
                   help="tokens of system prompt every request starts with")
    p.add_argument("--prompt", type=int, nargs=2, metavar=("MIN", "MAX"),
                   default=(_DEFAULTS.prompt_min, _DEFAULTS.prompt_max), help="prompt tokens after the prefix")
    p.add_argument("--output", type=int, nargs=2, metavar=("MIN", "MAX"),
                   default=(_DEFAULTS.output_min, _DEFAULTS.output_max), help="output tokens")
    p.add_argument("--max-model-len", type=int, default=_DEFAULTS.max_model_len, help="longest sequence allowed")
    p.add_argument("--reservation", choices=RESERVATION_POLICIES, default=_DEFAULTS.reservation,
                   help="contiguous slab size: max length, power of two, or exact (oracle)")
    p.add_argument("--no-sharing", action="store_true", help="paged: store the shared prefix once per request")
    p.add_argument("--seed", type=int, default=_DEFAULTS.seed, help="random seed of the request stream")
    p.add_argument("--snapshot-step", type=int, help="also return the memory layout at this step")
    p.add_argument("--records", action="store_true", help="include every step's breakdown")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = PagingConfig(
        memory_tokens=args.memory_tokens, block_size=args.block_size, num_requests=args.requests,
        shared_prefix=args.shared_prefix, prompt_min=args.prompt[0], prompt_max=args.prompt[1],
        output_min=args.output[0], output_max=args.output[1], max_model_len=args.max_model_len,
        reservation=args.reservation, share_prefix=not args.no_sharing, seed=args.seed,
    )
    if args.snapshot_step is not None and args.snapshot_step < 0:
        raise CliError("--snapshot-step must be >= 0")
    try:
        result = compare_layouts(cfg, args.snapshot_step)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    out = result.to_dict(records=args.records)
    if args.snapshot_step is not None:
        cont, paged = result.contiguous.snapshot, result.paged.snapshot
        out["contiguous"]["snapshot"] = [
            {"start": s.start, "length": s.length, "kind": s.kind, "request": s.request} for s in cont.spans
        ]
        out["paged"]["snapshot"] = {
            "blocks": [{"block_id": b.block_id, "kind": b.kind, "used": b.used, "ref_cnt": b.ref_cnt}
                       for b in paged.blocks],
            "block_tables": {str(k): v for k, v in paged.block_tables.items()},
        }
    return out
