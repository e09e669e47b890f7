# Entry points. `make run` and `make test` work on a fresh Debian 12 machine:
# both install what they need first (scripts/setup.sh; `make run` only what
# serving needs, `make test` the test tooling as well).
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
PORT ?= 8000

.PHONY: all setup setup-serve build run test unit integration build-sanitize test-sanitize test-sanitize-server fuzz clean

all: build

# Everything: build tools, the default model, and the test tooling.
setup:
	bash scripts/setup.sh

# Only what serving needs: build tools and libraries, and the default chat model.
setup-serve:
	bash scripts/setup.sh serve

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# Serves the default chat model on 127.0.0.1:$(PORT); it prints how to call it.
run: setup-serve build
	./$(BUILD)/cllm serve "$$(cat build-chat-model-path.txt)" --port $(PORT)

unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

integration: build
	CLLM_BUILD_DIR=$(abspath $(BUILD)) python3 -m pytest -q tests/integration

test: setup
	$(MAKE) unit integration

SANITIZE_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# The server's tests on synthetic models (requests good and hostile, API
# keys, size bounds, NaN logits, concurrency, shutdown, slow clients, tool calling,
# the chat page's files, CORS, vLLM's fields, prompt logprobs and /v1/responses; every model
# family's forward, engine, speculation and eviction paths, test_families.py; Medusa heads), a few minutes
# against the sanitizer build; any report stops the server and fails its test.
SANITIZE_SERVER_TESTS = tests/integration/test_server_errors.py tests/integration/test_server_hostile_numbers.py \
	tests/integration/test_server_auth.py tests/integration/test_server_bounds.py \
	tests/integration/test_server_concurrency.py tests/integration/test_server_lifecycle.py \
	tests/integration/test_server_nan_model.py tests/integration/test_server_slow_clients.py \
	tests/integration/test_server_tools.py tests/integration/test_webui_routes.py \
	tests/integration/test_response_cache.py tests/integration/test_server_cors.py \
	tests/integration/test_server_compat_synthetic.py tests/integration/test_embeddings_synthetic.py \
	tests/integration/test_prompt_logprobs.py tests/integration/test_multi_model.py \
	tests/integration/test_tensor_parallel.py tests/integration/test_families.py tests/integration/test_medusa.py

build-sanitize: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCLLM_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# Unit tests under AddressSanitizer and UndefinedBehaviorSanitizer.
test-sanitize: build-sanitize
	$(SANITIZE_ENV) ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# The server under the same sanitizers, driven by the integration tests above.
test-sanitize-server: build-sanitize
	$(SANITIZE_ENV) CLLM_BUILD_DIR=$(abspath $(ASAN_BUILD)) python3 -m pytest -q $(SANITIZE_SERVER_TESTS)

# libFuzzer harnesses (tests/fuzz), FUZZ_SECONDS each over a copy of their
# corpus, in build-fuzz/ with clang; fails on any crash, leak or sanitizer report.
FUZZ_SECONDS ?= 60
fuzz: setup
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) bash tests/fuzz/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
