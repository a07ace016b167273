# Thin wrapper over CMake + CTest.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
MODEL ?= tests/fixtures/models/llama-f32
PROMPT_TOKENS ?= 1,15,27,100,7

.PHONY: all setup build test tsan asan valgrind run fuzz fuzz-run fuzz-smoke clean format install-check

all: build

# Debian packages the build and tests need (tools/setup.sh lists them; it
# runs apt-get as root, or via sudo, and installs make too).
setup:
	sh tools/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	tests/tokenizers/fetch.sh $(BUILD)/tokenizers
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Concurrent sessions on one model, 8 threads x 50 requests on one
# container, and lmc serve's HTTP tests (connection threads, the worker,
# cancels, shutdown), under ThreadSanitizer (any report fails).
TSAN_ENV = TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
tsan:
	cmake -S . -B build-tsan -DLMC_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS) --target test_concurrency test_api lmc
	$(TSAN_ENV) LMC_TEST_REPS=3 build-tsan/tests/test_concurrency
	$(TSAN_ENV) LMC_TEST_ONLY=test_stress_one_container build-tsan/tests/test_api
	$(TSAN_ENV) LMC_CLI=build-tsan/lmc LMC_SOURCE_DIR=. python3 tests/cli/test_serve.py

# The main job: the shipped model (models/kjv-llama-11m-4bit, trained on the
# King James Bible) continues a verse.
RUN_PROMPT ?= And God said,
run: build
	$(BUILD)/lmc generate --prompt "$(RUN_PROMPT)" --no-template --max-tokens 96 --seed 3 --stats

fuzz:
	CC=clang cmake -S . -B build-fuzz -DLMC_FUZZ=ON -DLMC_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-fuzz -j $(JOBS)

# Every fuzz target (fuzz/fuzz_NAME.c) runs FUZZ_TIME seconds from its
# committed seeds (fuzz/seeds/NAME); fuzz-run keeps what it finds in
# fuzz-corpus/ (git-ignored), e.g. make fuzz-run FUZZ_TIME=1800 FUZZ_PAR=2
# (FUZZ_PAR targets at a time, fuzz/run.sh); fuzz-smoke (CI) starts from the
# seeds alone, 60 s each.
FUZZ_TIME ?= 60
FUZZ_TARGETS = $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_FLAGS = -timeout=20 -rss_limit_mb=2048 -print_final_stats=1
FUZZ_PAR ?= 1
fuzz-run: fuzz
	@printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(FUZZ_PAR) -I{} fuzz/run.sh {} $(FUZZ_TIME)
fuzz-smoke: fuzz
	@for t in $(FUZZ_TARGETS); do \
	  n=$$(ls fuzz/seeds/$$t 2>/dev/null | wc -l); \
	  if [ "$$n" = 0 ]; then echo "fuzz_$$t has no seeds in fuzz/seeds/$$t" >&2; exit 1; fi; \
	  work=$$(mktemp -d) && cp -r fuzz/seeds/$$t/. $$work/ && \
	  echo "== fuzz_$$t: $(FUZZ_TIME) s from $$n seeds" && \
	  build-fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_TIME) $(FUZZ_FLAGS) \
	    -max_len=$$(case $$t in tokenizer_load) echo 400000;; template) echo 65536;; *) echo 8192;; esac) \
	    $$( [ -f fuzz/$$t.dict ] && echo -dict=fuzz/$$t.dict ) $$work > $$work.log 2>&1; \
	  rc=$$?; tail -n 8 $$work.log; rm -rf $$work $$work.log; [ $$rc = 0 ] || exit 1; \
	done

# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (any report fails the test that made it).
ASAN_ENV = ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1" \
	UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
asan:
	cmake -S . -B build-asan -DLMC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	tests/tokenizers/fetch.sh build-asan/tokenizers
	cd build-asan && $(ASAN_ENV) ctest --output-on-failure -j $(JOBS)

# One generate over the shipped (4-bit) model under valgrind's memcheck.
valgrind: build
	valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	  $(BUILD)/lmc generate --prompt "And God said," --no-template --max-tokens 16 --seed 1 --threads 2

clean:
	rm -rf $(BUILD) build-fuzz build-tsan build-asan

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

# Installs into a scratch prefix and builds examples/ against it with
# pkg-config, as a program outside the repo would, then runs them.
PREFIX_CHECK ?= /tmp/lmc-install-check
install-check: build
	rm -rf $(PREFIX_CHECK) && cmake --install $(BUILD) --prefix $(PREFIX_CHECK) >/dev/null
	PKG_CONFIG_PATH=$(PREFIX_CHECK)/lib/pkgconfig:$(PREFIX_CHECK)/lib/$$(gcc -print-multiarch)/pkgconfig; \
	export PKG_CONFIG_PATH; \
	echo "pkg-config --cflags --libs lmc: $$(pkg-config --cflags --libs lmc)"; \
	for e in generate threads; do \
	  cc -std=c11 -Wall -Wextra -Werror examples/$$e.c $$(pkg-config --cflags --libs lmc) -lpthread \
	    -o $(PREFIX_CHECK)/$$e || exit 1; \
	done; \
	lib=$$(dirname $$(find $(PREFIX_CHECK) -name liblmc.so | head -1)); \
	LD_LIBRARY_PATH=$$lib $(PREFIX_CHECK)/generate $(MODEL) --tokens $(PROMPT_TOKENS) && \
	LD_LIBRARY_PATH=$$lib $(PREFIX_CHECK)/threads $(MODEL) 8 && \
	$(PREFIX_CHECK)/bin/lmc generate --prompt "And God said," --no-template --max-tokens 16 --seed 1 && \
	nm -D --defined-only $$lib/liblmc.so | awk '{print $$3}' | grep -v '^lmc_' | (! grep .)
