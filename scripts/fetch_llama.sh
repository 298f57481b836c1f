#!/usr/bin/env bash
# Fetches llama.cpp's prebuilt libllama (the npm package @node-llama-cpp/linux-x64: libllama,
# libggml and one CPU backend per x86-64 micro-architecture) into .deps/llama/ with `npm pack`,
# so `kvprof bench`, `kvprof serve` and the tests run a real engine. kvprof loads it with dlopen
# and runs without it. KVPROF_LLAMA_PACKAGE picks another package (e.g. @node-llama-cpp/linux-x64-cuda).
# Skipped when already there; exits 0 with a warning when npm or the registry is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
package=${KVPROF_LLAMA_PACKAGE:-@node-llama-cpp/linux-x64}
version=${KVPROF_LLAMA_VERSION:-3.22.1}
name=${package##*/}
dest=.deps/llama/$name
if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$package@$version" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "warning: npm is missing, so libllama was not fetched (kvprof bench needs it; apt-get install npm)" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== fetching $package@$version (libllama, CPU build) into $dest"
if ! (cd "$tmp" && npm pack --silent "$package@$version" >/dev/null 2>"$tmp/npm.err"); then
  echo "warning: npm pack $package@$version failed: $(tail -n 1 "$tmp/npm.err")" >&2
  exit 0
fi
mkdir -p "$tmp/x"
tar -xzf "$tmp"/*.tgz -C "$tmp/x"
rm -rf "$dest"
mkdir -p "$dest"
# The libraries sit in package/bins/<platform>/; keep them flat next to the package metadata.
cp "$tmp"/x/package/bins/*/* "$dest"/
cp "$tmp"/x/package/package.json "$tmp"/x/package/LICENSE "$dest"/ 2>/dev/null || true
echo "$package@$version" >"$dest/.complete"
