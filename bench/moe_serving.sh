#!/usr/bin/env bash
# How many experts a mixture of experts' serving step reads: `cllm serve`
# loaded by `cllm bench serve` at one concurrency, then /metrics'
# cllm:moe_experts_read_total over cllm:moe_layer_steps_total (the distinct
# experts an expert layer reads per engine step, whatever the step holds:
# decode tokens of many sequences, prompt chunks). Printed beside what k of
# E experts per token would give if the step's tokens chose independently
# and uniformly: E * (1 - (1 - k/E)^n) for n tokens.
#   bash bench/moe_serving.sh MODEL.gguf [--concurrency 16] [--prompts 32] [--threads 2] [--port 8391]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n 2,9p "$0" >&2; exit 2; }
MODEL=$1
shift
CONC=16 PROMPTS=32 THREADS=2 PORT=8391
while [ $# -gt 0 ]; do
    case "$1" in
        --concurrency) CONC=$2; shift 2 ;;
        --prompts) PROMPTS=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --port) PORT=$2; shift 2 ;;
        *) echo "moe_serving: unknown option $1" >&2; exit 2 ;;
    esac
done
CLLM=build/cllm
LOG=$(mktemp)
"$CLLM" serve "$MODEL" --port "$PORT" -t "$THREADS" --max-num-seqs "$CONC" --max-model-len 1024 >"$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -f "$LOG"' EXIT
for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
    kill -0 $PID 2>/dev/null || { cat "$LOG" >&2; exit 1; }
    sleep 1
done
"$CLLM" bench serve --port "$PORT" --num-prompts "$PROMPTS" --max-concurrency "$CONC" \
    --random-input-len 128 --random-output-len 64 --seed "$RANDOM" 2>&1 | grep -E "throughput|TTFT|TPOT" || true
INFO=$("$CLLM" info "$MODEL" | grep -E "^experts")
echo "$INFO"
curl -sf "http://127.0.0.1:$PORT/metrics" | python3 -c '
import re, sys
m = dict(re.findall(r"^(cllm:moe_\w+)(?:\{[^}]*\})? ([0-9.e+]+)$", sys.stdin.read(), re.M))
steps, read = float(m["cllm:moe_layer_steps_total"]), float(m["cllm:moe_experts_read_total"])
k, e = map(int, re.search(r"(\d+) of (\d+) per token", sys.argv[1]).groups())
n = int(sys.argv[2])
print(f"expert layer steps {steps:.0f}, experts read {read:.0f}: {read / steps:.1f} distinct experts per layer step "
      f"(independent uniform choices of {n} tokens would read {e * (1 - (1 - k / e) ** n):.1f} of {e})")
' "$INFO" "$CONC"
