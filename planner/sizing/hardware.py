"""GPUs: CUDA-visible memory, bandwidth, compute and price."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SizingInputError
from .validation import as_float, as_int

GIB = 2**30

# Memory the engine may use is the total CUDA reports (``torch.cuda.mem_get_info()[1]``), which is
# below the marketed figure. Where the reference gives a measured total we use it; otherwise:
# HBM parts (marketed GB are binary GiB): 79.18 / 80, the ratio measured on 80 GB cards.
HBM_VISIBLE_FRACTION = 79.18 / 80
# GDDR parts: marketed GiB minus the ~0.35 GiB CUDA already keeps on an RTX 4090 (23.65 of 24 GiB);
# data-centre GDDR cards run with ECC on by default, which takes 1/16 of the memory first.
GDDR_DRIVER_RESERVE_BYTES = round(0.35 * GIB)
GDDR_ECC_FRACTION = 15 / 16


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. ``memory_bytes`` is the CUDA-visible total that vLLM multiplies by the utilisation."""

    slug: str
    name: str
    memory_bytes: int
    marketed_memory_gb: float
    bandwidth_bytes_per_s: float
    bf16_tflops: float
    price_per_hour: float | None = None
    fp8: bool = False
    # Additions beyond docs/sizing-engine.md.
    memory_note: str = ""

    def __post_init__(self) -> None:
        errors: dict[str, str] = {}
        as_int(errors, "memory_bytes", self.memory_bytes, maximum=2**50)
        as_float(errors, "marketed_memory_gb", self.marketed_memory_gb, minimum=0.0, maximum=1e6)
        as_float(errors, "bandwidth_bytes_per_s", self.bandwidth_bytes_per_s, minimum=0.0, inclusive_minimum=False)
        as_float(errors, "bf16_tflops", self.bf16_tflops, minimum=0.0, inclusive_minimum=False)
        if self.price_per_hour is not None:
            as_float(errors, "price_per_hour", self.price_per_hour, minimum=0.0)
        if errors:
            raise SizingInputError(errors)

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    @property
    def is_a100(self) -> bool:
        return "a100" in self.name.lower() or "a100" in self.slug.lower()


def custom_gpu(
    *,
    memory_gib: float,
    name: str = "Custom GPU",
    bandwidth_tbs: float = 1.0,
    bf16_tflops: float = 100.0,
    price_per_hour: float | None = None,
    fp8: bool = False,
) -> GpuSpec:
    """A GPU from a CUDA-visible memory figure (GiB); speed figures default to modest placeholders."""
    errors: dict[str, str] = {}
    as_float(errors, "memory_gib", memory_gib, minimum=0.0, maximum=1e6, inclusive_minimum=False)
    as_float(errors, "bandwidth_tbs", bandwidth_tbs, minimum=0.0, maximum=1e6, inclusive_minimum=False)
    if errors:
        raise SizingInputError(errors)
    return GpuSpec(
        slug="custom",
        name=name,
        memory_bytes=round(memory_gib * GIB),
        marketed_memory_gb=memory_gib,
        bandwidth_bytes_per_s=bandwidth_tbs * 1e12,
        bf16_tflops=bf16_tflops,
        price_per_hour=price_per_hour,
        fp8=fp8,
        memory_note="custom: memory given as the CUDA-visible total",
    )
