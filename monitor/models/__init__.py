"""Monitor models, one module per concern; Django finds them all through this package."""

from __future__ import annotations

from .alerts import Alert, AlertRule, AlertState, Notification, RuleKind, Silence
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
from .sources import PrometheusSource, PrometheusTarget

__all__ = [
    "ENGINE_SAMPLE_VALUES",
    "Alert",
    "AlertRule",
    "AlertState",
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
    "Notification",
    "PrometheusSource",
    "PrometheusTarget",
    "RuleKind",
    "Silence",
    "agent_queue",
]
