"""Monitor data (nodes, endpoints, GPUs, samples) arrives with the monitor's agents issue."""

from __future__ import annotations
