#!/usr/bin/env bash
# Set up tianshu-mcp from a clone: system packages (git, chromium) when run as root with apt,
# a virtualenv in .venv and the package with its test extras. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")"

need_apt=()
command -v git >/dev/null 2>&1 || need_apt+=(git)
# toolchains whose real output the acceptance tests parse (optional for running the server)
command -v go >/dev/null 2>&1 || need_apt+=(golang)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
[ -x /usr/lib/chromium/chromium ] || need_apt+=(chromium)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need_apt[*]} with apt-get" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install: ${need_apt[*]} (not root or no apt-get; continuing)" >&2
  fi
fi

python3 - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"tianshu-mcp needs Python >= 3.11, found {sys.version.split()[0]}")
PY

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[test]"
if command -v npm >/dev/null 2>&1 && [ ! -x tests/toolchains/node_modules/.bin/vitest ]; then
  (cd tests/toolchains && npm install --no-audit --no-fund --loglevel=error >/dev/null) \
    || echo "setup: npm install of the test toolchains failed; JavaScript runner tests will be skipped" >&2
fi
echo "setup: ready (.venv/bin/tianshu-mcp)" >&2
