"""Release-dependent vLLM behaviour: which rules an ``engine_version`` gets.

kvdash's cut-over versions (a release is "at or after" the cut-over or it gets the older rule). The
measured start-ups behind them are in ``tests/planner/sizing/data/vllm_startups.json``:

* V1 engine from 0.8 (the V0 engine before): V0's profile samples at most ``max_num_seqs`` rows with
  V0's default of 256 on every GPU (the GPU-scaled 1024 is a V1 default). Measured on V0: Llama 3 8B
  on H100 profiled 1.26 GiB (vLLM PR 10511), what 256 sampled rows give (1.24); 1024 would give 4.76.
* ``gpu_memory_utilization`` default 0.92 from 0.11 (0.9 before). The reference says "0.9 in most
  releases, 0.92 in recent ones" without naming the release. Logs agree with 0.11: v0.10.2 started
  without the flag asks for 0.9 ("Desired GPU memory utilization is (0.9, ...)"), v0.29.0 and v0.31.0
  for 0.92; no log between them was found, so 0.11 stays our choice.
* Activation profile: the lean sampler profile from 0.17 (llm-d's sweep: Qwen3 14B 5.64 GiB on
  0.15 and 0.16, 2.23 GiB on 0.17 and 0.18).
* Non-torch memory: 0.25 GiB at tp 1 and about 2.1 GiB at tp 2-4 from 0.18; 0.13 GiB and about
  0.55 GiB before (the same sweep: 0.13 on 0.15-0.17, 0.25 on 0.18; v0.19 runs 0.24-0.27 at tp 1,
  2.06-2.21 at tp 2-4; llm-d-benchmark's earlier runs 0.13 at tp 1, 0.54-0.55 at tp 2). The tp > 1
  jump is placed at 0.18 with the tp-1 one; no log between the two sets was found.
* CUDA-graph reserve from 0.21: the KV budget also loses vLLM's estimate of the CUDA-graph pool
  ("CUDA graph memory profiling is enabled (default since v0.21.0)" in v0.21-v0.27 logs; v0.26 logs
  show the estimate deducted).
* ``"latest"`` is the newest release kvdash documents (``LATEST_RELEASE``, 0.33: the rules read from its
  source in docs/reference ``vllm-sizing-2026.md``), with every rule above, the CUDA-graph reserve
  included. Older releases stay selectable by number ("0.19" for the profile of the measured start-ups).
* Hybrid (attention + Mamba / linear attention) models: prefix caching on by default from 0.28
  (vLLM PR #50991; vllm-metal PR #645: "0.28.0 turns prefix caching on by default for hybrid models";
  opt-in before), which puts state layers in ``mamba_cache_mode="align"``.
* Align mode's prefill checkpoint block: Mamba2 mixers from 0.32 (``mamba_mixer2.py``, ``get_kv_cache_spec``
  sets ``num_prefill_checkpoint_blocks=1``; the field exists from 0.29 but no mixer sets it before 0.32); gated
  delta net with FlashInfer's prefill, and its 64-token checkpoint grid, from 0.33 (``qwen_gdn_linear_attn.py``;
  0.32's sets none). Read in each release's wheel (``vllm/v1/kv_cache_interface.py``, the mixers).
* "GPU KV cache size" tokens: ``int(max concurrency x max_model_len)`` (``v1/core/kv_cache_utils.py``,
  ``_report_kv_cache_config``, later ``get_kv_cache_capacity``) from 0.21; 0.20's source still prints
  ``num_blocks // len(groups) x min block size``. Logs agree: v0.19.0 printed 290,864 tokens and 33.04x for
  Qwen3.5-27B at 32K (vLLM issue #40691: 1,487 blocks // 4 groups x 784), v0.24.0 567,978 tokens and 4.33x for
  Qwen3.6-35B-A3B at 128K (noonghunna/club-3090 issue #612: int(299 / 69 x 131,072)).
* Sliding-window and chunked admission: ``VllmConfig.max_in_flight_tokens`` = ``max_concurrent_batches x
  max_num_batched_tokens`` from 0.26 (``config/vllm.py``; 2 batches with async scheduling at pp 1, pp batches
  otherwise); 0.13 to 0.25 reserve one batch (``SlidingWindowSpec.max_memory_usage_bytes`` adds
  ``max_num_batched_tokens``), read in each release's wheel. In 0.33 the V2 model runner, its default, runs
  pp + 1 batches at pp > 1 with async scheduling (on by default with the multiprocessing executor); 0.26 to 0.32
  keep pp there (their V2 defaults were not traced).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import SizingInputError

V1_ENGINE_SINCE = (0, 8)
UTILIZATION_092_SINCE = (0, 11)
ASYNC_IN_FLIGHT_SINCE = (0, 26)
V2_RUNNER_PP_IN_FLIGHT_SINCE = (0, 33)
LEAN_ACTIVATION_SINCE = (0, 17)
NON_TORCH_025_SINCE = (0, 18)
CUDA_GRAPH_RESERVE_SINCE = (0, 21)
HYBRID_PREFIX_CACHING_SINCE = (0, 28)
MAMBA2_PREFILL_CHECKPOINT_SINCE = (0, 32)
GDN_PREFILL_CHECKPOINT_SINCE = (0, 33)
CONCURRENCY_REPORTED_TOKENS_SINCE = (0, 21)
# The newest vLLM release whose rules kvdash documents: what "latest" means.
LATEST_RELEASE = (0, 33)

# ASCII digits only: ``\d`` alone also matches full-width and other Unicode digits, which int() then reads.
_VERSION = re.compile(r"^v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?(?:[.+-]?[A-Za-z0-9.+-]*)?$", re.ASCII)
# The newest vLLM release whose behaviour the references describe (vllm-sizing-2026.md reads 0.33.0's source);
# a later or made-up number ("99.99") would get rules nobody checked, so it is refused.
NEWEST_KNOWN_RELEASE = (0, 33)


@dataclass(frozen=True)
class EngineRules:
    label: str
    version: tuple[int, int]  # "latest" resolves to LATEST_RELEASE
    default_gpu_memory_utilization: float
    lean_activation: bool
    async_in_flight: bool
    # Additions for the activation / non-torch estimate (memory.py).
    v1_engine: bool = True
    non_torch_025: bool = True
    cuda_graph_reserve: bool = False
    # Hybrid (state-layer) models; see the module docstring.
    hybrid_prefix_caching: bool = True
    mamba2_prefill_checkpoint: bool = True
    gdn_prefill_checkpoint: bool = True
    concurrency_reported_tokens: bool = True
    pp_plus_one_in_flight: bool = True


def engine_rules(engine_version: object) -> EngineRules:
    """Rules for ``"latest"`` or a release such as ``"0.8"``, ``"v0.10.1"``."""
    if not isinstance(engine_version, str):
        raise SizingInputError({"engine_version": "must be 'latest' or a release like '0.10'"})
    text = engine_version.strip().lower()
    if text in ("latest", ""):
        version = LATEST_RELEASE
        label = f"latest ({version[0]}.{version[1]})"
    else:
        match = _VERSION.match(text)
        if match is None:
            raise SizingInputError(
                {"engine_version": f"must be 'latest' or a release like '0.10', got {engine_version!r}"}
            )
        version = (int(match.group(1)), int(match.group(2)))
        if version[0] != 0 or not 1 <= version[1] <= NEWEST_KNOWN_RELEASE[1]:
            newest = f"{NEWEST_KNOWN_RELEASE[0]}.{NEWEST_KNOWN_RELEASE[1]}"
            raise SizingInputError(
                {"engine_version": f"must be 'latest' or a vLLM release from 0.1 to {newest}, got {engine_version!r}"}
            )
        label = f"{version[0]}.{version[1]}"
    return EngineRules(
        label=label,
        version=version,
        default_gpu_memory_utilization=0.92 if version >= UTILIZATION_092_SINCE else 0.9,
        lean_activation=version >= LEAN_ACTIVATION_SINCE,
        async_in_flight=version >= ASYNC_IN_FLIGHT_SINCE,
        v1_engine=version >= V1_ENGINE_SINCE,
        non_torch_025=version >= NON_TORCH_025_SINCE,
        cuda_graph_reserve=version >= CUDA_GRAPH_RESERVE_SINCE,
        hybrid_prefix_caching=version >= HYBRID_PREFIX_CACHING_SINCE,
        mamba2_prefill_checkpoint=version >= MAMBA2_PREFILL_CHECKPOINT_SINCE,
        gdn_prefill_checkpoint=version >= GDN_PREFILL_CHECKPOINT_SINCE,
        concurrency_reported_tokens=version >= CONCURRENCY_REPORTED_TOKENS_SINCE,
        pp_plus_one_in_flight=version >= V2_RUNNER_PP_IN_FLIGHT_SINCE,
    )
