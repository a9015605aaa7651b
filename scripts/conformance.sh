#!/usr/bin/env bash
# Runs the MCP conformance suite against skillreg three times: as `make run`
# starts it (the embedded example skills), the same with the MCP fast path
# off (mcp.fast_path: false, so the Go SDK alone answers), and with a
# configuration that adds a local directory and a git source (a file://
# repository built here), each on a free loopback port with a fresh data
# directory. The git run keeps the default (fast path on): the two settings
# are held to the same answers by mcp's tests, so one run of each against
# the real suite is enough.
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

echo "conformance: 1/3 the embedded default (make run), fast path on"
start default
"$suite" "http://$addr/mcp"
stop

echo "conformance: 2/3 the embedded default, fast path off (mcp.fast_path: false)"
printf 'mcp:\n  fast_path: false\n' >"$tmp/sdk-only.yaml"
start sdk-only --config "$tmp/sdk-only.yaml"
grep -q "MCP fast path off" "$tmp/sdk-only.log" || { cat "$tmp/sdk-only.log" >&2; echo "conformance: the fast path is not off" >&2; exit 1; }
"$suite" "http://$addr/mcp"
stop

echo "conformance: 3/3 a directory and a git source, fast path on"
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
