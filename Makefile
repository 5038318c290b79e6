# Lacuna: the two commands of the README, and the rest.
#   make demo    install what is missing, build, run the shipped example
#   make test    install what is missing, build, run every CPU test (and again
#                under AddressSanitizer + UndefinedBehaviorSanitizer)
#   make bench   build and run the CPU benchmarks
#   make install PREFIX=/usr/local
SHELL := /bin/bash
PREFIX ?= /usr/local
BUILD ?= build
BUILD_ASAN ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

# Debian packages the build and tests rely on.
DEB_PACKAGES := build-essential cmake pkg-config libopenblas-dev liblapacke-dev python3-numpy

.PHONY: all deps build build-asan demo test test-cpu test-asan bench install clean

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

test: test-cpu test-asan

demo: build
	@bash tools/demo.sh $(BUILD)/lacuna

bench: build
	@bash bench/cpu.sh $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
