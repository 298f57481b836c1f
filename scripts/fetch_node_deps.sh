#!/usr/bin/env bash
# Installs the npm packages the tests use into .deps/node/ (ignored by git): playwright-core,
# which drives Debian's chromium in the report's browser test. Pinned; skipped when already
# there; exits 0 with a warning when npm or the registry is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${KVPROF_PLAYWRIGHT_VERSION:-1.65.1}
dest=.deps/node
if [ -f "$dest/node_modules/playwright-core/package.json" ] &&
   grep -q "\"version\": \"$version\"" "$dest/node_modules/playwright-core/package.json"; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "warning: npm is missing, so playwright-core was not installed (the browser test needs it)" >&2
  exit 0
fi
mkdir -p "$dest"
echo "== installing playwright-core@$version into $dest"
# No browser download: the test uses Debian's chromium.
if ! PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-audit --no-fund --prefix "$dest" \
     "playwright-core@$version" >/dev/null 2>"$dest/npm.err"; then
  echo "warning: npm install playwright-core@$version failed: $(tail -n 1 "$dest/npm.err")" >&2
fi
