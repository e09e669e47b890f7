# Entry points. `make run` and `make test` work on a fresh Debian 12 machine:
# both install what they need first (scripts/setup.sh; `make run` only what
# serving needs, `make test` the test tooling as well).
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
PORT ?= 8000

.PHONY: all setup setup-serve build run test unit integration test-sanitize fuzz clean

all: build

# Everything: build tools, the default model, and the test tooling.
setup:
	bash scripts/setup.sh

# Only what serving needs: build tools and libraries, and the default model.
setup-serve:
	bash scripts/setup.sh serve

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# Serves the default model on 127.0.0.1:$(PORT); it prints how to call it.
run: setup-serve build
	./$(BUILD)/cllm serve "$$(cat build-model-path.txt)" --port $(PORT)

unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

integration: build
	CLLM_BUILD_DIR=$(abspath $(BUILD)) python3 -m pytest -q tests/integration

test: setup
	$(MAKE) unit integration

# Unit tests under AddressSanitizer and UndefinedBehaviorSanitizer.
test-sanitize: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCLLM_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# libFuzzer harnesses (tests/fuzz), FUZZ_SECONDS each over a copy of their
# corpus, in build-fuzz/ with clang; fails on any crash, leak or sanitizer report.
FUZZ_SECONDS ?= 60
fuzz: setup
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) bash tests/fuzz/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
