#!/usr/bin/env bash
# Installs one pinned npm package into the tools folder, once, and prints the
# folder it lives in:
#
#   scripts/npm-tool.sh NAME VERSION     # e.g. skills 1.7.4
#
# Layout: $SKILLREG_TOOLS/npm/NAME@VERSION/node_modules/NAME (default
# SKILLREG_TOOLS ~/.cache/skillreg-tools). A finished install is marked with
# a .ok file, so an interrupted one is redone. Meant to be folded into the
# Makefile's tools step.
set -euo pipefail
name=${1:?usage: npm-tool.sh NAME VERSION}
ver=${2:?usage: npm-tool.sh NAME VERSION}
tools=${SKILLREG_TOOLS:-${HOME:-/tmp}/.cache/skillreg-tools}
dir="$tools/npm/${name//\//_}@$ver"
if [ ! -f "$dir/.ok" ]; then
  command -v npm >/dev/null 2>&1 || { echo "npm-tool: npm is required to install $name@$ver" >&2; exit 1; }
  rm -rf "$dir" && mkdir -p "$dir"
  echo "npm-tool: installing $name@$ver into $dir" >&2
  (cd "$dir" && echo '{"name":"skillreg-tool","private":true}' >package.json &&
    npm install --no-audit --no-fund --loglevel=error --save-exact "$name@$ver" >&2)
  touch "$dir/.ok"
fi
echo "$dir"
