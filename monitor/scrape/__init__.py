"""Scrapers: plain classes that read vLLM's ``/metrics`` and NVML and return data (never the ORM)."""

from __future__ import annotations

from .nvml import GpuProcess, GpuReading, NvmlReader, NvmlSnapshot
from .records import EngineRecord, Histogram, ScrapeError, ScrapeResult
from .vllm import VllmScraper, parse_vllm_metrics

__all__ = [
    "EngineRecord",
    "GpuProcess",
    "GpuReading",
    "Histogram",
    "NvmlReader",
    "NvmlSnapshot",
    "ScrapeError",
    "ScrapeResult",
    "VllmScraper",
    "parse_vllm_metrics",
]
