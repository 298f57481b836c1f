#!/usr/bin/env bash
# README command 1: install what is missing, build, and run kvprof's main job on the built-in
# default (no GPU, no server needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# -O2 without debug info: a cold build on two cores is most of this command's time, and debug
# info costs about a sixth of it (docs/benchmarks.md).
KVPROF_BUILD_DIR=build bash scripts/build.sh -DKVPROF_BUILD_TESTS=OFF -DKVPROF_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"
echo
echo "== kvprof profile (built-in default: a real llama.cpp server -- kvprof serve, the libllama"
echo "   setup.sh installed -- on Qwen2.5-0.5B with dummy weights made on the spot, driven through a"
echo "   small workload grid on the CPU; its host memory and llama.cpp's own buffers measured next"
echo "   to kvprof's plan; results in results/; --sim for the simulated vLLM server)"
./build/src/kvprof profile "$@"
