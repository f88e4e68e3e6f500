#!/usr/bin/env bash
# Rebuild profiles/ from the profile JSON shipped there: import it into a fresh database, export it in
# every format (`autotune export`: what the code writes today) and draw its study's report. A test
# (tests/service/test_example_profiles.py) fails when the shipped files drift from these exports.
#
#   scripts/make_example_profiles.sh           # from anywhere; rewrites <repo>/profiles/ from its JSON
#   scripts/make_example_profiles.sh --tune    # first tune the built-in models on this machine afresh
#   AUTOTUNE=.venv/bin/autotune scripts/make_example_profiles.sh
#
# --tune runs a plain `autotune tune`, finds the stored profile with `profiles best`, exports its JSON
# into profiles/ (replacing the one there) and checks that it re-imports into another database
# unchanged; then the rebuild above runs from that JSON. The databases are fresh SQLite files under
# $WORK (default: a new temporary folder), kept for a look.
set -euo pipefail
cd "$(dirname "$0")/.."

AUTOTUNE=${AUTOTUNE:-autotune}
WORK=${WORK:-$(mktemp -d -t autotune-examples-XXXXXX)}
json() { python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }

if [ "${1:-}" = "--tune" ]; then
    tuned="sqlite:///$WORK/autotune.db"
    echo "== autotune tune   (database $tuned)"
    start=$(date +%s)
    "$AUTOTUNE" tune --db "$tuned"
    echo "tune took $(( $(date +%s) - start )) s"
    model=$("$AUTOTUNE" profiles list --json --db "$tuned" | json '[0]["model"]')
    profile=$("$AUTOTUNE" profiles best --model "$model" --hardware current --json --db "$tuned" | json '["profile"]["id"]')
    echo "== autotune profiles best --model $model --hardware current   -> profile $profile"
    rm -f profiles/*.json
    exported=$("$AUTOTUNE" export "$profile" --format json --force --db "$tuned")
    "$AUTOTUNE" profiles import "$exported" --json --db "sqlite:///$WORK/roundtrip.db" > "$WORK/import.json"
    "$AUTOTUNE" export "$(json '["id"]' < "$WORK/import.json")" --format json -o "$WORK/reexported.json" --force \
        --db "sqlite:///$WORK/roundtrip.db"
    python3 - "$exported" "$WORK/reexported.json" <<'EOF'
import json, sys
def content(path):  # database ids are informative only (see autotune/profiles/data.py)
    data = json.load(open(path))
    data["profile"].pop("id", None)
    return data
same = content(sys.argv[1]) == content(sys.argv[2])
print("== JSON round trip through a second database:", "unchanged" if same else "CHANGED")
sys.exit(0 if same else 1)
EOF
elif [ $# -gt 0 ]; then
    echo "usage: $0 [--tune]" >&2
    exit 2
fi

shopt -s nullglob
sources=(profiles/*.json)
[ ${#sources[@]} -eq 1 ] || { echo "profiles/ must hold exactly one profile JSON, found ${#sources[@]}" >&2; exit 2; }
db="sqlite:///$WORK/examples.db"
"$AUTOTUNE" profiles import "${sources[0]}" --json --db "$db" > "$WORK/example.json"
profile=$(json '["id"]' < "$WORK/example.json")
study=$(json '["study"]' < "$WORK/example.json")
echo "== ${sources[0]} -> profile $profile of study $study (database $db)"
rm -f profiles/*.json profiles/*.sh profiles/*.yaml  # imported: the exports below replace them all
for format in trtllm trtllm-bench vllm sglang json; do
    "$AUTOTUNE" export "$profile" --format "$format" --force --db "$db"
done
rm -rf profiles/report
"$AUTOTUNE" report "$study" -o profiles/report --db "$db"
echo "== wrote profiles/ (database kept in $WORK)"
