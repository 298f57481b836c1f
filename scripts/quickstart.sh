#!/usr/bin/env bash
# README command 1: install what is missing, build, and run kvprof's main job on the built-in
# default (no GPU, no server needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
KVPROF_BUILD_DIR=build bash scripts/build.sh -DKVPROF_BUILD_TESTS=OFF -DKVPROF_BUILD_BENCH=OFF
echo
echo "== kvprof profile (built-in default: a SIMULATED vLLM server sized by the planner for"
echo "   Llama 3.1 8B on one H100, with seeded engine differences from the plan, driven through a"
echo "   small workload grid; it checks the measurement pipeline, not the planner; results in"
echo "   results/)"
./build/src/kvprof profile "$@"
