# The two commands of the README:
#   make demo    install what is missing, build, run the demo
#   make check   install what is missing, build, run every test, then the
#                sanitized build's tests and the fuzzers
# and, for a GPU machine:
#   make gpu-pack   compile the GPU test's models for CUDA into $(GPU_PACK);
#                   run $(GPU_PACK)/run.sh on the GPU machine
BUILD ?= build
LLVM_PREFIX ?= /usr/lib/llvm-22

# ccache keys on paths relative to the checkout, so that a build in another
# clone of the repository (CI's) reuses this one's objects.
export CCACHE_BASEDIR ?= $(CURDIR)

GPU_PACK ?= gpu-pack
GPU_ARCH ?= sm_80,sm_90a

.PHONY: all deps configure build demo check sanitize-check gpu-pack clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/build.ninja:
	cmake -G Ninja -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=$(LLVM_PREFIX)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_PREFIX)/bin/lit

configure: deps
	@$(MAKE) --no-print-directory $(BUILD)/build.ninja

build: configure
	ninja -C $(BUILD) ampc ampc-opt ampc-translate ampc-train ampc-unittests \
	  ampc-import-sweep

demo: build
	scripts/demo

# First, that every test in the tree is built and run (a unit-test source
# missing from unittests/CMakeLists.txt, a RUN file lit does not pick up);
# then lit prints its pass/fail counts, GoogleTest its own; then the
# sanitized build runs part of both and 84 s of fuzzing
# (docs/testing.md); any failing fails.
check: build
	scripts/check-tests-built --unittests unittests --lit-suite $(BUILD)/test --tests test
	ninja -C $(BUILD) check-ampc
	$(BUILD)/unittests/ampc-unittests --gtest_brief=1
	scripts/sanitize-check

# The sanitized build and its tests alone (SAN_BUILD, FUZZ_SECONDS; see
# docs/testing.md for --all and longer fuzzing).
sanitize-check: deps
	scripts/sanitize-check

gpu-pack: build
	/usr/bin/python3 test/gpu/pack.py $(GPU_PACK) --build $(BUILD) --gpu-arch $(GPU_ARCH)

clean:
	rm -rf $(BUILD) build-san
