"""kvviz's OpenAI-compatible server (FastAPI + uvicorn, as vLLM's): completions, chat, models, health,
Prometheus metrics with vLLM's names, and vLLM's KV-event publisher, all over kvviz's one engine.

Modules: protocol (request models), errors (OpenAI error JSON), config (settings), body (the JSON body
reader), chat (the model's chat template), serving (engine bridge, admission, disconnect-aborts),
responses (response and stream-chunk shapes), metrics, kv_publisher, routes, app (the factory),
runner (uvicorn in a thread or in the foreground), embedded (the API inside the Streamlit process).
"""
