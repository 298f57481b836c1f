#!/usr/bin/env bash
# Configures and builds kvprof into build/ (or $KVPROF_BUILD_DIR). Extra arguments go to CMake.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${KVPROF_BUILD_DIR:-build}
jobs=${KVPROF_JOBS:-$(nproc)}
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
else
  cmake -S . -B "$build_dir" "$@" >/dev/null
fi
cmake --build "$build_dir" -j "$jobs"
