#!/usr/bin/env bash
# Installs the npm packages the tests use into .deps/node/ (ignored by git): playwright-core,
# which drives Debian's chromium in the report's browser test, and the official OpenAI SDK, the
# client of the servers' conformance test (tests/clients/). Pinned; skipped when already there;
# exits 0 with a warning when npm or the registry is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=("playwright-core@${KVPROF_PLAYWRIGHT_VERSION:-1.65.1}" "openai@${KVPROF_OPENAI_VERSION:-6.30.1}")
dest=.deps/node
wanted=()
for p in "${packages[@]}"; do
  name=${p%@*} version=${p##*@}
  json=$dest/node_modules/$name/package.json
  if ! { [ -f "$json" ] && grep -q "\"version\": \"$version\"" "$json"; }; then wanted+=("$p"); fi
done
[ ${#wanted[@]} -eq 0 ] && exit 0
if ! command -v npm >/dev/null 2>&1; then
  echo "warning: npm is missing, so ${wanted[*]} were not installed (the browser and client tests need them)" >&2
  exit 0
fi
mkdir -p "$dest"
echo "== installing ${wanted[*]} into $dest"
# No browser download: the test uses Debian's chromium.
if ! PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-audit --no-fund --prefix "$dest" \
     "${wanted[@]}" >/dev/null 2>"$dest/npm.err"; then
  echo "warning: npm install ${wanted[*]} failed: $(tail -n 1 "$dest/npm.err")" >&2
fi
