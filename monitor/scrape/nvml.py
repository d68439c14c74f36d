"""Read the node's GPUs through NVML (``pynvml``, from the nvidia-ml-py package): memory, utilisation and
per-process memory. A node without the NVML library, a driver or a GPU gets ``available=False`` and a reason;
the vLLM scrape on the same node goes on without it."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

UNAVAILABLE = "NVML unavailable"


@dataclass(frozen=True)
class GpuProcess:
    pid: int  # a host PID, also from inside a container
    used_memory_bytes: int | None  # None where NVML cannot tell (WDDM, some MIG set-ups)

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "used_memory_bytes": self.used_memory_bytes}


@dataclass(frozen=True)
class GpuReading:
    """One GPU. Memory in bytes as NVML reports it; total is not always free + used (reserved memory)."""

    index: int
    uuid: str
    name: str
    memory_total_bytes: int
    memory_used_bytes: int
    memory_free_bytes: int
    memory_reserved_bytes: int | None  # only from the v2 memory API
    utilization_gpu_pct: float | None
    utilization_memory_pct: float | None
    processes: tuple[GpuProcess, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "memory_total_bytes": self.memory_total_bytes,
            "memory_used_bytes": self.memory_used_bytes,
            "memory_free_bytes": self.memory_free_bytes,
            "memory_reserved_bytes": self.memory_reserved_bytes,
            "utilization_gpu_pct": self.utilization_gpu_pct,
            "utilization_memory_pct": self.utilization_memory_pct,
            "processes": [process.as_dict() for process in self.processes],
        }


@dataclass(frozen=True)
class NvmlSnapshot:
    """All GPUs at one instant. ``error`` also carries per-GPU trouble while ``available`` stays True."""

    available: bool
    error: str | None
    driver_version: str | None
    gpus: tuple[GpuReading, ...]
    taken_at: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "error": self.error,
            "driver_version": self.driver_version,
            "taken_at": self.taken_at,
            "gpus": [gpu.as_dict() for gpu in self.gpus],
        }


def _text(value: object) -> str:
    # nvidia-ml-py decodes C strings; older pynvml bindings returned bytes.
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _reason(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception:  # pynvml's __str__ asks the library for unknown codes; with no library that fails too
        text = ""
    return text or type(error).__name__


class NvmlReader:
    """``snapshot()`` never raises: NVML's failures become ``available=False`` or per-field ``None``."""

    def __init__(self, nvml_module: ModuleType | Any | None = None) -> None:
        self._nvml = nvml_module

    def _module(self) -> Any:
        if self._nvml is None:
            import pynvml  # imported on first use: a web process never needs the bindings

            self._nvml = pynvml
        return self._nvml

    def snapshot(self) -> NvmlSnapshot:
        taken_at = time.time()
        try:
            nvml = self._module()
        except ImportError as error:
            return NvmlSnapshot(False, f"{UNAVAILABLE}: {error}", None, (), taken_at)
        try:
            nvml.nvmlInit()
        except Exception as error:  # NVMLError_LibraryNotFound on a machine without GPUs, DriverNotLoaded, ...
            return NvmlSnapshot(False, f"{UNAVAILABLE}: {_reason(error)}", None, (), taken_at)
        try:
            return self._read(nvml, taken_at)
        except Exception as error:
            return NvmlSnapshot(False, f"{UNAVAILABLE}: {_reason(error)}", None, (), taken_at)
        finally:
            # Reference counted: balances our nvmlInit only. Nothing useful to do if it fails after a read.
            with contextlib.suppress(Exception):
                nvml.nvmlShutdown()

    def _read(self, nvml: Any, taken_at: float) -> NvmlSnapshot:
        driver: str | None
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except nvml.NVMLError:
            driver = None
        count = nvml.nvmlDeviceGetCount()
        gpus: list[GpuReading] = []
        problems: list[str] = []
        for index in range(count):
            try:
                gpus.append(self._gpu(nvml, index))
            except nvml.NVMLError as error:  # GpuIsLost, NoPermission...: report it, read the others
                problems.append(f"GPU {index}: {_reason(error)}")
        if not gpus:
            # No GPU to report is "unavailable" for the caller, whatever the cause.
            reason = "; ".join(problems) if problems else "no GPU found"
            return NvmlSnapshot(False, f"{UNAVAILABLE}: {reason}", driver, (), taken_at)
        return NvmlSnapshot(
            available=True,
            error="; ".join(problems) or None,
            driver_version=driver,
            gpus=tuple(gpus),
            taken_at=taken_at,
        )

    def _gpu(self, nvml: Any, index: int) -> GpuReading:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        name = _text(nvml.nvmlDeviceGetName(handle))
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        memory, reserved = self._memory(nvml, handle)
        util_gpu: float | None
        util_memory: float | None
        try:
            rates = nvml.nvmlDeviceGetUtilizationRates(handle)
            util_gpu, util_memory = float(rates.gpu), float(rates.memory)
        except nvml.NVMLError:  # NotSupported on some MIG and vGPU set-ups
            util_gpu = util_memory = None
        try:
            running = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except nvml.NVMLError:
            running = []
        processes = tuple(
            GpuProcess(
                pid=int(process.pid),
                used_memory_bytes=None if process.usedGpuMemory is None else int(process.usedGpuMemory),
            )
            for process in running
        )
        return GpuReading(
            index=index,
            uuid=uuid,
            name=name,
            memory_total_bytes=int(memory.total),
            memory_used_bytes=int(memory.used),
            memory_free_bytes=int(memory.free),
            memory_reserved_bytes=reserved,
            utilization_gpu_pct=util_gpu,
            utilization_memory_pct=util_memory,
            processes=processes,
        )

    def _memory(self, nvml: Any, handle: object) -> tuple[Any, int | None]:
        """The v2 memory struct (with ``reserved``; its ``used`` matches nvidia-smi on recent drivers), else v1."""
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None:
            try:
                memory = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
                return memory, int(memory.reserved)
            # FunctionNotFound (old driver), NotSupported / ArgumentVersionMismatch; TypeError: old bindings
            # without the version argument.
            except (nvml.NVMLError, TypeError):
                pass
        return nvml.nvmlDeviceGetMemoryInfo(handle), None
