"""The parts of a speculative step priced from measured kernel data, the roofline where it has none.

Each part of :mod:`autotune.perfmodel.step_costs` at ``rows`` rows and the plan's context, with
the ops of one decoding step as aiconfigurator-core composes them from its measured kernels
(:class:`autotune.perfmodel.silicon.SiliconModel`; all-reduces at the tensor-parallel size
included)::

    target verifying k tokens = every op at rows x k tokens, except attention at rows rows
                                + the engine's step overhead
    layer(rows)               = the step's ops but the embedding, LM head and pipeline send, / layers
    MTP module, one token     = layer(rows) + LM head(rows)       (inside the target's graph)
    EAGLE-3 head, one token   = its layers x layer(rows) + LM head(rows) x draft vocab / vocab
                                + the step overhead               (a head of the target's width)
    draft model, one token    = its own compiled step at rows + the step overhead
    prefill                   = the library's prefill of rows prompts + the step overhead;
                                MTP modules: modules / layers of the target's prefill

Verifying k tokens per row is k x rows tokens through every GEMM (the library's own MTP
convention, ``sdk/models/deepseek.py``: the generation batch scaled by nextn + 1), but the
attention kernels of speculative decoding (TensorRT-LLM's XQA / FlashMLA, vLLM's and SGLang's)
read a row's cached keys and values once for its k query tokens: charging k rows would read the
cache k times, which at 256 rows and 2k context is most of the step. The attention ops
(``*_attention``) are therefore priced at ``rows``. A fused MLA block (``generation_mla_block``:
its GEMMs and attention in one table) stays at rows x k. The step overhead is the engine's host
work between steps (:data:`autotune.perfmodel.calibration.ENGINE_STEP_OVERHEAD_US`, or a stored
fit): kernel tables do not hold it.

Falls back, part by part, to the roofline (:class:`autotune.perfmodel.roofline.RooflinePricer`):
a draft the library cannot build and that is not a head of the target's width; the EAGLE-3 head's
fc over three hidden states is not priced (three d x d weights). :attr:`SiliconPricer.sources`
says which source priced which part.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from autotune.perfmodel.roofline import ModelShape, RooflinePricer
from autotune.perfmodel.silicon import SiliconModel

# Ops of a decoding step that are not a decoder layer's work (sdk/models/*.py op names).
_PASS_ENDS = ("generation_embedding", "generation_logits_gemm", "generation_p2p", "generation_embedding_ar")
_LM_HEAD = "generation_logits_gemm"
# One-sigma relative spread of a step priced from measured kernels, wider on the slow side: the
# library composes a step from kernels timed alone (no scheduler, sampling or launch gaps between
# them, which we add as the assumed step overhead), its empirical fits (norms, activations) and its
# own version's kernels. An assumption set before any published case was compared (docs/plan-validation.md).
SILICON_SLOW_SPREAD = 0.20
SILICON_FAST_SPREAD = 0.10


@dataclass
class SiliconPricer:
    """A :class:`~autotune.perfmodel.step_costs.StepPricer` from measured kernels (module doc).

    ``heads``: draft label -> decoder layers of an EAGLE-3 head priced as the target's layers (its
    LM head scaled by ``head_vocab``); ``draft_models``: label -> a whole draft model compiled
    against the same data; other drafts go to ``roofline``."""

    roofline: RooflinePricer
    target: SiliconModel
    shape: ModelShape
    overhead_s: float
    draft_models: Mapping[str, SiliconModel] = field(default_factory=dict)
    heads: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # label -> (layers, vocab)
    sources: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._cache: dict[tuple[int, int], list[tuple[str, float, str]]] = {}
        what = self.target.data.label()
        self.sources.update({"target": what, "prefill": what})
        if self.shape.n_mtp:
            self.sources["mtp"] = f"{what} (one target layer and the LM head per drafted token)"
        for label in self.roofline.drafts:
            self.sources[f"draft {label}"] = (
                f"{what} (compiled draft model)" if label in self.draft_models else
                f"{what} ({self.heads[label][0]} target layer(s) and the LM head over {self.heads[label][1]:,} tokens)"
                if label in self.heads else "roofline (the library cannot build it and it is not a head of the "
                                            "target's width)")

    @property
    def n_mtp(self) -> int:
        return self.shape.n_mtp

    @property
    def drafts(self) -> list[str]:
        return self.roofline.drafts

    def target_s(self, rows: int, tokens: int) -> float:
        wide = self._ops(self.target, rows * tokens)
        attention = self._ops(self.target, rows)
        return (sum(s for name, s, _ in wide if not _attention(name))
                + sum(s for name, s, _ in attention if _attention(name)) + self.overhead_s)

    def mtp_token_s(self, rows: int) -> float:
        return self._layer_s(rows) + self._head_s(rows)

    def draft_token_s(self, label: str, rows: int) -> float:
        if label in self.draft_models:
            return sum(s for _, s, _ in self._ops(self.draft_models[label], rows)) + self.overhead_s
        if label in self.heads:
            layers, vocab = self.heads[label]
            return layers * self._layer_s(rows) + self._head_s(rows) * vocab / self.shape.vocab + self.overhead_s
        return self.roofline.draft_token_s(label, rows)

    def prefill_s(self, rows: int) -> float:
        return self.target.prefill_s(rows, self.roofline.prompt) + self.overhead_s

    def mtp_prefill_s(self, rows: int, modules: int) -> float:
        return modules * self.target.prefill_s(rows, self.roofline.prompt) / self.shape.layers

    def draft_prefill_s(self, label: str, rows: int) -> float:
        if label in self.draft_models:
            return self.draft_models[label].prefill_s(rows, self.roofline.prompt) + self.overhead_s
        if label in self.heads:
            return self.heads[label][0] * self.mtp_prefill_s(rows, 1) + self.overhead_s
        return self.roofline.draft_prefill_s(label, rows)

    def measured_share(self, rows: int) -> float:
        """The share of a plain step at ``rows`` whose ops the library priced from measured rows."""
        ops = self._ops(self.target, rows)
        return sum(s for _, s, source in ops if source == "silicon") / max(sum(s for _, s, _ in ops), 1e-12)

    def _ops(self, model: SiliconModel, rows: int) -> list[tuple[str, float, str]]:
        key = (id(model), rows)  # every grid point asks the same rows several times
        if key not in self._cache:
            self._cache[key] = model.decode_ops(rows, round(self.roofline.context))
        return self._cache[key]

    def _layer_s(self, rows: int) -> float:
        ops = self._ops(self.target, rows)
        return sum(s for name, s, _ in ops if name not in _PASS_ENDS) / self.shape.layers

    def _head_s(self, rows: int) -> float:
        return sum(s for name, s, _ in self._ops(self.target, rows) if name == _LM_HEAD)


def _attention(name: str) -> bool:
    """An attention kernel's op (module doc): read once per row whatever its query tokens."""
    return name.endswith("_attention")
