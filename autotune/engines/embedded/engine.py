"""EmbeddedEngine: the :class:`~autotune.engines.base.Engine` that runs our own PyTorch models.

The target is loaded once per engine and reused by every configuration; draft models are loaded
once per path. ``loads`` counts model files loaded, so the tuner can report reloads.
"""

from __future__ import annotations

from pathlib import Path

import torch

from autotune.engines.base import BUILTIN_DRAFT, EngineConfig, Measurement, validate_run_options
from autotune.engines.embedded.builtin import load_builtin_draft, load_builtin_target, load_model
from autotune.engines.embedded.decoding import Decoder, GenerationRequest, build_proposer, required_capacity
from autotune.engines.embedded.metrics import MemoryProbe, build_measurement
from autotune.engines.embedded.network import CausalLM
from autotune.engines.embedded.timing import DEFAULT_TIMING_ROUNDS, DEFAULT_TIMING_STEPS, time_steps
from autotune.engines.embedded.tokenizer import ByteTokenizer
from autotune.errors import ConfigurationError, EngineError, UnsupportedConfigError
from autotune.workload import Request, Workload

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
WARMUP_TOKENS = 4


def resolve_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch.device, checking that it exists on this machine."""
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigurationError(f"unknown device {device!r}; use cpu or cuda[:index]") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise EngineError(f"device {device} requested but CUDA is not available here; use --device cpu")
    if resolved.type not in ("cpu", "cuda"):
        raise ConfigurationError(f"device {device!r} is not supported by the embedded engine; use cpu or cuda")
    return resolved


def resolve_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ConfigurationError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


class EmbeddedEngine:
    """Runs none / mtp / draft / ngram speculative decoding with byte-level PyTorch models.

    ``target``: a model file written by ``save_model``, or None for the built-in target.
    ``device``: ``cpu`` or ``cuda[:i]``; ``dtype``: compute dtype (float32 makes greedy
    speculative output match the baseline exactly, up to batch-dependent rounding).
    """

    name = "embedded"

    def __init__(
        self,
        target: str | Path | None = None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | str = torch.float32,
        max_ngram: int = 3,
    ) -> None:
        self.target_path = target
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self.max_ngram = max_ngram
        self.tokenizer = ByteTokenizer()
        self.loads = 0
        self.config: EngineConfig | None = None
        self._target: CausalLM | None = None
        self._drafts: dict[str, CausalLM] = {}
        self._warm = False

    # -- loading ----------------------------------------------------------------------------------

    @property
    def target(self) -> CausalLM:
        if self._target is None:
            if self.target_path is None:
                self._target = load_builtin_target(self.device, self.dtype)
            else:
                self._target = load_model(self.target_path, self.device, self.dtype)
            self.loads += 1
            self._check_vocabulary(self._target, "target")
        return self._target

    def _draft(self, name: str) -> CausalLM:
        if name not in self._drafts:
            model = load_builtin_draft(self.device, self.dtype) if name == BUILTIN_DRAFT else load_model(name, self.device, self.dtype)
            self.loads += 1
            self._check_vocabulary(model, f"draft {name}")
            self._drafts[name] = model
        return self._drafts[name]

    def _check_vocabulary(self, model: CausalLM, what: str) -> None:
        if model.config.vocab_size != self.tokenizer.vocab_size:
            raise UnsupportedConfigError(
                f"{what} has a vocabulary of {model.config.vocab_size} tokens but the byte tokenizer has "
                f"{self.tokenizer.vocab_size}; draft and target must share the tokenizer"
            )

    def load(self, config: EngineConfig) -> None:
        """Validate ``config`` and load what it needs (the target once, each draft once)."""
        config.validate()
        target = self.target
        if config.method == "mtp" and target.config.n_mtp == 0:
            raise UnsupportedConfigError(
                "method mtp needs a target with MTP modules, and this target has none (n_mtp = 0); use draft or ngram"
            )
        if config.draft_model is not None:
            self._draft(config.draft_model)
        if config != self.config:
            self._warm = False
        self.config = config

    @property
    def threads(self) -> int:
        """The threads torch's CPU operators run on in this process."""
        return torch.get_num_threads()

    def set_threads(self, threads: int) -> None:
        """Run torch's CPU operators on ``threads`` threads: the cores other processes leave (a
        study under a load that persists, search/screening.py). Two threads on a 2-core machine that
        two busy loops share wait at every operator's barrier for each other to be scheduled: passes
        ran 4-10x slower than idle, where one thread ran 1.5-1.8x slower (docs/benchmarks.md)."""
        torch.set_num_threads(threads)

    def close(self) -> None:
        """Drop the loaded models (the next load reloads them)."""
        self._target = None
        self._drafts.clear()
        self.config = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # -- measuring --------------------------------------------------------------------------------

    def measure(
        self, workload: Workload, concurrency: int, temperature: float | None = None, seed: int = 0
    ) -> Measurement:
        """Decode ``workload`` with ``concurrency`` concurrent sequences (continuous batching).

        ``temperature`` overrides every request's own temperature when given; ``seed`` seeds the
        sampling generator (greedy runs do not depend on it).
        """
        if self.config is None:
            raise EngineError("no configuration loaded; call load(config) before measure()")
        validate_run_options(concurrency, temperature)
        requests = self.generation_requests(workload, temperature)
        config = self.config
        capacity = self._capacity(requests, config)
        if not self._warm:
            self._decoder(config, 1, requests[:1], required_capacity(requests[:1], config.depth), seed).run(
                [GenerationRequest(requests[0].prompt, min(WARMUP_TOKENS, requests[0].max_tokens), requests[0].temperature)]
            )
            self._warm = True
        decoder = self._decoder(config, concurrency, requests, capacity, seed)
        with MemoryProbe(self.device, self._weights_bytes(config)) as memory:
            result = decoder.run(requests)
        return build_measurement(result, config, workload, concurrency, temperature, seed, memory)

    def generation_requests(self, workload: Workload, temperature: float | None = None) -> list[GenerationRequest]:
        """The workload's requests as token ids (BOS + UTF-8 bytes)."""
        return [
            GenerationRequest(
                self.tokenizer.encode(r.prompt), r.max_tokens, r.temperature if temperature is None else temperature
            )
            for r in workload.requests
        ]

    def _decoder(
        self, config: EngineConfig, concurrency: int, requests: list[GenerationRequest], capacity: int, seed: int
    ) -> Decoder:
        draft = self._draft(config.draft_model) if config.draft_model is not None else None
        proposer = build_proposer(config.method, config.depth, self.target, draft, concurrency, capacity, self.max_ngram)
        return Decoder(self.target, proposer, concurrency, capacity, self.tokenizer.eos_id, seed)

    def _capacity(self, requests: list[GenerationRequest], config: EngineConfig) -> int:
        capacity = required_capacity(requests, config.depth)
        models = [("target", self.target)]
        if config.draft_model is not None:
            models.append((f"draft {config.draft_model}", self._draft(config.draft_model)))
        for what, model in models:
            if capacity > model.config.max_seq_len:
                longest = max(requests, key=lambda r: len(r.prompt) + r.max_tokens)
                raise UnsupportedConfigError(
                    f"a request needs {len(longest.prompt)} prompt tokens + {longest.max_tokens} max_tokens + "
                    f"{config.depth + 1} draft positions = {capacity} positions, but the {what} handles "
                    f"{model.config.max_seq_len}; shorten the prompts or lower max_tokens"
                )
        return capacity

    def _weights_bytes(self, config: EngineConfig) -> int:
        models = [self.target] + ([self._draft(config.draft_model)] if config.draft_model is not None else [])
        return sum(p.nbytes for model in models for p in model.parameters())

    def time_steps(self, configs: list[EngineConfig], workload: Workload, concurrencies: list[int],
                   steps: int = DEFAULT_TIMING_STEPS, rounds: int = DEFAULT_TIMING_ROUNDS) -> list[dict]:
        """Step-cost timing runs with forced acceptance (:mod:`autotune.engines.embedded.timing`) on
        the workload's prompts: one dict per (round, configuration, concurrency)."""
        prompts = [request.prompt for request in self.generation_requests(workload)]
        points = time_steps(self, configs, prompts, concurrencies, steps, rounds)
        self.config = None  # the timing runs loaded configurations of their own
        return [point.to_dict() for point in points]

    @torch.inference_mode()
    def target_logit_margin(self, request: Request, generated: list[int], expected: int, got: int) -> float:
        """logit(expected) - logit(got) of the target after ``request.prompt`` + ``generated``,
        computed without a cache at batch 1 (explains a greedy divergence: near 0 means a near-tie)."""
        ids = torch.tensor([self.tokenizer.encode(request.prompt) + list(generated)], device=self.device)
        logits, _ = self.target(ids)
        last = logits[0, -1].float()
        return float(last[expected] - last[got])

