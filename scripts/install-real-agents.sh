#!/usr/bin/env bash
# Installs the real agent CLIs at the versions the `real_agents` test tier was run with
# (docs/real-agents.md) into one prefix, never into the system:
#   <prefix>/node      Node 22 from the npm registry's `node` package (Claude Code, Qwen Code and
#                      claude-agent-acp need Node >= 22; npm installs older releases on Node 20)
#   <prefix>/npm       the npm CLIs and ACP adapters (bin/ holds their commands)
#   <prefix>/aider     a virtualenv with aider-chat
# Usage: scripts/install-real-agents.sh [prefix]   (default: $TIANSHU_REAL_AGENTS or
# ~/.cache/tianshu-mcp/real-agents). Prints the PATH to use. Safe to run again: a package already
# at its pinned version is left alone.
set -euo pipefail
PREFIX="${1:-${TIANSHU_REAL_AGENTS:-$HOME/.cache/tianshu-mcp/real-agents}}"
NODE_VERSION="22.23.3"
NPM_PACKAGES=(
  "@openai/codex@0.171.0"
  "@anthropic-ai/claude-code@2.1.332"
  "@google/gemini-cli@0.61.0"
  "@qwen-code/qwen-code@0.24.4"
  "opencode-ai@1.18.33"
  "@agentclientprotocol/codex-acp@2.6.0"
  "@agentclientprotocol/claude-agent-acp@0.101.0"
)
AIDER_VERSION="0.86.2"
PYTHON="${PYTHON:-python3}"

mkdir -p "$PREFIX"
echo "real agents: installing into $PREFIX" >&2

if [ ! -x "$PREFIX/node/bin/node" ] || [ "$("$PREFIX/node/bin/node" --version)" != "v$NODE_VERSION" ]; then
  echo "real agents: node $NODE_VERSION" >&2
  npm install --no-audit --no-fund --prefix "$PREFIX/node-pkg" "node@$NODE_VERSION" >&2
  mkdir -p "$PREFIX/node/bin"
  ln -sf "$PREFIX/node-pkg/node_modules/node/bin/node" "$PREFIX/node/bin/node"
fi
export PATH="$PREFIX/node/bin:$PATH"

missing=()
for spec in "${NPM_PACKAGES[@]}"; do
  name="${spec%@*}"; version="${spec##*@}"
  have=$("$PREFIX/node/bin/node" -e "try{console.log(require('$PREFIX/npm/lib/node_modules/$name/package.json').version)}catch(e){}" 2>/dev/null || true)
  [ "$have" = "$version" ] || missing+=("$spec")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "real agents: npm ${missing[*]}" >&2
  # npm runs on the Node 22 above, so engines fields pick the pinned releases.
  "$PREFIX/node/bin/node" "$(readlink -f "$(command -v npm)")" install -g --no-audit --no-fund --prefix "$PREFIX/npm" "${missing[@]}" >&2
fi

if [ ! -x "$PREFIX/aider/bin/aider" ] || ! "$PREFIX/aider/bin/python" -c "import importlib.metadata as m,sys; sys.exit(m.version('aider-chat')!='$AIDER_VERSION')"; then
  echo "real agents: aider-chat $AIDER_VERSION" >&2
  "$PYTHON" -m venv "$PREFIX/aider"
  "$PREFIX/aider/bin/pip" install -q "aider-chat==$AIDER_VERSION" >&2
fi
mkdir -p "$PREFIX/bin"
ln -sf "$PREFIX/aider/bin/aider" "$PREFIX/bin/aider"
echo "$PREFIX/bin:$PREFIX/npm/bin:$PREFIX/node/bin"
