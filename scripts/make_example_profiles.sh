#!/usr/bin/env bash
# Rebuild profiles/: tune the built-in models on this machine with a plain `autotune tune`, find
# the stored profile with `profiles best`, export it in every format, check that its JSON
# re-imports into another database unchanged, and draw the study's report.
#
#   scripts/make_example_profiles.sh                     # from anywhere; writes <repo>/profiles/
#   AUTOTUNE=.venv/bin/autotune scripts/make_example_profiles.sh
#
# The databases are fresh SQLite files under $WORK (default: a new temporary folder), kept for a look.
set -euo pipefail
cd "$(dirname "$0")/.."

AUTOTUNE=${AUTOTUNE:-autotune}
WORK=${WORK:-$(mktemp -d -t autotune-examples-XXXXXX)}
export AUTOTUNE_DB_URL="sqlite:///$WORK/autotune.db"
json() { python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }

echo "== autotune tune   (database $AUTOTUNE_DB_URL)"
start=$(date +%s)
"$AUTOTUNE" tune
echo "tune took $(( $(date +%s) - start )) s"

study=$("$AUTOTUNE" studies --json | json '[0]["name"]')
model=$("$AUTOTUNE" profiles list --json | json '[0]["model"]')
profile=$("$AUTOTUNE" profiles best --model "$model" --hardware current --json | json '["profile"]["id"]')
echo "== autotune profiles best --model $model --hardware current   -> profile $profile of study $study"

mkdir -p profiles
for format in trtllm trtllm-bench vllm sglang json; do
    "$AUTOTUNE" export "$profile" --format "$format" --force
done

exported=$("$AUTOTUNE" export "$profile" --format json -o "$WORK/original.json" --force)
AUTOTUNE_DB_URL="sqlite:///$WORK/imported.db" "$AUTOTUNE" profiles import "$exported" --json > "$WORK/import.json"
imported=$(json '["id"]' < "$WORK/import.json")
AUTOTUNE_DB_URL="sqlite:///$WORK/imported.db" "$AUTOTUNE" export "$imported" --format json -o "$WORK/reexported.json" --force
python3 - "$WORK/original.json" "$WORK/reexported.json" <<'EOF'
import json, sys
def content(path):  # database ids are informative only (see autotune/profiles/data.py)
    data = json.load(open(path))
    data["profile"].pop("id", None)
    return data
same = content(sys.argv[1]) == content(sys.argv[2])
print("== JSON round trip through a second database:", "unchanged" if same else "CHANGED")
sys.exit(0 if same else 1)
EOF

"$AUTOTUNE" report "$study" -o profiles/report
echo "== wrote profiles/ (database kept in $WORK)"
