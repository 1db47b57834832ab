"""Pure-Python engine maths: hashing, block pool and manager, radix tree, prompt comparison, KV sizes.

Nothing here imports torch or streamlit, so it is fast to import and fully unit-tested.
"""
