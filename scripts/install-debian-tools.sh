#!/usr/bin/env bash
# Makes sure the Debian packages some tests run are installed: headless
# Chromium for the web package's browser tests (web/browser_test.go), and
# curl and jq for the marketplace headersHelper tests
# (cmd/skillreg/oidc_test.go runs deploy/headers-helper/skillreg-headers),
# and gpg and ssh-keygen, which internal/sigtest signs commits and tags with
# for the signature tests (sigverify, verified sources, pull --verify-keys).
# A no-op when they are.
#
#   scripts/install-debian-tools.sh
#
# Installs what is missing with apt-get (as root, or through sudo). When it
# cannot install, it warns and exits 0 so that `make test` goes on and those
# tests skip with their own message; with CI=true it exits 1 instead,
# because CI must run every test.
set -euo pipefail

# command (any of them, |-separated) and the package that brings it
wanted=(
  "chromium|chromium-browser chromium"
  "jq jq"
  "curl curl"
  "gpg gnupg"
  "ssh-keygen openssh-client"
)

missing=() missingcmds=()
for w in "${wanted[@]}"; do
  cmds=${w% *} pkg=${w##* } found=
  IFS='|' read -ra names <<<"$cmds"
  for name in "${names[@]}"; do
    if command -v "$name" >/dev/null 2>&1; then
      found=1
      break
    fi
  done
  [ -n "$found" ] || { missing+=("$pkg"); missingcmds+=("$cmds"); }
done
[ ${#missing[@]} -eq 0 ] && exit 0

fail() {
  echo "install-debian-tools: $*" >&2
  if [ "${CI:-}" = "true" ]; then
    exit 1
  fi
  echo "install-debian-tools: continuing; the tests that need ${missing[*]} will be skipped" >&2
  exit 0
}

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found; install ${missing[*]} with your package manager"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || fail "installing ${missing[*]} needs root (or sudo)"
  sudo=(sudo)
fi
echo "install-debian-tools: installing ${missing[*]} with apt-get" >&2
"${sudo[@]}" apt-get update -qq || fail "apt-get update failed"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
  fail "apt-get install ${missing[*]} failed"
for i in "${!missing[@]}"; do
  found=
  IFS='|' read -ra names <<<"${missingcmds[$i]}"
  for name in "${names[@]}"; do
    if command -v "$name" >/dev/null 2>&1; then
      found=1
    fi
  done
  [ -n "$found" ] || fail "${missing[$i]} is installed but ${missingcmds[$i]} is still not on PATH"
done
