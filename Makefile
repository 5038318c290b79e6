# Lacuna: the two commands of the README, and the rest.
#   make demo    install what is missing, build, run the shipped example
#   make test    install what is missing, build, run every CPU test (and again
#                under AddressSanitizer + UndefinedBehaviorSanitizer), then a
#                short pass of every reader's fuzzer (~25 s each, docs/fuzzing.md)
#   make fuzz    every reader's fuzzer for FUZZ_SECONDS (default 300) each
#   make bench   build and run the CPU benchmarks; their figures as a page,
#                build/report.html (lacuna report)
#   make python  the Python package in place (PYTHONPATH=python)
#   make install PREFIX=/usr/local   library, header, tool, pkg-config, Python package
SHELL := /bin/bash
PREFIX ?= /usr/local
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
# Where each harness keeps its corpus and summary, inside the fuzz build.
FUZZ_WORK = fuzz/work
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# The fuzzers: Debian's clang with its libFuzzer runtime; seconds per harness
# for `make fuzz`, and how many run at once.
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 300
FUZZ_JOBS ?= $(JOBS)

# Debian packages the build and tests rely on.
# clang-14 + libclang-rt-14-dev (libFuzzer, ASan, UBSan runtimes) +
# libomp-14-dev (clang's OpenMP) build the fuzzers.
# chromium (headless) renders the --plot pictures and the report page in
# tests/render_pictures.sh, which is skipped without it. zlib1g-dev: gzip inputs.
# openmpi-bin + libopenmpi-dev: MPI ranks (src/dist, tests/cli_mpi.sh, skipped without).
DEB_PACKAGES := build-essential cmake pkg-config libopenblas-dev liblapacke-dev zlib1g-dev python3-numpy \
                clang-14 libclang-rt-14-dev libomp-14-dev chromium openmpi-bin libopenmpi-dev

.PHONY: all deps build build-asan build-fuzz demo test test-cpu test-asan test-fuzz fuzz bench install python clean

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD_ASAN)/CMakeCache.txt:
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DLACUNA_CUDA=OFF -DLACUNA_SANITIZE=ON

build-asan: deps $(BUILD_ASAN)/CMakeCache.txt
	cmake --build $(BUILD_ASAN) -j $(JOBS)

test-cpu: build
	cd $(BUILD) && ctest --output-on-failure -LE cuda

test-asan: build-asan
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -LE 'cuda|slow'

# The fuzzers' build: the library with coverage, ASan and UBSan, one
# libFuzzer binary per reader (fuzz/CMakeLists.txt); nothing else is built.
$(BUILD_FUZZ)/CMakeCache.txt:
	cmake -S . -B $(BUILD_FUZZ) -DCMAKE_C_COMPILER=$(FUZZ_CC) -DCMAKE_BUILD_TYPE=Debug -DLACUNA_CUDA=OFF -DLACUNA_MPI=OFF -DLACUNA_FUZZ=ON

build-fuzz: deps $(BUILD_FUZZ)/CMakeCache.txt
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target lacuna_fuzzers

# Each harness replays fuzz/regressions/<harness>/, then fuzzes ~25 s (two
# at a time on two cores); a line each says how many inputs it ran.
test-fuzz: build-fuzz
	cd $(BUILD_FUZZ) && ctest --output-on-failure -L fuzz -j $(JOBS); \
	  rc=$$?; cat $(FUZZ_WORK)/*/summary.txt 2>/dev/null; exit $$rc

fuzz: build-fuzz
	cd $(BUILD_FUZZ) && FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --output-on-failure -L fuzz -j $(FUZZ_JOBS); \
	  rc=$$?; cat $(FUZZ_WORK)/*/summary.txt 2>/dev/null; exit $$rc

test: test-cpu test-asan test-fuzz

demo: build
	@bash tools/demo.sh $(BUILD)/lacuna

bench: build
	@bash bench/cpu.sh $(BUILD)

# The Python package in place: PYTHONPATH=python /usr/bin/python3 -c 'import lacuna'
python: build
	bash python/setup_inplace.sh $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
	bash python/install.sh $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
