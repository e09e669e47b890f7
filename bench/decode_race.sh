#!/usr/bin/env bash
# Single-stream decode of two cllm binaries and llama.cpp on one GGUF file,
# rounds interleaved (a fresh process each, the same seed for both cllm
# binaries in a round): did a change move decode speed, and where does it
# stand against llama.cpp? Quicker than before_after.sh (decode only) and
# compare-llamacpp.sh (no serving); prints one line per round and thread
# count, and the medians with the ratios.
#   bash bench/decode_race.sh MODEL.gguf OLD_CLLM NEW_CLLM LLAMA_BIN_DIR [--rounds N] [--tokens N]
#        [--env "CLLM_NO_VNNI=1 CLLM_NO_AVX512=1"] [--threads "1 2"]
# LLAMA_BIN_DIR holds llama-bench (compare-llamacpp.sh --build-only builds
# build-llamacpp/avx2 and build-llamacpp/native). --env applies to both
# cllm binaries (plain AVX2: CLLM_NO_VNNI=1 CLLM_NO_AVX512=1, against
# build-llamacpp/avx2).
set -euo pipefail
[ $# -ge 4 ] || { sed -n 2,14p "$0" >&2; exit 2; }
MODEL=$1 OLD=$2 NEW=$3 LLAMA=$4
shift 4
ROUNDS=3 TOKENS=128 ENVS="" THREADS="1 2"
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --tokens) TOKENS=$2; shift 2 ;;
        --env) ENVS=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        *) echo "decode_race: unknown option $1" >&2; exit 2 ;;
    esac
done
WORK=$(mktemp -d /tmp/cllm-decode-race.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cllm_tg() { # binary threads seed -> tok/s
    env $ENVS "$1" bench offline -m "$MODEL" -t "$2" --sequential --num-prompts 1 --input-len 8 \
        --output-len "$TOKENS" --seed "$3" --save-result "$WORK/tg.json" >"$WORK/log" 2>&1 \
        && python3 -c "import json,sys; print('%.2f' % (1e3 / json.load(open(sys.argv[1]))['mean_tpot_ms']))" \
            "$WORK/tg.json" || echo nan
}
llama_tg() { # threads -> tok/s
    "$LLAMA/llama-bench" -m "$MODEL" -t "$1" -p 0 -n "$TOKENS" -r 1 -o json 2>/dev/null \
        | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)[0]["avg_ts"])' || echo nan
}
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); flags:" \
    "$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx_vnni|avx512f|avx512_vnni)$' | tr '\n' ' ')"
echo "model $MODEL; cllm env: ${ENVS:-none}; $TOKENS tokens after an 8-token prompt; llama-bench -p 0 -n $TOKENS"
for r in $(seq 1 "$ROUNDS"); do
    for t in $THREADS; do
        echo "round $r threads $t old $(cllm_tg "$OLD" "$t" $((1000 + r))) new $(cllm_tg "$NEW" "$t" $((1000 + r))) llama.cpp $(llama_tg "$t")"
    done
done | tee "$WORK/rounds"
python3 - "$WORK/rounds" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(int(f[3]), []).append((float(f[5]), float(f[7]), float(f[9])))
print("| threads | old (tok/s) | new (tok/s) | llama.cpp (tok/s) | new/old | new/llama.cpp |")
print("|---:|---:|---:|---:|---:|---:|")
for t, v in sorted(rows.items()):
    o, n, l = (statistics.median(x[i] for x in v) for i in range(3))
    print(f"| {t} | {o:.1f} | {n:.1f} | {l:.1f} | {n / o:.2f} | {n / l:.2f} |")
PY
