#!/usr/bin/env bash
# Starts skillreg on a free loopback port with a fresh data directory, runs
# the MCP conformance suite against it, and stops it.
#
#   scripts/conformance.sh BIN RUN_SH
set -euo pipefail
bin=${1:?usage: conformance.sh BIN RUN_SH}
suite=${2:?usage: conformance.sh BIN RUN_SH}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT

"$bin" serve --listen 127.0.0.1:0 --data "$tmp/data" >"$tmp/log" 2>&1 &
pid=$!
addr=""
for _ in $(seq 1 200); do
  addr=$(sed -n 's/.*"msg":"serving","addr":"\([^"]*\)".*/\1/p' "$tmp/log" | head -n 1)
  if [ -n "$addr" ] && node -e "fetch(process.argv[1]).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))" "http://$addr/readyz"; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then cat "$tmp/log" >&2; echo "conformance: skillreg exited" >&2; exit 1; fi
  sleep 0.1
done
[ -n "$addr" ] || { cat "$tmp/log" >&2; echo "conformance: skillreg did not become ready" >&2; exit 1; }
echo "conformance: skillreg ready at http://$addr/mcp"
"$suite" "http://$addr/mcp"
