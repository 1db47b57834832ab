"""kvviz's serving engine (torch runtime): paged K/V memory, a vLLM-v1 scheduler over the mirror's block
manager, a model runner with paged attention, sampling, and a thread-safe loop. See docs/ENGINE.md."""

from kvviz.engine.config import EngineConfig
from kvviz.engine.engine import LLMEngine, engine_supports
from kvviz.engine.loop import EngineLoop, RequestStream, get_engine_loop
from kvviz.engine.request import EngineStats, Request, RequestMetrics, RequestOutput, RequestStatus
from kvviz.engine.sampling import SamplingParams
from kvviz.engine.steps import StepItem, StepRecord

__all__ = [
    "EngineConfig", "EngineLoop", "EngineStats", "LLMEngine", "Request", "RequestMetrics", "RequestOutput",
    "RequestStatus", "RequestStream", "SamplingParams", "StepItem", "StepRecord", "engine_supports", "get_engine_loop",
]
