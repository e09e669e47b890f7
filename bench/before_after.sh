#!/usr/bin/env bash
# cllm against an earlier cllm on the same GGUF file: does a change move speed?
#   bash bench/before_after.sh COMMIT MODEL.gguf [--after COMMIT2] [--reps N] [--threads T]
#                              [--env "CLLM_NO_VNNI=1 ..."]
# Builds COMMIT (Release) in a worktree, /tmp/cllm-before-COMMIT (kept for
# the next run), and races it against build/cllm, or against COMMIT2 built
# the same way (to isolate one change). Measures both binaries
# with rounds interleaved between them (a fresh process and a fresh random
# prompt each round, the same prompt for both in a round):
#   prompt   time to first token of a 512-token prompt, at 1 and T threads;
#   decode   time per output token over 128 tokens after an 8-token prompt,
#            at 1 and T threads;
#   batch    `cllm bench offline`'s output throughput of 16 requests of
#            128 prompt + 64 output tokens at T threads (batched decode).
# Prints one Markdown table, medians of --reps rounds (default 3) with their
# range, and the ratio after/before, with the CPU model and flags; nothing is appended:
# copy it into bench/RESULTS.md with this command.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,16p "$0" >&2; exit 2; }
COMMIT=$1 MODEL=$2
shift 2
REPS=3 THREADS=2 ENVS="" AFTER_COMMIT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --reps) REPS=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --env) ENVS=$2; shift 2 ;;
        --after) AFTER_COMMIT=$2; shift 2 ;;
        *) echo "before_after: unknown option $1" >&2; exit 2 ;;
    esac
done
# A commit's cllm, built once in a worktree: its path.
build_commit() {
    local dir=/tmp/cllm-before-$(git rev-parse --short "$1")
    if [ ! -x "$dir/build/cllm" ]; then
        git worktree add -f --detach "$dir" "$1" >/dev/null
        cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$dir/build" -j"$(nproc)" --target cllm >/dev/null
    fi
    echo "$dir/build/cllm"
}
SHA=$(git rev-parse --short "$COMMIT")
BEFORE=$(build_commit "$COMMIT")
if [ -n "$AFTER_COMMIT" ]; then
    AFTER=$(build_commit "$AFTER_COMMIT")
    AFTER_NAME=$(git rev-parse --short "$AFTER_COMMIT")
else
    AFTER=build/cllm
    AFTER_NAME="$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')"
    [ -x "$AFTER" ] || { echo "before_after: build cllm first ($AFTER)" >&2; exit 1; }
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# one measure, one round: bin what threads seed -> a number (nan on failure)
measure() {
    local bin=$1 what=$2 t=$3 seed=$4 out=$WORK/r.json args
    case "$what" in
        prompt) args=(--sequential --num-prompts 1 --input-len 512 --output-len 1 --max-model-len 520) ;;
        decode) args=(--sequential --num-prompts 1 --input-len 8 --output-len 128) ;;
        batch) args=(--num-prompts 16 --input-len 128 --output-len 64) ;;
    esac
    # shellcheck disable=SC2086
    env $ENVS "$bin" bench offline -m "$MODEL" -t "$t" "${args[@]}" --seed "$seed" --save-result "$out" \
        >"$WORK/log" 2>&1 || { echo nan; return; }
    python3 - "$out" "$what" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
what = sys.argv[2]
v = {"prompt": lambda: 512 / (r["median_ttft_ms"] / 1e3), "decode": lambda: 1e3 / r["mean_tpot_ms"],
     "batch": lambda: r["output_throughput"]}[what]()
print(f"{v:.2f}")
PY
}

rows=("prompt 1" "prompt $THREADS" "decode 1" "decode $THREADS" "batch $THREADS")
declare -A vals
for ((rep = 0; rep < REPS; rep++)); do
    for row in "${rows[@]}"; do
        read -r what t <<<"$row"
        seed=$((RANDOM * 32768 + RANDOM))
        for side in before after; do # alternate who goes first
            [ $((rep % 2)) -eq 1 ] && side=$([ "$side" = before ] && echo after || echo before)
            bin=$([ "$side" = before ] && echo "$BEFORE" || echo "$AFTER")
            vals["$row/$side"]+="$(measure "$bin" "$what" "$t" "$seed") "
        done
        echo "round $((rep + 1)): $row done" >&2
    done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx_vnni|avx512f|avx512_vnni)$' | tr '\n' ' ')
echo
echo "cllm $SHA (before) against $AFTER_NAME (after)" \
    "on $(basename "$MODEL"), ${ENVS:-native kernels}; $cpu ($flags), $(nproc) cores; median of $REPS rounds"
echo
echo "| measure | threads | before: median (range) | after: median (range) | after / before |"
echo "|---|---|---|---|---|"
for row in "${rows[@]}"; do
    read -r what t <<<"$row"
    unit=$([ "$what" = prompt ] && echo "prompt tok/s" || echo "output tok/s")
    python3 - "$what ($unit)" "$t" ${vals["$row/before"]} -- ${vals["$row/after"]} <<'PY'
import math, statistics, sys
name, t, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
i = rest.index("--")
def med(xs):
    xs = [float(x) for x in xs if x != "nan"]
    return (statistics.median(xs), min(xs), max(xs)) if xs else (math.nan,) * 3
b, a = med(rest[:i]), med(rest[i + 1:])
print(f"| {name} | {t} | {b[0]:.1f} ({b[1]:.1f}-{b[2]:.1f}) | {a[0]:.1f} ({a[1]:.1f}-{a[2]:.1f}) | {a[0] / b[0]:.3f} |")
PY
done
