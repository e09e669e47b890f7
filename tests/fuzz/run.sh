#!/usr/bin/env bash
# Builds the libFuzzer harnesses (build-fuzz/, clang, ASan + UBSan) and runs
# each for FUZZ_SECONDS seconds over a copy of its corpus (tests/fuzz/corpus/
# NAME/), so the inputs it discovers do not land in the repository. Fails on
# any crash, leak, timeout or sanitizer report; the input that caused it is
# left in build-fuzz/artifacts/. `make fuzz` runs this.
#
#   FUZZ_SECONDS=60        seconds per harness (at most)
#   FUZZ_RUNS=N            stop a harness after N executions (a campaign:
#                          FUZZ_RUNS=10000000 FUZZ_SECONDS=9000)
#   FUZZ_HARNESSES="..."   names to run (default: every tests/fuzz/fuzz_*.c)
#   FUZZ_BUILD=build-fuzz  build folder;  JOBS=N  build parallelism
#   FUZZ_NO_BUILD=1        use the build as it is (a second run.sh beside one
#                          running, one harness list each, one per core)
#
# Each harness prints one line: executions, seconds, rate, the coverage
# (edges and features) and the corpus before and after.
#
# Corpus files listed in tests/fuzz/known_crashes.txt reproduce crashes not
# fixed yet; they are left out of the run (the list says why).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
BUILD=${FUZZ_BUILD:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
if [ -z "${FUZZ_HARNESSES:-}" ]; then
    FUZZ_HARNESSES=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c | sed 's/^fuzz_//'; done)
fi

if [ -z "${FUZZ_NO_BUILD:-}" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DCLLM_FUZZ=ON >/dev/null
    mkdir -p "$BUILD"
    if ! cmake --build "$BUILD" --target fuzz -j "$JOBS" >"$BUILD/fuzz-build.log" 2>&1; then
        cat "$BUILD/fuzz-build.log" >&2
        exit 1
    fi
fi
runs=()
if [ -n "${FUZZ_RUNS:-}" ]; then runs=(-runs="$FUZZ_RUNS"); fi

known=$(grep -v '^#' tests/fuzz/known_crashes.txt 2>/dev/null | awk '{print $1}' || true)
artifacts="$BUILD/artifacts"
mkdir -p "$artifacts"
# In memory where the machine has a tmpfs: hf_folder writes four files per
# input, and on a disk-backed /tmp their writeback halves its rate.
tmp_root=${TMPDIR:-/tmp}
if [ -d /dev/shm ] && [ -w /dev/shm ]; then tmp_root=/dev/shm; fi
work=$(mktemp -d "$tmp_root/cllm-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=()
for name in $FUZZ_HARNESSES; do
    corpus="$work/$name"
    mkdir -p "$corpus" "$work/tmp-$name"
    for f in tests/fuzz/corpus/"$name"/*; do
        [ -e "$f" ] || continue
        if grep -qxF "$name/$(basename "$f")" <<<"$known"; then continue; fi
        cp "$f" "$corpus/"
    done
    log="$artifacts/$name.log"
    seeds=$(ls "$corpus" | wc -l)
    echo "== fuzz_$name: ${SECONDS_EACH}s${FUZZ_RUNS:+ or $FUZZ_RUNS executions} over $seeds corpus files"
    started=$SECONDS
    # TMPDIR: the folder harnesses write their files into goes away with $work.
    # http's server threads allocate and free after the input that caused
    # it returns, so libFuzzer's leak check after each input (a scan of the
    # whole heap whenever mallocs and frees differ) runs after nearly every
    # input, finds nothing and halves the rate; leaks are still reported
    # when the run ends.
    # And each thread the http server starts (one per request) costs ~2 KB
    # that the ASan runtime (clang 14) never returns: ~120 bytes per input,
    # a peak of 1.4 GB over 10 million executions, near the usual limit.
    rss_limit=2048
    extra=()
    if [ "$name" = http ]; then extra=(-detect_leaks=0); rss_limit=4096; fi
    if TMPDIR="$work/tmp-$name" "$BUILD/fuzz_$name" "${runs[@]}" -max_total_time="$SECONDS_EACH" -timeout=25 \
        -rss_limit_mb=$rss_limit -print_final_stats=1 -artifact_prefix="$artifacts/$name-" "${extra[@]}" "$corpus" >"$log" 2>&1; then
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
        rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
        done_line=$(grep -a 'DONE' "$log" | tail -n 1)
        cov=$(grep -o 'cov: [0-9]*' <<<"$done_line" | grep -o '[0-9]*' || echo '?')
        ft=$(grep -o 'ft: [0-9]*' <<<"$done_line" | grep -o '[0-9]*' || echo '?')
        echo "   ok: $execs executions in $((SECONDS - started)) s, $rate/s; $cov edges, $ft features;" \
            "corpus $seeds -> $(ls "$corpus" | wc -l) files"
    else
        echo "   FAILED (log: $log)"
        grep -m 3 -E 'ERROR|runtime error|SUMMARY' "$log" || tail -n 5 "$log"
        failed+=("$name")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashes in ${failed[*]}; the inputs are in $artifacts/" >&2
    exit 1
fi
