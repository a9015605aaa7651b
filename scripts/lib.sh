# Shared by the scripts that run a real skillreg for external clients.
# Source it; it defines start and stop, and uses $bin and $tmp.

# start NAME [serve flags...]: starts `skillreg serve` on a free loopback
# port with a fresh data directory, waits until /readyz answers 200, and
# sets pid and addr.
start() {
  local name=$1; shift
  "$bin" serve --listen 127.0.0.1:0 --data "$tmp/$name-data" "$@" >"$tmp/$name.log" 2>&1 &
  pid=$!
  addr=""
  for _ in $(seq 1 300); do
    addr=$(sed -n 's/.*"msg":"serving","addr":"\([^"]*\)".*/\1/p' "$tmp/$name.log" | head -n 1)
    if [ -n "$addr" ] && node -e "fetch(process.argv[1]).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))" "http://$addr/readyz"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then cat "$tmp/$name.log" >&2; echo "skillreg exited" >&2; exit 1; fi
    sleep 0.1
  done
  cat "$tmp/$name.log" >&2
  echo "skillreg did not become ready" >&2
  exit 1
}

stop() {
  if [ -n "${pid:-}" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  pid=""
}
