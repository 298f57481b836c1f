#!/usr/bin/env bash
# README command 2 (and .ci/run): install what is missing, build with warnings as errors, and run
# the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
# -O1 without debug info: the suite's build is most of its time on a 2-core machine.
KVPROF_BUILD_DIR=build-test bash scripts/build.sh -DKVPROF_WERROR=ON -DKVPROF_BUILD_TESTS=ON \
  -DKVPROF_BUILD_BENCH=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1
cd build-test
# The libllama, chromium, playwright-core and the OpenAI SDK setup.sh installed are part of the
# suite: their tests fail instead of skipping.
export KVPROF_REQUIRE_LLAMA=1
# Likewise the real Prometheus server the remote-GPU tests scrape through.
export KVPROF_REQUIRE_PROMETHEUS=1
export KVPROF_REQUIRE_BROWSER=1
# And the Slurm cluster each sweep-on-Slurm test starts (scripts/slurm-cluster.sh).
export KVPROF_REQUIRE_SLURM=1
ctest --output-on-failure -j "$(nproc)" --timeout 600
