#!/usr/bin/env bash
# Resident memory of one `cllm generate` over time: runs it with the given
# arguments and samples VmRSS every INTERVAL seconds (bench/RESULTS.md, "KV
# eviction for long contexts").
#   bench/gen_memory.sh OUT.tsv [cllm generate arguments...]   (env: INTERVAL=2)
# OUT.tsv: seconds, VmRSS in KiB, bytes of text written so far; the
# generation's stdout goes to OUT.tsv.txt and its stderr to OUT.tsv.log.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
shift
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out.log"
build/cllm generate "$@" > "$out.txt" 2>> "$out.log" &
pid=$!
: > "$out"
start=$(date +%s)
while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && printf '%s\t%s\t%s\n' "$(( $(date +%s) - start ))" "$rss" "$(wc -c < "$out.txt")" >> "$out"
    sleep "${INTERVAL:-2}"
done
wait "$pid"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out.log"
