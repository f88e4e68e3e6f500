"""An exported vLLM script, served: ``autotune export ID --format vllm`` of a stored profile for the
built-in target (exported as a Hugging Face folder) with its draft starts ``vllm serve`` 0.32.0 as
written, a real OpenAI client's greedy completions equal our engine's greedy output, and vLLM's
/metrics counts accepted draft tokens.

One server start (about 20-60 s on two CPU cores); the client (the ``openai`` package) lives in the
vLLM venv, so it runs there as a small script.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import profile_factory as factory
from autotune.engines.embedded.builtin import load_builtin_target
from autotune.engines.embedded.decoding import GenerationRequest, decode
from autotune.engines.embedded.tokenizer import ByteTokenizer
from autotune.engines.vllm.memory import EngineHost, engine_memory
from autotune.models.folder import read_model
from autotune.store import open_database
from autotune.workload import load_workload
from vllm_support import (
    free_port,
    log_tail,
    prometheus_counter,
    stop_process_group,
    vllm_env,
    vllm_path,
    wait_for_health,
)

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PROMPTS = 4
MAX_TOKENS = 32
CONCURRENCIES = (1, 2)
HEALTH_TIMEOUT_S = 180.0
TOKENIZER = ByteTokenizer()
# Arguments the test adds through the script's "$@": where to listen; float32 because vLLM's "auto"
# dtype computes a float32 checkpoint in bfloat16 on CPU (vllm/config/model.py _resolve_auto_dtype)
# and our engine computes in float32, and the output is compared token for token; eager mode
# because torch.compile would add minutes to the start on two cores.
SERVE_ARGS = ["--dtype", "float32", "--enforce-eager"]


def served_memory(models: dict[str, Path]) -> list[str]:
    """The server's KV cache as autotune sets it for the servers it starts (vLLM's CPU default claims
    most of the machine's memory: autotune/engines/vllm/memory.py)."""
    return engine_memory("draft", read_model(models["target"], "target"), read_model(models["draft"], "draft"), 2,
                         EngineHost(1, on_cpu=True, server=True)).server_arguments()


CLIENT = r'''
import json, sys
from openai import OpenAI

base_url, prompts, max_tokens = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
client = OpenAI(base_url=base_url + "/v1", api_key="unused")
model = client.models.list().data[0].id
# One request with every prompt: the server batches them, up to its --max-num-seqs.
response = client.completions.create(model=model, prompt=prompts, temperature=0, max_tokens=max_tokens,
                                     extra_body={"return_token_ids": True})
choices = sorted(response.choices, key=lambda c: c.index)
print(json.dumps({"model": model, "choices": [c.model_dump() for c in choices]}))
'''


def stored_profile(url: str, models: dict[str, Path]) -> int:
    """A finished study of none and draft at concurrency levels 1 and 2 for the exported target and draft
    folders, written by the store's writers, and its deployment profile (as the tuner saves it)."""
    with open_database(url) as database, database.session() as session:
        hardware = factory.hardware(session, *factory.CPU)
        target = factory.model(session, models["target"].name, "t" * 16, source=str(models["target"]), num_mtp_modules=2)
        draft = factory.model(session, models["draft"].name, "d" * 16, role="draft", source=str(models["draft"]))
        record = factory.study(session, "vllm-serve", hardware, target, draft, methods=("none", "draft"),
                               concurrencies=CONCURRENCIES, profile_concurrency=1)
        return record.id


def autotune_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from autotune.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, check=True)


def our_greedy(prompts: list[str]) -> list[list[int]]:
    """Our engine's greedy tokens (method none, batch 1, float32) for each prompt, EOS included."""
    model = load_builtin_target()
    requests = [GenerationRequest(TOKENIZER.encode(p), MAX_TOKENS) for p in prompts]
    return [r.tokens for r in decode(model, requests, eos_id=TOKENIZER.eos_id).results]


def test_exported_vllm_script_serves_the_profile(vllm_python: Path, hf_models: dict[str, Path], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    profile_id = stored_profile(url, hf_models)
    script = tmp_path / "serve.sh"
    autotune_cli("export", str(profile_id), "--format", "vllm", "-o", str(script), "--db", url)
    text = script.read_text()
    # The profile names the real folders: the script runs as exported, nothing to substitute.
    assert str(hf_models["target"]) in text and str(hf_models["draft"]) in text and "NOTE:" not in text
    # The study's synthetic figures make depth 2 best at concurrency 1 and depth 1 at 2: a schedule.
    assert '"num_speculative_tokens": 2' in text
    assert '"num_speculative_tokens_per_batch_size": [[1, 1, 2], [2, 2, 1]]' in text

    prompts = [r.prompt for r in load_workload(None).requests[:PROMPTS]]
    expected = our_greedy(prompts)

    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = tmp_path / "vllm-serve.log"
    env = vllm_env(PATH=vllm_path(vllm_python, tmp_path / "bin"))
    started = time.monotonic()
    with log.open("wb") as log_file:
        server = subprocess.Popen(["bash", str(script), "--host", "127.0.0.1", "--port", str(port), *SERVE_ARGS,
                                   *served_memory(hf_models)],
                                  stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                  cwd=tmp_path, start_new_session=True)
    try:
        start_s = wait_for_health(base_url, server, log, HEALTH_TIMEOUT_S)
        client = subprocess.run([str(vllm_python), "-c", CLIENT, base_url, json.dumps(prompts), str(MAX_TOKENS)],
                                capture_output=True, text=True, timeout=300, env=vllm_env())
        assert client.returncode == 0, f"client failed: {client.stderr[-2000:]}\nserver log:\n{log_tail(log)}"
        answer = json.loads(client.stdout.strip().splitlines()[-1])
        with urllib.request.urlopen(f"{base_url}/metrics", timeout=30) as response:
            metrics = response.read().decode()
    finally:
        stop_process_group(server)
    total_s = time.monotonic() - started

    assert answer["model"] == str(hf_models["target"])
    choices = answer["choices"]
    assert len(choices) == len(prompts)
    matched = 0
    for prompt, choice, ours in zip(prompts, choices, expected):
        # vLLM's tokenizer (the exported tokenizer.json) must see the prompt as our engine does: BOS + bytes.
        assert choice["prompt_token_ids"] == TOKENIZER.encode(prompt), prompt
        assert choice["token_ids"] == ours, f"{prompt!r}: vLLM {choice['token_ids']} ours {ours}"
        assert choice["text"] == TOKENIZER.decode(ours), prompt
        matched += 1
    drafts = prometheus_counter(metrics, "vllm:spec_decode_num_drafts")
    drafted = prometheus_counter(metrics, "vllm:spec_decode_num_draft_tokens")
    accepted = prometheus_counter(metrics, "vllm:spec_decode_num_accepted_tokens")
    print(f"vllm serve: /health after {start_s:.1f} s, whole test {total_s:.1f} s; {matched}/{len(prompts)} completions "
          f"match our greedy output; spec decode: {drafts:.0f} drafts, {drafted:.0f} draft tokens, {accepted:.0f} accepted")
    assert accepted > 0
    # The schedule was served: depth 1 at concurrency 2 (num_speculative_tokens alone would draft 2 a step).
    assert drafts <= drafted < 1.5 * drafts
