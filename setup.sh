#!/usr/bin/env bash
# Set up tianshu-mcp from a clone: a virtualenv in .venv with the package (and, with
# --test-toolchains, its test extras), and, when run as root with apt, the system packages.
#
#   ./setup.sh                    what the server needs: git, python3-venv and chromium (visual
#                                 acceptance drives it through Playwright), chromium without apt's
#                                 recommended packages
#   ./setup.sh --test-toolchains  also what the test suite runs for real: Go, Node.js/npm (and the
#                                 npm toolchains of tests/toolchains and tests/ts_host), PostgreSQL,
#                                 CJK and DejaVu fonts, Ruby/PHP/Elixir/CMake/gcc/Maven
#   ./setup.sh --dry-run [...]    print the plan and install nothing
#
# It prints what it will install before installing. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")"

toolchains=0
dry=0
for arg in "$@"; do
  case "$arg" in
    --test-toolchains) toolchains=1 ;;
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

# required: git and python3-venv. Server: chromium (visual acceptance; without it only that part is
# unavailable). Test toolchains (--test-toolchains): what the acceptance tests run for real (their
# tests skip without them). An optional package that cannot be installed never fails the setup;
# a held apt/dpkg lock is waited for (bounded).
need=()
command -v git >/dev/null 2>&1 || need+=(git)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
optional=()  # installed with apt's recommended packages
lean=()      # installed without them
[ -x /usr/lib/chromium/chromium ] || lean+=(chromium)
if [ "$toolchains" = 1 ]; then
  command -v go >/dev/null 2>&1 || optional+=(golang)
  command -v node >/dev/null 2>&1 || optional+=(nodejs npm)
  # PostgreSQL: the scale-out tests run a Prefect server on it (skipped without it)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || optional+=(postgresql)
  # a CJK font: without one Chinese renders as identical boxes and visual acceptance cannot see a change
  { command -v fc-list >/dev/null 2>&1 && fc-list :lang=zh 2>/dev/null | grep -q .; } || optional+=(fonts-wqy-zenhei)
  # a serif TrueType font the web-font capture test serves as its late @font-face file
  [ -f /usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf ] || optional+=(fonts-dejavu-core)
  # the toolchains of acceptance/toolchains/ that run for real in the tests (≈ 90 MB without recommends):
  # RSpec and Minitest (Ruby), PHPUnit, ExUnit (Elixir), CTest (CMake + a C compiler), Maven
  command -v ruby >/dev/null 2>&1 || lean+=(ruby ruby-minitest rake)
  command -v rspec >/dev/null 2>&1 || lean+=(ruby-rspec)
  command -v phpunit >/dev/null 2>&1 || lean+=(php-cli phpunit)
  command -v mix >/dev/null 2>&1 || lean+=(elixir)
  command -v cmake >/dev/null 2>&1 || lean+=(cmake)
  command -v cc >/dev/null 2>&1 || lean+=(gcc libc6-dev)
  command -v mvn >/dev/null 2>&1 || lean+=(maven)
fi

echo "setup: plan ($([ "$toolchains" = 1 ] && echo 'server and test toolchains' || echo 'server only; --test-toolchains adds what the test suite runs'))" >&2
extras=""
[ "$toolchains" = 1 ] && extras="[test]"
wanted="${optional[*]} ${lean[*]}"
wanted="${wanted## }"
wanted="${wanted%% }"
echo "setup:   required apt packages: ${need[*]:-(none missing)}" >&2
echo "setup:   optional apt packages: ${wanted:-(none missing)}" >&2
echo "setup:   python: .venv with tianshu-mcp$([ -n "$extras" ] && echo ' and its test extras') (pip install -e .$extras)" >&2
if [ "$toolchains" = 1 ]; then
  echo "setup:   npm: the test toolchains of tests/toolchains and tests/ts_host (when npm is there)" >&2
fi
if [ "$dry" = 1 ]; then
  echo "setup: --dry-run: nothing installed" >&2
  exit 0
fi

APT_WAIT="-o DPkg::Lock::Timeout=300"
apt_install() {  # apt_install [--no-install-recommends] PKG... ; returns apt's status
  DEBIAN_FRONTEND=noninteractive apt-get $APT_WAIT install -y -qq "$@" >/dev/null
}
if [ $((${#need[@]} + ${#optional[@]} + ${#lean[@]})) -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need[*]} ${optional[*]} ${lean[*]} with apt-get" >&2
    apt-get $APT_WAIT update -qq >/dev/null || echo "setup: apt-get update failed; trying the install anyway" >&2
    if [ ${#need[@]} -gt 0 ]; then
      apt_install "${need[@]}" || { echo "setup: could not install required ${need[*]}" >&2; exit 1; }
    fi
    if [ ${#optional[@]} -gt 0 ] && ! apt_install "${optional[@]}"; then  # together first (one download), else one by one
      for pkg in "${optional[@]}"; do
        apt_install "$pkg" || echo "setup: optional $pkg not installed; its tests will be skipped" >&2
      done
    fi
    if [ ${#lean[@]} -gt 0 ] && ! apt_install --no-install-recommends "${lean[@]}"; then
      for pkg in "${lean[@]}"; do
        apt_install --no-install-recommends "$pkg" || echo "setup: optional $pkg not installed; what needs it is skipped" >&2
      done
    fi
  elif [ ${#need[@]} -gt 0 ]; then
    echo "setup: please install: ${need[*]} (not root or no apt-get)" >&2
    exit 1
  else
    echo "setup: optional, not installed: ${optional[*]} ${lean[*]} (not root or no apt-get; what needs them is skipped)" >&2
  fi
fi

python3 - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"tianshu-mcp needs Python >= 3.11, found {sys.version.split()[0]}")
PY

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".$extras"
if [ "$toolchains" = 1 ] && command -v npm >/dev/null 2>&1 && { [ ! -x tests/toolchains/node_modules/.bin/vitest ] \
    || [ ! -x tests/toolchains/node_modules/.bin/bun ] || [ ! -x tests/toolchains/node_modules/.bin/deno ]; }; then
  (cd tests/toolchains && npm install --no-audit --no-fund --loglevel=error >/dev/null) \
    || echo "setup: npm install of the test toolchains failed; JavaScript runner tests will be skipped" >&2
fi
# the TypeScript-SDK host of tests/test_ts_host.py, at the exact versions of its lock file (re-run when the lock changes)
if [ "$toolchains" = 1 ] && command -v npm >/dev/null 2>&1 \
    && [ tests/ts_host/package-lock.json -nt tests/ts_host/node_modules/.package-lock.json ]; then
  (cd tests/ts_host && npm ci --no-audit --no-fund --loglevel=error >/dev/null) \
    || echo "setup: npm ci in tests/ts_host failed; tests/test_ts_host.py will fail until it succeeds" >&2
fi
echo "setup: ready (.venv/bin/tianshu-mcp)" >&2
