"""Simulations on top of the engine mirror, pure Python: prompt comparison, request traces and scenarios,
KV sizes and capacity (kvsize, kv_formula, kv_capacity, hf_config, presets), paged vs contiguous memory
(paging*), provider cache policies, the three prefix caches side by side (radix_compare) and timing
statistics (separation, timing_compare). No torch, no model, no UI."""
