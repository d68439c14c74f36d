"""Monitor models, one module per concern; Django finds them all through this package."""

from __future__ import annotations

from .core import (
    ENGINE_SAMPLE_VALUES,
    Endpoint,
    EngineRollup,
    EngineSample,
    Gpu,
    GpuRollup,
    GpuSample,
    HistogramSample,
    IngestDrop,
    Node,
    NodeKey,
    agent_queue,
)

__all__ = [
    "ENGINE_SAMPLE_VALUES",
    "Endpoint",
    "EngineRollup",
    "EngineSample",
    "Gpu",
    "GpuRollup",
    "GpuSample",
    "HistogramSample",
    "IngestDrop",
    "Node",
    "NodeKey",
    "agent_queue",
]
