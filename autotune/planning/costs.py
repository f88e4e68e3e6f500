"""Which source prices a plan's step costs (``--step-costs auto|silicon|roofline``).

* ``silicon``: NVIDIA's measured kernel data (aiconfigurator-core, the ``plan`` extra) for the GPU,
  engine and engine version (``--engine-version``, default the data's current one), each part of a
  step as :mod:`autotune.perfmodel.silicon_cost` says; refused in one line where the data cannot
  price the target (no package, a GPU or version it lacks, an architecture it cannot build);
* ``roofline``: :mod:`autotune.perfmodel.roofline` at the calibrated shares of the peaks;
* ``auto`` (the default): silicon where it can price the target, else the roofline, the plan saying
  why in one line (and how to install the extra when that is why). An ``--engine-version`` the data
  lacks is refused in every mode: the user asked for it.

Parts the silicon data cannot price (a draft it cannot build that is not a head of the target's
width) fall back to the roofline one by one; :attr:`Priced.parts` names each part's source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from autotune.hardware.catalog import AcceleratorSpec
from autotune.models.kind import DRAFT_TARGET, EAGLE3
from autotune.models.quantization import dtype_of_bytes, weight_bytes_per_param
from autotune.perfmodel.calibration import FAST_SPREAD, SLOW_SPREAD
from autotune.perfmodel.roofline import ROOFLINE_SPREAD, ModelShape, RooflinePricer
from autotune.perfmodel.step_costs import StepPricer

if TYPE_CHECKING:
    from autotune.perfmodel.silicon import SiliconBuild

STEP_COSTS = ("auto", "silicon", "roofline")


@dataclass(frozen=True)
class ConfigSource:
    """A model as the silicon data builds it: its config.json object, its hf_quant_config.json
    (None without), and its kind (``target``, or a draft's: :mod:`autotune.models.kind`)."""

    name: str
    config: Mapping[str, Any]
    quant: Mapping[str, Any] | None = None
    kind: str = "target"


@dataclass(frozen=True)
class Priced:
    """A plan's step pricer and what it rests on: the source (``silicon`` or ``roofline``), its
    one-sigma spreads (symmetric for the cost profile; slow and fast sides for the plan's interval),
    each part's source in words, and notes (why a fallback, tables the data fell back on)."""

    pricer: StepPricer
    source: str
    spread: float
    slow: float
    fast: float
    parts: dict[str, str]
    notes: list[str] = field(default_factory=list)
    data: str | None = None  # the silicon data's label


@dataclass(frozen=True)
class Pricing:
    """How a plan prices steps (module doc). ``gpu``: the NVML name of the planned GPU (None: a CPU
    or a GPU the catalog does not name); ``target``: None for a model without a Hugging Face config
    (the built-in ones); ``drafts``: label -> config, for those that have one."""

    mode: str = "auto"
    gpu: str | None = None
    engine: str = "trtllm"
    engine_version: str | None = None
    ep: int = 1
    dtype: str | None = None
    kv_dtype: str | None = None
    target: ConfigSource | None = None
    drafts: Mapping[str, ConfigSource] = field(default_factory=dict)

    def price(self, spec: AcceleratorSpec, target: ModelShape, drafts: Mapping[str, ModelShape], context: float,
              prompt: int) -> Priced:
        """The pricer of the parts of a step on ``spec`` (module doc)."""
        from autotune.perfmodel.silicon import SiliconMissing, VersionMissing

        roofline = RooflinePricer(spec, target, drafts, context, max(int(prompt), 1))
        if self.mode == "roofline":
            return _roofline(roofline, [])
        try:
            return self._silicon(spec, roofline)
        except VersionMissing:
            raise
        except SiliconMissing as exc:
            if self.mode == "silicon":
                raise
            return _roofline(roofline, [f"step costs from the roofline: {exc}"])

    def _silicon(self, spec: AcceleratorSpec, roofline: RooflinePricer) -> Priced:
        from autotune.perfmodel.silicon import SiliconBuild, SiliconMissing, locate
        from autotune.perfmodel.silicon_cost import SILICON_FAST_SPREAD, SILICON_SLOW_SPREAD, SiliconPricer

        if spec.device_type != "cuda" or self.gpu is None:
            raise SiliconMissing(f"the measured kernel data covers catalog NVIDIA GPUs, not {spec.name}")
        data = locate(self.gpu, self.engine, self.engine_version)
        if self.target is None:
            raise SiliconMissing("the target has no Hugging Face config.json for the measured kernel data to build")
        # The checkpoint's own format is the library's to read (it knows block-scaled FP8, NVFP4 with
        # 16-bit attention, ...): only a --dtype that differs from it is handed over.
        native = dtype_of_bytes(weight_bytes_per_param(self.target.config, self.target.quant))
        build = SiliconBuild(data, spec.tp, dtype=self.dtype if self.dtype != native else None, kv_dtype=self.kv_dtype)
        notes: list[str] = []
        target = _compile(self.target, self.ep, build, notes)
        models, heads = {}, {}
        for label, shape in roofline.draft_shapes.items():
            source = self.drafts.get(label)
            if source is not None and source.kind == DRAFT_TARGET:
                try:
                    models[label] = _compile(source, 1, build, notes)
                    continue
                except SiliconMissing as exc:
                    notes.append(f"draft {label}: {exc}")
            if (source is None or source.kind in (EAGLE3, DRAFT_TARGET)) and shape.d_model == roofline.target.d_model \
                    and shape.layers <= 2:
                heads[label] = (shape.layers, shape.vocab)
        pricer = SiliconPricer(roofline, target, roofline.target, spec.pass_overhead_us * 1e-6, models, heads)
        share = pricer.measured_share(1)
        notes.append(f"{share:.0%} of a plain step at concurrency 1 comes from rows the library marks measured (the rest "
                     "from rows it fits or mixes: norms, activations, embedding, MoE with its communication)")
        fallback = sorted(target.low_fidelity.union(*(m.low_fidelity for m in models.values())))
        if fallback:
            notes.append(f"the kernel data fell back to rows it marks low-fidelity for: {', '.join(fallback)}")
        return Priced(pricer, "silicon", SILICON_SLOW_SPREAD, SILICON_SLOW_SPREAD, SILICON_FAST_SPREAD,
                      dict(pricer.sources), notes, data.label())


def _compile(source: ConfigSource, ep: int, build: SiliconBuild, notes: list[str]) -> Any:
    """``source`` compiled against the data and tried at one row, so that a table the library lacks
    shows here rather than mid-plan. Where the inferred attention dtype has no context-attention
    table (FP8 MLA prefill on Hopper in 0.12.0), attention is priced in bf16 instead, and a note says so."""
    from autotune.perfmodel.silicon import SiliconMissing, SiliconModel

    def tried(fmha: str | None) -> Any:
        model = SiliconModel.compile(source.name, source.config, source.quant, replace(build, ep=ep, fmha=fmha))
        model.decode_ops(1, 1), model.prefill_s(1, 1)
        return model

    try:
        return tried(None)
    except SiliconMissing as first:
        try:
            model = tried("bf16")
        except SiliconMissing:
            raise first from None
        missing = str(first).partition("error: ")[2].partition(" at /")[0] or str(first)
        notes.append(f"{source.name}: attention priced in bf16, the data lacking the checkpoint's ({missing[:120]})")
        return model


def _roofline(pricer: RooflinePricer, notes: list[str]) -> Priced:
    parts = {"target": "roofline", "prefill": "roofline", **({"mtp": "roofline"} if pricer.n_mtp else {}),
             **{f"draft {label}": "roofline" for label in pricer.drafts}}
    return Priced(pricer, "roofline", ROOFLINE_SPREAD, SLOW_SPREAD, FAST_SPREAD, parts, notes)
