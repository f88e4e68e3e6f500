"""The memory of every vLLM engine autotune builds (:class:`~autotune.engines.vllm.runner.VllmRunner`)
or serves (``autotune validate``), set by autotune from what the machine has and the models need.

Told nothing, vLLM's CPU backend claims ``gpu_memory_utilization`` (0.92) of the NUMA node for its KV
cache (``vllm/v1/worker/cpu_worker.py``, vLLM 0.32.0): a validation's server grew to 22 GiB on a
24 GiB machine and the kernel's OOM killer ended it (issue 38), and a second engine refuses to start
("Available memory on node 0 ... is less than desired CPU memory utilization"). So each engine is given

* on a CPU, a KV cache of ``kv_cache_memory_bytes`` (``EngineArgs`` / ``vllm serve
  --kv-cache-memory-bytes``, ``vllm/config/cache.py``; the CPU worker takes it as an explicit size):
  room for ``max_num_seqs`` sequences of the target's whole context (``max_position_embeddings``) at
  the models' KV bytes per position (:func:`autotune.models.fit.bytes_per_position`: the target's, plus
  the draft's or the MTP layers'), times :data:`KV_HEADROOM`; at most an equal share of what the
  machine has available now (``MemAvailable``, or less under a cgroup limit) for the engines up at
  once, less their weights and :data:`ENGINE_PROCESS_BYTES` each, and at least one whole-context
  sequence (vLLM refuses to start with less). Bytes rather than ``VLLM_CPU_KVCACHE_SPACE``, whose whole
  GiB are ~100x what the built-in models need (each kept engine would hold a GiB). A
  ``VLLM_CPU_KVCACHE_SPACE`` in the environment is the user's choice, and vLLM's CPU platform lets it
  win (``vllm/platforms/cpu.py``): it is kept and named.
* on a GPU, ``gpu_memory_utilization`` = 0.9 (vLLM's default) shared equally by the engines up at once.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from autotune.errors import ConfigurationError
from autotune.models import fit
from autotune.models.folder import HfModel
from autotune.models.footprint import UNBOUNDED_CONTEXT, folder_footprint

GIB = 1 << 30
MIB = 1 << 20
KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
# Blocks are allocated whole and the scheduler keeps some free: room for a quarter more.
KV_HEADROOM = 1.25
# What one vLLM engine's processes hold on our CPU besides its weights and KV cache: the engine core
# and its model worker (torch, the compiled graph, buffers; measured 0.64 + 0.82 GiB resident with the
# built-in models), and the API server for `vllm serve` (0.68 GiB): docs/validation.md, "Rounds".
ENGINE_PROCESS_BYTES = int(1.75 * GIB)
SERVER_PROCESS_BYTES = int(0.75 * GIB)
GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default, for one engine on the device
UNKNOWN_CONTEXT = 2048  # vLLM's max_model_len when config.json names no context length


@dataclass(frozen=True)
class EngineMemory:
    """What one engine is given: ``kv_cache_bytes`` on a CPU, ``gpu_memory_utilization`` on a GPU;
    ``user_kv_gib``: the ``VLLM_CPU_KVCACHE_SPACE`` of the environment, which vLLM lets win;
    ``engines``: how many such engines may be up at once (at most the number asked for)."""

    engines: int
    kv_cache_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    user_kv_gib: int | None = None

    def engine_arguments(self) -> dict[str, float | int]:
        """``EngineArgs`` fields."""
        if self.gpu_memory_utilization is not None:
            return {"gpu_memory_utilization": self.gpu_memory_utilization}
        return {"kv_cache_memory_bytes": self.kv_cache_bytes} if self.kv_cache_bytes is not None else {}

    def server_arguments(self) -> list[str]:
        """The same as ``vllm serve`` flags."""
        return [f"--{name.replace('_', '-')}={value}" for name, value in self.engine_arguments().items()]

    @property
    def reserved_bytes(self) -> int | None:
        """The KV cache bytes vLLM reserves on a CPU (None on a GPU)."""
        if self.user_kv_gib is not None:
            return self.user_kv_gib * GIB
        return self.kv_cache_bytes

    def describe(self) -> str:
        if self.gpu_memory_utilization is not None:
            return f"gpu_memory_utilization {self.gpu_memory_utilization:.2f}"
        if self.user_kv_gib is not None:
            return f"KV cache {self.user_kv_gib} GiB ({KV_ENV} of the environment)"
        return f"KV cache {self.kv_cache_bytes / MIB:.0f} MiB"


@dataclass(frozen=True)
class EngineHost:
    """Where the engines run: up to ``engines`` up at once, on a CPU or a GPU; ``server``: a
    ``vllm serve`` process each (its API server too); ``available_bytes``: the memory they share
    (None: what the machine has now)."""

    engines: int
    on_cpu: bool
    server: bool = False
    available_bytes: int | None = None


def engine_memory(method: str, target: HfModel, draft: HfModel | None, max_num_seqs: int,
                  host: EngineHost) -> EngineMemory:
    """The memory of each of the ``host``'s engines (module doc), serving ``method`` (with its
    ``draft`` folder for method draft) with up to ``max_num_seqs`` sequences. Fewer engines where fewer
    fit; ConfigurationError, one line, when not even one sequence of the target's context fits beside
    one engine's weights."""
    engines, available_bytes = host.engines, host.available_bytes
    if not host.on_cpu:
        return EngineMemory(engines, gpu_memory_utilization=round(GPU_MEMORY_UTILIZATION / engines, 3))
    user = os.environ.get(KV_ENV, "").strip()
    if user:
        return EngineMemory(engines, user_kv_gib=_user_gib(user))
    own = folder_footprint(target)
    theirs = folder_footprint(draft) if draft is not None and method == "draft" else None
    per_position = fit.bytes_per_position(method, own, theirs)
    fixed = fit.weight_bytes(method, own, theirs) + ENGINE_PROCESS_BYTES + (SERVER_PROCESS_BYTES if host.server else 0)
    context = own.max_seq_len if own.max_seq_len != UNBOUNDED_CONTEXT else UNKNOWN_CONTEXT
    sequence = context * per_position
    usable = fit.usable_bytes(available_memory_bytes() if available_bytes is None else available_bytes)
    fitting = min(engines, usable // (fixed + sequence))
    if fitting < 1:
        raise ConfigurationError(
            f"not enough memory for a vLLM engine of {target.path.name}: it needs {(fixed + sequence) / GIB:.1f} GiB "
            f"(weights, processes and one {context}-token sequence of KV cache), {usable / GIB:.1f} GiB is usable; "
            "free memory and try again")
    need = math.ceil(max_num_seqs * sequence * KV_HEADROOM)
    return EngineMemory(fitting, kv_cache_bytes=_whole_mib(min(need, usable // fitting - fixed)))


def _user_gib(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(f"{KV_ENV}={value!r} is not a whole number of GiB (vLLM reads it with int())") from None


def _whole_mib(n_bytes: int) -> int:
    return math.ceil(n_bytes / MIB) * MIB


def available_memory_bytes() -> int:
    """What this machine can still give: ``MemAvailable``, or what a cgroup memory limit leaves when less."""
    available = _meminfo("MemAvailable")
    limit = _cgroup_room()
    return min(available, limit) if limit is not None else available


def _meminfo(field: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise ConfigurationError(f"/proc/meminfo has no {field}: cannot size the KV cache")


# (limit file, usage file) of cgroup v2, then v1.
CGROUP_MEMORY = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"))


def _cgroup_room() -> int | None:
    """Limit minus usage of this process's memory cgroup; None without a limit."""
    for limit_file, usage_file in CGROUP_MEMORY:
        try:
            limit, usage = Path(limit_file).read_text().strip(), Path(usage_file).read_text().strip()
        except OSError:
            continue
        if limit == "max" or int(limit) >= 1 << 60:  # v1 writes "no limit" as a number near 2^63
            return None
        return max(0, int(limit) - int(usage))
    return None
