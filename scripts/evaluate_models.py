"""Measure the shipped embedded models on held-out data; write ``weights/quality.json``.

Quality (held-out files of the training corpus, the same split as ``train_models.py``):
  - target and draft held-out loss (nats per byte) and top-1 accuracy;
  - draft agreement: the draft's greedy next token equals the target's, per position;
  - MTP-k agreement: module k's argmax at position i equals the target's argmax at position i+k,
    with the true sequence fed everywhere (what MTP speculation needs to be accepted).
Speed (batch 1, one new token, ~200 cached tokens, fp32, this machine): target, draft and MTP
module step times, and their ratios c = draft step / target step.

    python scripts/evaluate_models.py
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autotune.engines.embedded.builtin import (  # noqa: E402
    DRAFT_PATH,
    TARGET_PATH,
    load_model,
    model_fingerprint,
)
from autotune.engines.embedded.network import CausalLM  # noqa: E402
from train_models import CORPUS_DIR, heldout_windows, load_corpus  # noqa: E402

REQUIRED_DRAFT_AGREEMENT = 0.60
REQUIRED_MTP1_AGREEMENT = 0.50


@torch.no_grad()
def quality(target: CausalLM, draft: CausalLM, windows: torch.Tensor, seq_len: int) -> dict:
    """Held-out losses and agreements over windows (N, seq_len + 1 + n_mtp)."""
    n_mtp = target.config.n_mtp
    inputs = windows[:, : seq_len + n_mtp]  # enough positions to compare MTP-k at i with target at i+k
    labels = windows[:, 1 : seq_len + 1]
    target_logits, hidden = target(inputs)  # (N, seq_len + n_mtp, V), (N, ., C)
    draft_logits, _ = draft(inputs)
    target_greedy = target_logits.argmax(-1)  # (N, seq_len + n_mtp)
    draft_greedy = draft_logits.argmax(-1)

    result = {
        "n_windows": windows.shape[0],
        "n_positions": windows.shape[0] * seq_len,
        "target_loss": _cross_entropy(target_logits[:, :seq_len], labels),
        "draft_loss": _cross_entropy(draft_logits[:, :seq_len], labels),
        "target_accuracy": _rate(target_greedy[:, :seq_len] == labels),
        "draft_accuracy": _rate(draft_greedy[:, :seq_len] == labels),
        "draft_agreement": _rate(draft_greedy[:, :seq_len] == target_greedy[:, :seq_len]),
        "mtp_agreement": [],
        "mtp_accuracy": [],
    }
    hidden = hidden[:, :seq_len]
    for k in range(n_mtp):
        # Module k (0-based) at i reads t_{i+k+1} and predicts t_{i+k+2}: the target's guess at i+k+1.
        mtp_logits, hidden = target.mtp_forward(k, hidden, windows[:, k + 1 : k + 1 + seq_len])
        mtp_greedy = mtp_logits.argmax(-1)  # (N, seq_len)
        result["mtp_agreement"].append(_rate(mtp_greedy == target_greedy[:, k + 1 : k + 1 + seq_len]))
        result["mtp_accuracy"].append(_rate(mtp_greedy == windows[:, k + 2 : k + 2 + seq_len]))
    return result


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return round(F.cross_entropy(logits.flatten(0, 1), labels.flatten()).item(), 4)


def _rate(hits: torch.Tensor) -> float:
    return round(hits.float().mean().item(), 4)


@torch.inference_mode()
def step_ms(model: CausalLM, prefix: int, repeats: int, mtp_module: int | None = None) -> float:
    """Median wall time of one batch-1, one-token step on top of ``prefix`` cached positions."""
    cache = model.new_mtp_cache(1) if mtp_module is not None else model.new_cache(1)
    token = torch.zeros(1, 1, dtype=torch.long)
    hidden = torch.zeros(1, 1, model.config.d_model)
    times = []
    for _ in range(repeats + 10):  # the first 10 warm up allocators and caches
        cache.lengths.fill_(prefix)
        start = time.perf_counter()
        if mtp_module is None:
            model(token, cache)
        else:
            model.mtp_forward(mtp_module, hidden, token, cache)
        times.append(time.perf_counter() - start)
    return round(statistics.median(times[10:]) * 1e3, 3)


def speed(target: CausalLM, draft: CausalLM, prefix: int, repeats: int) -> dict:
    target_ms = step_ms(target, prefix, repeats)
    draft_ms = step_ms(draft, prefix, repeats)
    mtp_ms = step_ms(target, prefix, repeats, mtp_module=0) if target.config.n_mtp else None
    return {
        "concurrency": 1,
        "cached_positions": prefix,
        "dtype": "float32",
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "target_step_ms": target_ms,
        "draft_step_ms": draft_ms,
        "mtp_step_ms": mtp_ms,
        "draft_cost_ratio": round(draft_ms / target_ms, 3),
        "mtp_cost_ratio": round(mtp_ms / target_ms, 3) if mtp_ms else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", type=Path, default=TARGET_PATH)
    parser.add_argument("--draft", type=Path, default=DRAFT_PATH)
    parser.add_argument("--seed", type=int, default=1234, help="must match the training seed (held-out split)")
    parser.add_argument("--windows", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--timing-repeats", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=TARGET_PATH.parent / "quality.json")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    target, draft = load_model(args.target), load_model(args.draft)
    corpus = load_corpus(CORPUS_DIR, args.seed)
    windows = heldout_windows(corpus.heldout, args.windows, args.seq_len + 1 + target.config.n_mtp)
    measured = quality(target, draft, windows, args.seq_len)
    report = {
        "heldout": {"corpus_sha256": corpus.info["sha256"], "n_heldout_files": corpus.info["n_heldout_files"]},
        "weights": {
            "target_sha256": model_fingerprint(args.target),
            "draft_sha256": model_fingerprint(args.draft),
            "total_bytes": args.target.stat().st_size + args.draft.stat().st_size,
        },
        **measured,
        "checks": {
            "target_loss_below_draft_loss": measured["target_loss"] < measured["draft_loss"],
            f"draft_agreement_at_least_{REQUIRED_DRAFT_AGREEMENT}": measured["draft_agreement"] >= REQUIRED_DRAFT_AGREEMENT,
            f"mtp1_agreement_at_least_{REQUIRED_MTP1_AGREEMENT}": bool(measured["mtp_agreement"])
            and measured["mtp_agreement"][0] >= REQUIRED_MTP1_AGREEMENT,
        },
        "speed": speed(target, draft, prefix=200, repeats=args.timing_repeats),
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
