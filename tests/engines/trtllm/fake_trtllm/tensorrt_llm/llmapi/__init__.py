"""A CPU stand-in for TensorRT-LLM's LLM API (``tensorrt_llm.llmapi``), for autotune's tests.

What it imitates, as read from NVIDIA/TensorRT-LLM:

* it behaves as one release line, chosen by ``tensorrt_llm.__version__`` (``FAKE_TRTLLM_VERSION``,
  see :func:`line`): "1.0" (1.0.x), "1.2" (1.1.x, 1.2.x) or "main" (later). The rules per line are
  those of ``autotune/engines/trtllm/versions.py``, read in ``tensorrt_llm/llmapi/llm_args.py``;
* the configuration classes reject keyword names their line does not declare (``StrictBaseModel``:
  extra fields forbidden) and declare them as pydantic does (``model_fields``). ``FIELDS_V1_0`` /
  ``FIELDS_V1_2`` / ``FIELDS_MAIN`` list the names per line (main: commit 0004396);
  ``Eagle3DecodingConfig`` does not exist in 1.0. :func:`accepted_fields` is what every line accepts;
* the validators the exported YAML meets: ``CudaGraphConfig`` ``max_batch_size == max(batch_sizes)``
  (1.2, main; 1.0 refuses both together), ``draft_len_schedule`` (1.2: key 1 required and equal to
  ``max_draft_len``; main: the smallest key equal to it, exclusive with ``max_concurrency``), and
  ``decoding_type`` names per line in :mod:`tensorrt_llm.llmapi.llm_args`
  (``update_llm_args_with_extra_options``, what trtllm-serve and trtllm-bench call on the YAML);
* stricter than any release: a one-model configuration (MTP, EAGLE-3 one-model) with a draft length
  of 0 in ``draft_len_schedule`` or with ``max_concurrency`` is refused. TensorRT-LLM accepts both and
  then leaves the drafter state stale once the batch shrinks (PR #16888 floors resolved draft lengths
  at ``min_runtime_draft_len``, 1 for one-model algorithms); the stand-in refuses what autotune must
  never write;
* one-model MTP / EAGLE-3 decode greedily at any temperature unless ``allow_advanced_sampling=True``
  (1.2: ``SpecWorkerBase._sample_tokens_for_batch`` takes ``torch.argmax`` without it,
  ``tensorrt_llm/_torch/speculative/interface.py``; 1.0 has no flag; main samples per request);
* ``TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS`` (read when the LLM is built, as ``SpecWorkerBase``
  and ``TorchSampler`` read it in their constructors): N > 0 accepts min(N, drafted) draft tokens
  per generation request and step; 0, unset or not an integer: off;
* building an LLM starts a child process (the executor's worker processes of the real one; a
  daemonic parent may not have children), stopped by ``shutdown()``;
* ``LLM.generate_async(inputs, sampling_params=..., streaming=True)`` enqueues the request and
  returns a result read with ``async for``: one chunk per executor response, ``outputs[0].token_ids``
  cumulative and ``token_ids_diff`` the chunk's new tokens (several under speculation),
  ``decoding_iter`` counting the context iteration and every generation iteration, as the PyTorch
  backend's ``py_decoding_iter`` does (:mod:`tensorrt_llm.executor.result`); the simulated executor
  activates at most ``max_batch_size`` requests and queues the rest (:mod:`tensorrt_llm.executor.engine`);
  ``generate_async`` refuses what ``tensorrt_llm/llmapi/llm.py`` refuses (a shut-down LLM, a prompt
  over ``max_num_tokens`` without chunked prefill);
* ``LLM.get_stats_async(timeout)`` hands out one ``IterationResult`` that stops after ``timeout``
  seconds without a new iteration and resumes when a request is submitted (``mark_undone``), with
  iteration dicts shaped like ``IterationStats`` (``iterLatencyMS``, ``gpuMemUsage``,
  ``kvCacheStats``, ``inflightBatchingStats``, ``specDecodingStats``); it is bound to the event
  loop of the first submission, as the real asyncio queue is;
* ``PyExecutor._update_iter_stats`` (``tensorrt_llm/_torch/pyexecutor/py_executor.py``):
  ``gpuMemUsage`` is ``total - free`` of ``torch.cuda.mem_get_info()``, i.e. device-wide (CUDA
  context, weights and the whole pre-allocated KV pool: about 90 % of the fake 80 GiB device
  whatever the configuration); ``kvCacheStats`` gives ``maxNumBlocks`` / ``tokensPerBlock`` of a
  pool of ``free_gpu_memory_fraction`` of the memory left after the weights;
  ``specDecodingStats.iterLatencyMS`` is the drafter's ``last_draft_latency_ms``, which only the
  two-model ``ModelDrafter`` keeps: 0 for MTP, one-model EAGLE-3 and n-gram.

The "model" is a deterministic function of the token sequence, so greedy output does not depend on
speculation; acceptance follows a fixed pattern. Environment: ``FAKE_TRTLLM_LOG`` (JSONL of init /
generate / shutdown events), ``FAKE_TRTLLM_FAULT`` (crash_on_load, oom_on_load, hang_on_generate) and
``FAKE_TRTLLM_ITERATION_MS`` (the fixed part of an iteration's simulated latency, read at build).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

from tensorrt_llm.executor.engine import DeviceFigures, SimulatedEngine, Speculation
from tensorrt_llm.executor.result import GenerationResult, NoStats

DECODING_BASE_V1_0 = {
    "max_draft_len", "max_total_draft_tokens", "speculative_model_dir", "max_concurrency", "load_format",
    "acceptance_window", "acceptance_length_threshold",
}
DECODING_BASE_MAIN = {
    "max_draft_len", "max_total_draft_tokens", "speculative_model", "speculative_model_dir",  # alias of the former
    "max_concurrency", "draft_len_schedule", "load_format", "acceptance_rate_window_size",
    "acceptance_rate_threshold", "use_rejection_sampling", "allow_advanced_sampling", "advanced_sampling_mode",
    "enable_penalty", "decoding_type",
}
EAGLE_V1_0 = {
    "eagle_choices", "greedy_sampling", "posterior_threshold", "use_dynamic_tree", "dynamic_tree_max_topK",
    "num_eagle_layers", "max_non_leaves_per_layer", "eagle3_one_model", "eagle3_layers_to_capture",
}
KV_CACHE = {"enable_block_reuse", "max_tokens", "max_attention_window", "sink_token_length", "free_gpu_memory_fraction"}
CUDA_GRAPH = {"batch_sizes", "max_batch_size", "enable_padding"}
FIELDS_V1_0 = {
    "KvCacheConfig": KV_CACHE,
    "CudaGraphConfig": CUDA_GRAPH,
    "MTPDecodingConfig": DECODING_BASE_V1_0 | {
        "num_nextn_predict_layers", "use_relaxed_acceptance_for_thinking", "relaxed_topk", "relaxed_delta",
        "use_mtp_vanilla", "mtp_eagle_one_model", "num_nextn_predict_layers_from_model_config",
        "BEGIN_THINKING_PHASE_TOKEN", "END_THINKING_PHASE_TOKEN",
    },
    "DraftTargetDecodingConfig": DECODING_BASE_V1_0,
    "NGramDecodingConfig": DECODING_BASE_V1_0 | {"max_matching_ngram_size", "is_keep_all", "is_use_oldest", "is_public_pool"},
    "EagleDecodingConfig": DECODING_BASE_V1_0 | EAGLE_V1_0,
}
DECODING_BASE_V1_2 = DECODING_BASE_V1_0 | {"speculative_model", "draft_len_schedule", "allow_advanced_sampling",
                                         "decoding_type"}
FIELDS_V1_2 = {
    **{name: fields - DECODING_BASE_V1_0 | DECODING_BASE_V1_2 if name.endswith("DecodingConfig") else fields
       for name, fields in FIELDS_V1_0.items()},
    "Eagle3DecodingConfig": DECODING_BASE_V1_2 | EAGLE_V1_0,
}
FIELDS_MAIN = {
    "KvCacheConfig": KV_CACHE,
    "CudaGraphConfig": CUDA_GRAPH,
    "MTPDecodingConfig": DECODING_BASE_MAIN | {
        "use_relaxed_acceptance_for_thinking", "relaxed_topk", "relaxed_delta", "use_mtp_vanilla", "mtp_eagle_one_model",
        "use_dynamic_tree", "dynamic_tree_max_topK", "sa_config",
        "num_nextn_predict_layers",  # deprecated: remapped to max_draft_len by a before-validator
        "begin_thinking_phase_token", "end_thinking_phase_token",
    },
    "DraftTargetDecodingConfig": DECODING_BASE_MAIN,
    "NGramDecodingConfig": DECODING_BASE_MAIN | {"max_matching_ngram_size", "is_keep_all", "is_use_oldest", "is_public_pool"},
    "EagleDecodingConfig": DECODING_BASE_MAIN | EAGLE_V1_0 | {"eagle3_model_arch"},
    "Eagle3DecodingConfig": DECODING_BASE_MAIN | EAGLE_V1_0 | {"eagle3_model_arch", "sa_config"},
}
# LLM(model, tokenizer, ..., tensor_parallel_size, **kwargs) with kwargs of TorchLlmArgs.
LLM_ARGUMENTS = {
    "tokenizer", "trust_remote_code", "dtype", "max_batch_size", "max_num_tokens", "max_seq_len", "kv_cache_config",
    "cuda_graph_config", "speculative_config", "enable_iter_perf_stats", "enable_chunked_prefill",
}
# SamplingParams (tensorrt_llm/sampling_params.py, a dataclass: unknown names are a TypeError).
# The simulated device (see the module doc).
GPU_TOTAL_BYTES = 80 << 30
CUDA_CONTEXT_BYTES = 1 << 30  # context, activations, CUDA graphs: outside weights and KV pool
TOKENS_PER_BLOCK = 32
SAMPLING_PARAMS = {"end_id", "pad_id", "max_tokens", "top_k", "top_p", "seed", "temperature", "detokenize", "ignore_eos"}


FIELDS = {"1.0": FIELDS_V1_0, "1.2": FIELDS_V1_2, "main": FIELDS_MAIN}
FORCE_ACCEPTED_ENV = "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"


def line() -> str:
    """The release line this fake behaves as, from ``tensorrt_llm.__version__``."""
    from tensorrt_llm import __version__  # noqa: PLC0415 - the package sets it before importing llmapi

    if __version__.startswith("main"):
        return "main"
    major, minor = (int(part) for part in __version__.split(".")[:2])
    return "1.0" if (major, minor) < (1, 1) else "1.2" if (major, minor) < (1, 3) else "main"


def accepted_fields(class_name: str) -> set[str]:
    """Names every line that has ``class_name`` accepts."""
    versions = [fields[class_name] for fields in FIELDS.values() if class_name in fields]
    return set.intersection(*versions)


def model_weight_bytes(folder: str | os.PathLike) -> int:
    """Tensor bytes of a folder's safetensors files (from their headers); 0 without any."""
    total = 0
    for file in Path(folder).glob("*.safetensors"):
        with open(file, "rb") as handle:
            header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
        total += sum(t["data_offsets"][1] - t["data_offsets"][0] for k, t in header.items() if k != "__metadata__")
    return total


def kv_bytes_per_token(config: dict[str, Any]) -> int:
    """2 (K, V) x KV heads x head dim x layers x 2 bytes (bf16/fp16)."""
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    return 2 * kv_heads * head_dim * int(config["num_hidden_layers"]) * 2


def _forced_accepted() -> int:
    """TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS as ``get_force_num_accepted_tokens`` reads it."""
    try:
        return int(os.environ.get(FORCE_ACCEPTED_ENV, "0"))
    except ValueError:
        return 0


def _executor(parent_pid: int) -> None:
    """The stand-in executor process: lives until stopped or its parent is gone."""
    while os.getppid() == parent_pid:
        time.sleep(0.05)


def _log(event: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_TRTLLM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event, sort_keys=True) + "\n")


def _fault(name: str) -> bool:
    return os.environ.get("FAKE_TRTLLM_FAULT") == name


class _Config:
    model_fields: dict[str, None] = {}

    def __init_subclass__(cls) -> None:
        cls.model_fields = dict.fromkeys(sorted(FIELDS[line()].get(cls.__name__, ())))  # pydantic's class attribute

    def __init__(self, **fields: Any) -> None:
        unknown = set(fields) - set(self.model_fields)
        if unknown:
            raise ValueError(f"{type(self).__name__}: extra inputs are not permitted: {sorted(unknown)}")
        self.fields = fields


class KvCacheConfig(_Config):
    pass


class CudaGraphConfig(_Config):
    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        sizes, largest = fields.get("batch_sizes"), fields.get("max_batch_size") or 0
        if sizes and largest:  # 1.0: TorchLlmArgs.validate_cuda_graph_config; 1.2/main: CudaGraphConfig's validator
            if line() == "1.0":
                raise ValueError("Please don't set both cuda_graph_config.batch_sizes and cuda_graph_config.max_batch_size")
            if largest != max(sizes):
                raise ValueError("max_batch_size must equal max(batch_sizes)")


class _DecodingConfig(_Config):
    needs_draft_model = False
    decoding_type = ""  # the class literal of 1.2 and main

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        if fields.get("decoding_type", self.decoding_type) != self.decoding_type:
            raise ValueError(f"{type(self).__name__}: decoding_type must be {self.decoding_type!r}")
        if not fields.get("max_draft_len") or fields["max_draft_len"] <= 0:
            raise ValueError(f"max_draft_len must be > 0 for {type(self).__name__}")
        if self.needs_draft_model and not (fields.get("speculative_model_dir") or fields.get("speculative_model")):
            raise ValueError(f"speculative_model must be specified for {type(self).__name__}")
        _check_schedule(fields)
        if self.one_model and (fields.get("max_concurrency") is not None
                               or 0 in (fields.get("draft_len_schedule") or {}).values()):
            raise ValueError(f"{type(self).__name__} is one-model: no draft length 0 and no max_concurrency, the "
                             "drafter state goes stale (TensorRT-LLM PR #16888, min_runtime_draft_len = 1)")

    @property
    def one_model(self) -> bool:
        """Whether a one-model worker (SpecWorkerBase) runs it: MTP, EAGLE-3 with eagle3_one_model."""
        return False

    @property
    def samples(self) -> bool:
        """Whether a one-model worker samples at temperature > 0 (else it takes the argmax)."""
        return line() == "main" or bool(self.fields.get("allow_advanced_sampling"))


def _check_schedule(fields: dict[str, Any]) -> None:
    """draft_len_schedule and max_concurrency as 1.2 / main validate them (see the module doc)."""
    schedule, cap, draft_len = fields.get("draft_len_schedule"), fields.get("max_concurrency"), fields["max_draft_len"]
    if line() == "main" and cap is not None and schedule is not None:
        raise ValueError("max_concurrency and draft_len_schedule are mutually exclusive")
    if line() == "main" and cap is not None and cap < 1:
        raise ValueError("max_concurrency must be > 0")
    if schedule is None:
        return
    if any(int(b) < 1 for b in schedule) or any(not 0 <= d <= draft_len for d in schedule.values()):
        raise ValueError("draft_len_schedule: batch sizes >= 1 and 0 <= draft length <= max_draft_len")
    if line() == "1.2" and schedule.get(1) != draft_len:
        raise ValueError("draft_len_schedule must include batch_size=1 with draft length max_draft_len")
    if line() == "main" and schedule[min(schedule)] != draft_len:
        raise ValueError("the smallest batch size of draft_len_schedule must map to max_draft_len")


class MTPDecodingConfig(_DecodingConfig):
    decoding_type = "MTP"
    one_model = True


class DraftTargetDecodingConfig(_DecodingConfig):
    needs_draft_model = True
    decoding_type = "Draft_Target"


class NGramDecodingConfig(_DecodingConfig):
    decoding_type = "NGram"


class EagleDecodingConfig(_DecodingConfig):
    needs_draft_model = True
    decoding_type = "Eagle"

    @property
    def one_model(self) -> bool:
        return bool(self.fields.get("eagle3_one_model", True))


if line() != "1.0":  # absent from 1.0's llm_args.py

    class Eagle3DecodingConfig(EagleDecodingConfig):
        decoding_type = "Eagle3"


class SamplingParams:
    def __init__(self, **fields: Any) -> None:
        unknown = set(fields) - SAMPLING_PARAMS
        if unknown:
            raise TypeError(f"SamplingParams.__init__() got unexpected keyword arguments {sorted(unknown)}")
        self.max_tokens = fields.get("max_tokens", 32)
        self.top_k = fields.get("top_k")
        self.temperature = fields.get("temperature")
        self.seed = fields.get("seed")
        self.fields = fields

    @property
    def greedy(self) -> bool:
        return self.top_k == 1 or not self.temperature


class RequestOutput(GenerationResult):
    """``generate_async``'s result (``tensorrt_llm.llmapi.RequestOutput``: a GenerationResult with
    the prompt): read with ``async for``, one chunk per executor response (executor/result.py)."""

    def __init__(self, request_id: int, prompt: str, prompt_token_ids: list[int], params: SamplingParams,
                 streaming: bool) -> None:
        super().__init__(request_id, prompt_token_ids, params, streaming)
        self.prompt = prompt


class LLM:
    """A continuous-batching engine on the CPU (:class:`tensorrt_llm.executor.engine.SimulatedEngine`):
    up to ``max_batch_size`` requests per iteration, a context iteration producing each request's
    first token, then generation iterations producing 1 + accepted draft tokens each."""

    def __init__(self, model: str, tokenizer: Any = None, tensor_parallel_size: int = 1, **kwargs: Any) -> None:
        if _fault("crash_on_load"):
            print("fake TensorRT-LLM: fatal error while loading the engine", file=sys.stderr, flush=True)
            os._exit(3)
        if _fault("oom_on_load"):
            raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB (fake)")
        unknown = set(kwargs) - LLM_ARGUMENTS
        if unknown:
            raise ValueError(f"TorchLlmArgs: extra inputs are not permitted: {sorted(unknown)}")
        for key, cls in (("kv_cache_config", KvCacheConfig), ("cuda_graph_config", CudaGraphConfig),
                         ("speculative_config", _DecodingConfig)):
            if key in kwargs and not isinstance(kwargs[key], cls):
                raise ValueError(f"{key} must be a {cls.__name__}, got {type(kwargs[key]).__name__}")
        self.vocab_size = int(json.loads((Path(model) / "config.json").read_text())["vocab_size"])
        self.max_batch_size = int(kwargs.get("max_batch_size", 2048))
        self.max_num_tokens = int(kwargs.get("max_num_tokens", 8192))
        self.chunked_prefill = bool(kwargs.get("enable_chunked_prefill", False))
        self.speculative = kwargs.get("speculative_config")
        self.depth = self.speculative.fields["max_draft_len"] if self.speculative else 0
        # One-model MTP / EAGLE-3 without allow_advanced_sampling (where it exists) take the argmax.
        self.greedy_only = bool(self.speculative is not None and self.speculative.one_model and not self.speculative.samples)
        self.forced_accepted = _forced_accepted()
        # Only ModelDrafter (two-model) times drafting: DraftTarget, and EAGLE-3 run as two models.
        drafting_timed = isinstance(self.speculative, DraftTargetDecodingConfig) or (
            isinstance(self.speculative, EagleDecodingConfig) and not self.speculative.fields.get("eagle3_one_model", True))
        folders = [Path(model)]
        draft = self.speculative.fields.get("speculative_model_dir") if self.speculative else None
        if draft:
            folders.append(Path(draft))
        self.weight_bytes = sum(model_weight_bytes(folder) for folder in folders)
        configs = [json.loads((folder / "config.json").read_text()) for folder in folders]
        per_token = sum(kv_bytes_per_token(config) for config in configs)
        if isinstance(self.speculative, MTPDecodingConfig):  # the MTP layers keep KV in the same pool
            # (get_num_spec_layers of tensorrt_llm/_torch/speculative/utils.py adds them to the cache's layers)
            per_token += kv_bytes_per_token(configs[0]) // int(configs[0]["num_hidden_layers"]) * int(
                configs[0].get("num_nextn_predict_layers") or 0)
        fraction = kwargs["kv_cache_config"].fields.get("free_gpu_memory_fraction", 0.9) if "kv_cache_config" in kwargs else 0.9
        free = GPU_TOTAL_BYTES - CUDA_CONTEXT_BYTES - self.weight_bytes
        self.max_num_blocks = int(fraction * free) // (TOKENS_PER_BLOCK * per_token)
        self.kv_pool_bytes = self.max_num_blocks * TOKENS_PER_BLOCK * per_token
        speculation = Speculation(self.depth, isinstance(self.speculative, NGramDecodingConfig), self.forced_accepted,
                                  drafting_timed)
        device = DeviceFigures(CUDA_CONTEXT_BYTES + self.weight_bytes + self.kv_pool_bytes, self.max_num_blocks,
                               TOKENS_PER_BLOCK)
        self.engine = SimulatedEngine(self.max_batch_size, self.vocab_size, speculation, self.greedy_only,
                                      bool(kwargs.get("enable_iter_perf_stats", False)), device)
        self._next_id = 0
        self._shut_down = False
        # The real LLM starts executor worker processes; multiprocessing refuses this in a daemonic process.
        self._executor = multiprocessing.get_context("fork").Process(target=_executor, args=(os.getpid(),), daemon=True)
        self._executor.start()
        _log({
            "event": "init", "pid": os.getpid(), "executor_pid": self._executor.pid, "model": str(model),
            "tensor_parallel_size": tensor_parallel_size, "forced_accepted": self.forced_accepted,
            "kwargs": {key: ({"class": type(value).__name__, "fields": value.fields} if isinstance(value, _Config) else value)
                       for key, value in kwargs.items()},
        })

    def generate_async(
        self, inputs: str, sampling_params: SamplingParams | None = None, streaming: bool = False
    ) -> RequestOutput:
        """Enqueue one request (scheduled at a later iteration) and return its result. Refuses, as
        ``BaseLLM.generate_async`` / ``_check_arguments`` do (``tensorrt_llm/llmapi/llm.py`` at
        4c05a74): an LLM shut down, and (PyTorch backend, no chunked prefill) a prompt longer than
        ``max_num_tokens``."""
        if self._shut_down:
            raise RuntimeError("LLM is shutting down")
        if _fault("hang_on_generate"):
            time.sleep(3600)
        params = sampling_params or SamplingParams()
        prompt_token_ids = [ord(c) % self.vocab_size for c in inputs]
        if not self.chunked_prefill and len(prompt_token_ids) > self.max_num_tokens:
            raise ValueError(f"The sum of prompt length ({float(len(prompt_token_ids))}), query length (0) should not "
                             f"exceed max_num_tokens ({self.max_num_tokens})")
        _log({"event": "generate", "pid": os.getpid(), "streaming": streaming, "sampling_params": params.fields})
        request = RequestOutput(self._next_id, inputs, prompt_token_ids, params, streaming)
        self._next_id += 1
        self.engine.submit(request)
        return request

    def get_stats_async(self, timeout: float = 2) -> Any:
        if self.engine.stats is None:
            return NoStats()
        self.engine.stats.set_timeout(timeout)
        return self.engine.stats

    def shutdown(self) -> None:
        self._shut_down = True
        if self._executor.is_alive():
            self._executor.terminate()
            self._executor.join(5)
        _log({"event": "shutdown", "pid": os.getpid()})
