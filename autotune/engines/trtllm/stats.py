"""Turn what TensorRT-LLM reports into a :class:`~autotune.engines.base.Measurement`. Pure.

Two counted sources, nothing inferred from the configured depth:

* per iteration, ``llm.get_stats_async()`` dicts (``enable_iter_perf_stats=True``):
  ``iterLatencyMS``, ``gpuMemUsage`` (bytes), ``kvCacheStats`` {``maxNumBlocks``, ``tokensPerBlock``},
  ``inflightBatchingStats.numContextRequests`` / ``numGenRequests`` and ``specDecodingStats``
  {``numDraftTokens``, ``numAcceptedTokens``, ``numRequestsWithDraftTokens``, ``iterLatencyMS``
  (drafting only)} (field names of ``cpp/include/tensorrt_llm/executor/types.h`` ``IterationStats``
  / ``KvCacheStats`` / ``SpecDecodingStats``);
* per request, the streamed ``RequestOutput``: its token ids and ``decoding_iter``.

**Steps per request.** The PyTorch backend (``tensorrt_llm.LLM`` from 1.0 on) counts the context
step in ``decoding_iter``: ``TorchSampler.update_requests`` runs ``req.py_decoding_iter += 1`` for
each finished context request as well as for each generation request
(``tensorrt_llm/_torch/pyexecutor/sampler.py``, NVIDIA/TensorRT-LLM at 28edbcd; the same in the
older TorchSampler and in ``MTPSampler``), and ``py_executor.py`` copies ``py_decoding_iter`` into
the response. A request's generation (verification) steps are therefore ``decoding_iter - 1``. The
TensorRT-engine backend (``tensorrt_llm.LLM`` before 1.0) advances ``mDecodingIter`` in generation
steps only (``llmReq->advanceDecodingIter()`` in the generation loop of
``cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp``, stored copy at b35ac1b), which is why trtllm-bench counts ``decode_iteration + 1``
iterations per request (``tensorrt_llm/bench/dataclasses/reporting.py`` at 2787769): there
``decoding_iter`` itself is the generation steps. :func:`generation_steps` chooses by the release
(``tensorrt_llm.__version__``, read in the worker).

**Drafting time.** ``specDecodingStats.iterLatencyMS`` is filled only from a two-model drafter's
``last_draft_latency_ms`` (``ModelDrafter``, ``tensorrt_llm/_torch/speculative/model_drafter.py``;
``PyExecutor._update_iter_stats`` in ``tensorrt_llm/_torch/pyexecutor/py_executor.py`` at 9521caf
writes 0 otherwise): one-model MTP / EAGLE-3 and n-gram report 0, and in the older copies read
nothing fills it from a drafter.
So drafting counts as timed only for a two-model drafter whose iterations reported a positive
latency; otherwise ``propose_time_s`` is None ("not measured", never 0) and ``verify_time_s``
holds the whole of the generation iterations, drafting included.

**Memory.** ``gpuMemUsage`` is ``total - free`` of ``torch.cuda.mem_get_info()`` (same
``_update_iter_stats``): device-wide, every process and the pre-allocated KV pool included, about
``free_gpu_memory_fraction`` of the GPU whatever the configuration. It is kept, labelled, as
``device_memory_bytes``. ``peak_memory_bytes`` is what the configuration determines: the weights
of the model folders plus the KV pool, ``kvCacheStats.maxNumBlocks x tokensPerBlock`` tokens at
the models' KV bytes per token (``memory_kind = trtllm_weights_and_kv_cache``); without
``kvCacheStats`` or model sizes it is 0 with ``memory_kind = unavailable``.

Definitions (the embedded engine's, see ``Measurement``): ``drafted_tokens`` / ``accepted_tokens``
are the sums of ``numDraftTokens`` / ``numAcceptedTokens``; ``acceptance_length`` = tokens generated
after the first / generation steps, summed over requests (prefill excluded, 1.0 without
speculation); ``sequence_steps`` = those generation steps; ``target_passes`` = iterations with at
least one request in generation. ``prefill_time_s`` = iterations with no request in generation.
Not reported by TensorRT-LLM, so left empty: ``acceptance_alpha`` (needs each step's first
rejection) and ``acceptance_by_position``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from autotune.analysis.steady import RequestResult
from autotune.engines.base import Measurement, RunContext, RunCounters, measurement_of_run

STATS_TIMEOUT_S = 1.0  # get_stats_async stops after this long without a new iteration
MEMORY_KIND = "trtllm_weights_and_kv_cache"
NO_MEMORY_KIND = "unavailable"
# First release whose tensorrt_llm.LLM is the PyTorch backend (decoding_iter counts the context step).
PYTORCH_DEFAULT_SINCE = (1, 0)


@dataclass(frozen=True)
class RequestRecord(RequestResult):
    """One streamed request (times in seconds since the run started) and its ``decoding_iter``."""

    decoding_iter: int


@dataclass(frozen=True)
class ModelMemory:
    """What the model folders of a configuration occupy: weight bytes and KV-cache bytes per token
    (target, plus MTP layers or the draft's own cache), from config.json and the safetensors headers."""

    weight_bytes: int
    kv_bytes_per_token: int


@dataclass(frozen=True)
class IterationSummary:
    """Sums over the iteration statistics of one run (see the module doc)."""

    iterations: int
    target_passes: int
    drafted_tokens: int
    accepted_tokens: int
    requests_with_drafts: int
    propose_time_s: float | None  # None: drafting not timed by the engine (module doc)
    verify_time_s: float
    prefill_time_s: float
    peak_gpu_memory_bytes: int | None  # gpuMemUsage: device-wide
    kv_cache_tokens: int | None = None  # kvCacheStats.maxNumBlocks x tokensPerBlock (largest seen)


def parse_stat(entry: dict[str, Any] | str) -> dict[str, Any]:
    """One iteration's statistics as a dict (older releases hand out JSON strings)."""
    return json.loads(entry) if isinstance(entry, str) else entry


def summarize_iterations(stats: Iterable[dict[str, Any] | str], drafter_timed: bool = False) -> IterationSummary:
    """``drafter_timed``: the speculative mode is one whose drafting the engine times (a two-model
    drafter, :data:`autotune.engines.trtllm.mapping.TWO_MODEL_KINDS`)."""
    iterations = passes = drafted = accepted = with_drafts = 0
    propose_ms = generation_ms = prefill_ms = 0.0
    peak: int | None = None
    kv_tokens: int | None = None
    for stat in map(parse_stat, stats):
        iterations += 1
        latency_ms = float(stat.get("iterLatencyMS") or 0.0)
        spec = stat.get("specDecodingStats") or {}
        drafted += int(spec.get("numDraftTokens") or 0)
        accepted += int(spec.get("numAcceptedTokens") or 0)
        with_drafts += int(spec.get("numRequestsWithDraftTokens") or 0)
        if int((stat.get("inflightBatchingStats") or {}).get("numGenRequests") or 0) > 0:
            passes += 1
            generation_ms += latency_ms
            propose_ms += float(spec.get("iterLatencyMS") or 0.0)
        else:
            prefill_ms += latency_ms
        if stat.get("gpuMemUsage") is not None:
            peak = max(peak or 0, int(stat["gpuMemUsage"]))
        kv = stat.get("kvCacheStats") or {}
        if kv.get("maxNumBlocks") and kv.get("tokensPerBlock"):
            kv_tokens = max(kv_tokens or 0, int(kv["maxNumBlocks"]) * int(kv["tokensPerBlock"]))
    timed = drafter_timed and propose_ms > 0  # 0 means "not filled", never "no time" (module doc)
    return IterationSummary(
        iterations, passes, drafted, accepted, with_drafts,
        propose_time_s=propose_ms / 1e3 if timed else None,
        verify_time_s=max(0.0, generation_ms - (propose_ms if timed else 0.0)) / 1e3,
        prefill_time_s=prefill_ms / 1e3,
        peak_gpu_memory_bytes=peak,
        kv_cache_tokens=kv_tokens,
    )


def release(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a ``tensorrt_llm.__version__`` such as ``1.2.0rc3`` (None if unreadable)."""
    match = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return (int(match[1]), int(match[2])) if match else None


def counts_context_step(version: str | None) -> bool:
    """Whether ``decoding_iter`` of this release's ``tensorrt_llm.LLM`` includes the context step
    (module doc). Unknown versions are taken as current ones (the PyTorch backend)."""
    parsed = release(version)
    return parsed is None or parsed >= PYTORCH_DEFAULT_SINCE


def generation_steps(record: RequestRecord, version: str | None = None) -> int:
    """A request's generation (verification) steps from its ``decoding_iter``."""
    if counts_context_step(version):
        return max(0, record.decoding_iter - 1)
    return max(0, record.decoding_iter)


def build_measurement(
    records: list[RequestRecord],
    summary: IterationSummary,
    run: RunContext,
    wall_time_s: float,
    version: str | None = None,
    memory: ModelMemory | None = None,
) -> Measurement:
    """The measurement of ``run`` (``records`` in request order). ``version``:
    ``tensorrt_llm.__version__`` (how ``decoding_iter`` counts); ``memory``: the models' sizes."""
    sequence_steps = sum(generation_steps(r, version) for r in records)
    after_first = sum(max(0, len(r.tokens) - 1) for r in records)
    if memory is not None and summary.kv_cache_tokens is not None:
        peak, kind = memory.weight_bytes + summary.kv_cache_tokens * memory.kv_bytes_per_token, MEMORY_KIND
    else:
        peak, kind = 0, NO_MEMORY_KIND
    counters = RunCounters(
        drafted_tokens=summary.drafted_tokens,
        accepted_tokens=summary.accepted_tokens,
        acceptance_alpha=None,
        acceptance_length=max(1.0, after_first / sequence_steps) if sequence_steps else 1.0,
        acceptance_by_position=[],
        target_passes=summary.target_passes,
        sequence_steps=sequence_steps,
        propose_time_s=summary.propose_time_s,
        verify_time_s=summary.verify_time_s,
        prefill_time_s=summary.prefill_time_s,
        peak_memory_bytes=peak,
        memory_kind=kind,
        device_memory_bytes=summary.peak_gpu_memory_bytes,
    )
    return measurement_of_run(run, records, counters, wall_time_s)
