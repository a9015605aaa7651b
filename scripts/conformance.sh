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
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# start NAME [serve flags...]: starts the daemon, sets addr.
start() {
  local name=$1; shift
  "$bin" serve --listen 127.0.0.1:0 --data "$tmp/$name-data" "$@" >"$tmp/$name.log" 2>&1 &
  pid=$!
  addr=""
  for _ in $(seq 1 300); do
    addr=$(sed -n 's/.*"msg":"serving","addr":"\([^"]*\)".*/\1/p' "$tmp/$name.log" | head -n 1)
    if [ -n "$addr" ] && node -e "fetch(process.argv[1]).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))" "http://$addr/readyz"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then cat "$tmp/$name.log" >&2; echo "conformance: skillreg exited" >&2; exit 1; fi
    sleep 0.1
  done
  cat "$tmp/$name.log" >&2
  echo "conformance: skillreg did not become ready" >&2
  exit 1
}

stop() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}

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
