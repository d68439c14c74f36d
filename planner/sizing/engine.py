"""Release-dependent vLLM behaviour: which rules an ``engine_version`` gets.

kvdash's cut-over versions (a release is "at or after" the cut-over or it gets the older rule):

* ``gpu_memory_utilization`` default 0.92 from 0.11 (0.9 before). The reference says "0.9 in most
  releases, 0.92 in recent ones" without naming the release; 0.11 is our choice.
* Activation profile: the lean profile from 0.17 (the reference measures Qwen3 14B at 5.64 GiB on
  0.15-0.16 and 2.23 GiB on 0.17+; Llama 3.1 8B 4.76 GiB on an older release, 1.89 GiB on 0.19).
* Sliding-window admission: ``max_concurrent_batches x max_num_batched_tokens`` in flight (2 batches
  with async scheduling at pp 1, pp batches otherwise) from 0.14; one batch before. The reference
  cites the rule from recent sources (``VllmConfig.max_in_flight_tokens``); 0.14 is our choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import SizingInputError

UTILIZATION_092_SINCE = (0, 11)
LEAN_ACTIVATION_SINCE = (0, 17)
ASYNC_IN_FLIGHT_SINCE = (0, 14)

_VERSION = re.compile(r"^v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?(?:[.+-]?[A-Za-z0-9.+-]*)?$")


@dataclass(frozen=True)
class EngineRules:
    label: str
    version: tuple[int, int] | None  # None for "latest"
    default_gpu_memory_utilization: float
    lean_activation: bool
    async_in_flight: bool


def engine_rules(engine_version: object) -> EngineRules:
    """Rules for ``"latest"`` or a release such as ``"0.8"``, ``"v0.10.1"``."""
    if not isinstance(engine_version, str):
        raise SizingInputError({"engine_version": "must be 'latest' or a release like '0.10'"})
    text = engine_version.strip().lower()
    if text in ("latest", ""):
        return EngineRules("latest", None, 0.92, True, True)
    match = _VERSION.match(text)
    if match is None:
        raise SizingInputError({"engine_version": f"must be 'latest' or a release like '0.10', got {engine_version!r}"})
    version = (int(match.group(1)), int(match.group(2)))
    return EngineRules(
        label=f"{version[0]}.{version[1]}",
        version=version,
        default_gpu_memory_utilization=0.92 if version >= UTILIZATION_092_SINCE else 0.9,
        lean_activation=version >= LEAN_ACTIVATION_SINCE,
        async_in_flight=version >= ASYNC_IN_FLIGHT_SINCE,
    )
