#!/usr/bin/env bash
# Runs the MCP conformance suite against skillreg twice: as `make run`
# starts it (the embedded example skills), and with a configuration that
# adds a local directory and a git source (a file:// repository built here),
# each on a free loopback port with a fresh data directory.
#
#   scripts/conformance.sh BIN RUN_SH
set -euo pipefail
bin=${1:?usage: conformance.sh BIN RUN_SH}
suite=${2:?usage: conformance.sh BIN RUN_SH}
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pid=""
trap 'stop; rm -rf "$tmp"' EXIT

. "$top/scripts/lib.sh"

echo "conformance: 1/2 the embedded default (make run)"
start default
"$suite" "http://$addr/mcp"
stop

echo "conformance: 2/2 a directory and a git source"
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
git init -q --bare -b main "$tmp/team.git"
git init -q -b main "$tmp/work"
mkdir -p "$tmp/work/skills"
cp -R "$top/examples/skills/incident-response" "$top/examples/skills/release-engineering" "$tmp/work/skills/"
git -C "$tmp/work" add -A
git -C "$tmp/work" -c user.name=conformance -c user.email=conformance@localhost commit -q -m "team skills"
git -C "$tmp/work" push -q "$tmp/team.git" HEAD:refs/heads/main
cat >"$tmp/config.yaml" <<YAML
sources:
  - name: team
    url: file://$tmp/team.git
    ref: {branch: main}
    path: skills
  - name: local
    dir: $top/examples/skills
YAML
start git --config "$tmp/config.yaml"
"$suite" "http://$addr/mcp"
stop
