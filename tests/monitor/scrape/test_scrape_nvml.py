"""NvmlReader against a small stand-in for ``pynvml`` that raises the real binding's exception classes, and
against the real binding on this machine."""

from __future__ import annotations

import ctypes.util
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml
import pytest

from monitor.scrape.nvml import GpuProcess, GpuReading, NvmlReader

GIB = 1024**3


@dataclass
class FakeGpu:
    name: bytes | str = b"NVIDIA H100 80GB HBM3"
    uuid: bytes | str = b"GPU-5f2c0e8a-0000-4000-8000-000000000001"
    total: int = 80 * GIB
    reserved: int = 512 * 1024**2
    used: int = 70 * GIB
    utilization: tuple[int, int] = (87, 41)
    processes: list[tuple[int, int | None]] = field(default_factory=lambda: [(4242, 69 * GIB)])
    fail: dict[str, type[pynvml.NVMLError]] = field(default_factory=dict)  # function name -> error raised


class FakeNvml:
    """The slice of pynvml the reader calls, shaped as nvidia-ml-py returns it: structs with the same field
    names (v2 memory carries ``version`` and ``reserved``), ``usedGpuMemory`` None where NVML cannot tell, and
    the binding's own ``NVMLError`` subclasses (raised with no arguments, as the real ones can be)."""

    NVMLError = pynvml.NVMLError
    nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def __init__(self, gpus: list[FakeGpu], *, driver: bytes | str = b"550.54.15", init_error=None, count_error=None):
        self.gpus = gpus
        self.driver = driver
        self.init_error = init_error
        self.count_error = count_error
        self.calls: list[str] = []

    def _check(self, function: str, gpu: FakeGpu | None = None) -> None:
        self.calls.append(function)
        if gpu is not None and function in gpu.fail:
            raise gpu.fail[function]()

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise self.init_error()

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self):
        self._check("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        self.calls.append("nvmlDeviceGetCount")
        if self.count_error is not None:
            raise self.count_error()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        gpu = self.gpus[index]
        self._check("nvmlDeviceGetHandleByIndex", gpu)
        return gpu

    def nvmlDeviceGetName(self, gpu: FakeGpu):
        self._check("nvmlDeviceGetName", gpu)
        return gpu.name

    def nvmlDeviceGetUUID(self, gpu: FakeGpu):
        self._check("nvmlDeviceGetUUID", gpu)
        return gpu.uuid

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu, version=None):
        if version is None:
            self._check("nvmlDeviceGetMemoryInfo", gpu)
            # v1 counts reserved memory as used
            return SimpleNamespace(
                total=gpu.total, free=gpu.total - gpu.used - gpu.reserved, used=gpu.used + gpu.reserved
            )
        assert version == pynvml.nvmlMemory_v2
        self._check("nvmlDeviceGetMemoryInfo_v2", gpu)
        return SimpleNamespace(
            version=version,
            total=gpu.total,
            reserved=gpu.reserved,
            free=gpu.total - gpu.used - gpu.reserved,
            used=gpu.used,
        )

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu):
        self._check("nvmlDeviceGetUtilizationRates", gpu)
        return SimpleNamespace(gpu=gpu.utilization[0], memory=gpu.utilization[1])

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu):
        self._check("nvmlDeviceGetComputeRunningProcesses", gpu)
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
            for pid, used in gpu.processes
        ]


def test_reads_every_gpu_with_v2_memory_and_decodes_bytes():
    second = FakeGpu(
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-5f2c0e8a-0000-4000-8000-000000000002",
        used=1 * GIB,
        utilization=(0, 0),
        processes=[(4243, None), (4244, 2 * GIB)],
    )
    nvml = FakeNvml([FakeGpu(), second])
    snapshot = NvmlReader(nvml).snapshot()
    assert (snapshot.available, snapshot.error, snapshot.driver_version) == (True, None, "550.54.15")
    assert snapshot.gpus[0] == GpuReading(
        index=0,
        uuid="GPU-5f2c0e8a-0000-4000-8000-000000000001",
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=85_899_345_920,
        memory_used_bytes=75_161_927_680,
        memory_free_bytes=10_200_547_328,
        memory_reserved_bytes=536_870_912,
        utilization_gpu_pct=87.0,
        utilization_memory_pct=41.0,
        processes=(GpuProcess(pid=4242, used_memory_bytes=74_088_185_856),),
    )
    assert snapshot.gpus[1].processes == (GpuProcess(4243, None), GpuProcess(4244, 2_147_483_648))
    assert nvml.calls[0] == "nvmlInit" and nvml.calls[-1] == "nvmlShutdown"
    assert nvml.calls.count("nvmlShutdown") == 1


def test_as_dict_has_the_command_contract():
    payload = json.loads(json.dumps(NvmlReader(FakeNvml([FakeGpu(processes=[(7, None)])])).snapshot().as_dict()))
    assert {"available", "error", "driver_version", "gpus"} <= set(payload)
    (gpu,) = payload["gpus"]
    assert {
        "index",
        "uuid",
        "name",
        "memory_total_bytes",
        "memory_used_bytes",
        "memory_free_bytes",
        "memory_reserved_bytes",
        "utilization_gpu_pct",
        "processes",
    } <= set(gpu)
    assert gpu["processes"] == [{"pid": 7, "used_memory_bytes": None}]


@pytest.mark.parametrize(
    "error",
    [pynvml.NVMLError_FunctionNotFound, pynvml.NVMLError_NotSupported, pynvml.NVMLError_ArgumentVersionMismatch],
)
def test_falls_back_to_v1_memory_when_v2_is_not_there(error):
    gpu = FakeGpu(fail={"nvmlDeviceGetMemoryInfo_v2": error})
    (reading,) = NvmlReader(FakeNvml([gpu])).snapshot().gpus
    assert reading.memory_reserved_bytes is None
    assert (reading.memory_total_bytes, reading.memory_used_bytes) == (85_899_345_920, 75_698_798_592)


def test_falls_back_to_v1_with_bindings_that_take_no_version():
    class OldBindings(FakeNvml):
        def nvmlDeviceGetMemoryInfo(self, gpu, *args):  # no version keyword, as before v2 existed
            return super().nvmlDeviceGetMemoryInfo(gpu)

    (reading,) = NvmlReader(OldBindings([FakeGpu()])).snapshot().gpus
    assert reading.memory_reserved_bytes is None and reading.memory_used_bytes == 75_698_798_592


def test_a_field_not_supported_is_none_and_the_rest_goes_on():
    gpu = FakeGpu(
        fail={
            "nvmlDeviceGetUtilizationRates": pynvml.NVMLError_NotSupported,
            "nvmlDeviceGetComputeRunningProcesses": pynvml.NVMLError_NoPermission,
        }
    )
    snapshot = NvmlReader(FakeNvml([gpu], driver="550.54.15")).snapshot()
    (reading,) = snapshot.gpus
    assert (snapshot.available, snapshot.error) == (True, None)
    assert (reading.utilization_gpu_pct, reading.utilization_memory_pct, reading.processes) == (None, None, ())
    assert reading.memory_used_bytes == 75_161_927_680


def test_a_lost_gpu_is_reported_and_the_others_are_read():
    lost = FakeGpu(fail={"nvmlDeviceGetHandleByIndex": pynvml.NVMLError_GpuIsLost})
    snapshot = NvmlReader(FakeNvml([FakeGpu(), lost])).snapshot()
    assert (snapshot.available, snapshot.error) == (True, "GPU 1: GPU is lost")
    assert [gpu.index for gpu in snapshot.gpus] == [0]


def test_a_driver_version_that_cannot_be_read_is_none():
    class NoDriverVersion(FakeNvml):
        def nvmlSystemGetDriverVersion(self):
            raise pynvml.NVMLError_NotSupported()

    snapshot = NvmlReader(NoDriverVersion([FakeGpu()])).snapshot()
    assert snapshot.available and snapshot.driver_version is None


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (pynvml.NVMLError_LibraryNotFound, "NVML unavailable: NVML Shared Library Not Found"),
        (pynvml.NVMLError_DriverNotLoaded, "NVML unavailable: Driver Not Loaded"),
        (pynvml.NVMLError_NoPermission, "NVML unavailable: Insufficient Permissions"),
    ],
)
def test_init_failure_is_unavailable_with_the_reason(error, reason):
    nvml = FakeNvml([FakeGpu()], init_error=error)
    snapshot = NvmlReader(nvml).snapshot()
    assert (snapshot.available, snapshot.error, snapshot.gpus, snapshot.driver_version) == (False, reason, (), None)
    assert "nvmlShutdown" not in nvml.calls  # nothing to balance


def test_no_gpu_is_unavailable():
    snapshot = NvmlReader(FakeNvml([])).snapshot()
    assert (snapshot.available, snapshot.error) == (False, "NVML unavailable: no GPU found")
    assert snapshot.driver_version == "550.54.15"


def test_a_failure_after_init_is_unavailable_and_still_shuts_down():
    nvml = FakeNvml([FakeGpu()], count_error=pynvml.NVMLError_Uninitialized)
    snapshot = NvmlReader(nvml).snapshot()
    assert (snapshot.available, snapshot.error) == (False, "NVML unavailable: Uninitialized")
    assert nvml.calls[-1] == "nvmlShutdown"


def test_every_gpu_failing_is_unavailable():
    lost = {"nvmlDeviceGetName": pynvml.NVMLError_GpuIsLost}
    snapshot = NvmlReader(FakeNvml([FakeGpu(fail=lost), FakeGpu(fail=lost)])).snapshot()
    assert (snapshot.available, snapshot.error) == (False, "NVML unavailable: GPU 0: GPU is lost; GPU 1: GPU is lost")


HAS_NVML = ctypes.util.find_library("nvidia-ml") is not None


@pytest.mark.skipif(HAS_NVML, reason="this machine has the NVML library")
def test_the_real_binding_on_a_machine_without_nvml_is_unavailable():
    snapshot = NvmlReader().snapshot()
    assert (snapshot.available, snapshot.error, snapshot.gpus) == (
        False,
        "NVML unavailable: NVML Shared Library Not Found",
        (),
    )


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no GPU here")
def test_the_real_binding_agrees_with_nvidia_smi():  # pragma: no cover - runs on GPU machines only
    snapshot = NvmlReader().snapshot()
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,memory.used,memory.total", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert snapshot.available
    for line, gpu in zip(smi.strip().splitlines(), snapshot.gpus, strict=True):
        index, used_mib, total_mib = (int(part) for part in line.split(","))
        assert gpu.index == index
        assert gpu.memory_total_bytes // 2**20 == total_mib
        assert abs(gpu.memory_used_bytes / 2**20 - used_mib) <= 64  # memory moves between the two reads
