"""Stand-in ``trtllm-bench --model NAME --model_path DIR throughput --dataset D
--extra_llm_api_options FILE --concurrency N [--streaming] --report_json R``: reads the YAML as the
installed line does, runs the dataset's requests N at a time and writes a small report."""

from __future__ import annotations

import argparse
import asyncio
import json

from tensorrt_llm.llmapi import LLM, SamplingParams
from tensorrt_llm.llmapi.llm_args import update_llm_args_with_extra_options


async def run(llm: LLM, requests: list[dict], concurrency: int) -> int:
    slots = asyncio.Semaphore(concurrency)

    async def one(request: dict) -> int:
        async with slots:
            output = llm.generate_async(request["prompt"], SamplingParams(max_tokens=request["output_tokens"]),
                                        streaming=True)
            async for _chunk in output:
                pass
            return len(output.outputs[0].token_ids)

    return sum(await asyncio.gather(*(one(r) for r in requests)))


def main() -> None:
    parser = argparse.ArgumentParser(prog="trtllm-bench")
    parser.add_argument("--model", required=True)
    parser.add_argument("--model_path", required=True)
    commands = parser.add_subparsers(dest="command", required=True)
    throughput = commands.add_parser("throughput")
    throughput.add_argument("--backend", default="pytorch")
    throughput.add_argument("--dataset", required=True)
    throughput.add_argument("--extra_llm_api_options", default=None)
    throughput.add_argument("--concurrency", type=int, default=1)
    throughput.add_argument("--streaming", action="store_true")
    throughput.add_argument("--report_json", required=True)
    args = parser.parse_args()
    llm = LLM(args.model_path, **update_llm_args_with_extra_options({}, args.extra_llm_api_options))
    with open(args.dataset, encoding="utf-8") as handle:
        requests = [json.loads(line) for line in handle if line.strip()]
    tokens = asyncio.run(run(llm, requests, args.concurrency))
    llm.shutdown()
    with open(args.report_json, "w", encoding="utf-8") as handle:
        json.dump({"num_requests": len(requests), "output_tokens": tokens}, handle)


if __name__ == "__main__":
    main()
