"""``python -m kvviz.engine.kernels``: build (or load) the compiled kernels ahead of first use; exit 0 either
way (without a compiler the engine uses torch's SDPA), saying which."""

from kvviz.engine.kernels import paged_attention_op, unavailable_reason

if __name__ == "__main__":
    op = paged_attention_op()
    print("kvviz paged attention kernel: " + ("ready" if op is not None else f"not built, SDPA used ({unavailable_reason()})"))
