#!/usr/bin/env bash
# Installs the pinned Go tools that `make lint` runs (the list is
# scripts/go-tools.txt, one module/path/to/cmd@version a line) into
# $SKILLREG_TOOLS/go/<name>@<version>/<name> (default
# ~/.cache/skillreg-tools), then links $SKILLREG_TOOLS/go/bin/<name> to it.
# Idempotent and cached: a version already built is not built again and
# needs no network. It needs Go on PATH; `go install` fetches the module
# through the Go module proxy.
#
#   scripts/install-go-tools.sh        # install what is missing
#   scripts/install-go-tools.sh --bin  # print the bin folder and exit
#
# On failure it says what failed and exits 1, so `make test` stops before
# the lint step rather than skipping it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list="$here/go-tools.txt"
root=${SKILLREG_TOOLS:-${HOME:-/tmp}/.cache/skillreg-tools}
dir="$root/go"
bin="$dir/bin"

if [ "${1:-}" = "--bin" ]; then
  echo "$bin"
  exit 0
fi

fail() {
  echo "go-tools: $*" >&2
  echo "go-tools: 'make lint' cannot run; fix the above and run 'make go-tools' again" >&2
  exit 1
}

command -v "${GO:-go}" >/dev/null 2>&1 || fail "Go is not on PATH; install Go (https://go.dev/dl/) and retry"
mkdir -p "$bin" || fail "cannot create $bin (set SKILLREG_TOOLS to a writable folder)"

while read -r line; do
  line=${line%%#*}
  line=$(echo "$line" | tr -d '[:space:]')
  [ -n "$line" ] || continue
  case "$line" in
    ?*@v[0-9]*) ;;
    *) fail "$list: '$line' is not path@vX.Y.Z" ;;
  esac
  pkg=${line%@*}
  version=${line##*@}
  name=${pkg##*/}
  # Each version gets its own folder, so changing a pin rebuilds and the
  # old binary can never answer for the new version.
  vdir="$dir/$name@$version"
  if [ ! -x "$vdir/$name" ]; then
    echo "go-tools: installing $line into $vdir" >&2
    mkdir -p "$vdir"
    # GOFLAGS is cleared so a caller's -mod=vendor or similar cannot break
    # the install; the tool builds with its own go.mod.
    GOBIN="$vdir" GOFLAGS= "${GO:-go}" install "$line" >&2 ||
      fail "go install $line failed (no network to the Go module proxy? a Go too old for $version?)"
    [ -x "$vdir/$name" ] || fail "go install $line did not produce $vdir/$name"
  fi
  ln -sfn "../$name@$version/$name" "$bin/$name" || fail "cannot link $bin/$name"
done <"$list"
