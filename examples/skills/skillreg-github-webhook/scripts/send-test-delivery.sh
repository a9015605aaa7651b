#!/usr/bin/env bash
# send-test-delivery.sh: send a signed GitHub-style webhook delivery to a
# skillreg server, exactly as GitHub would sign it, and explain the answer.
#
# Usage:
#   SKILLREG_WEBHOOK_SECRET=... send-test-delivery.sh [options] URL
#
#   URL               the webhook endpoint, e.g. https://skills.example.com/webhooks/github
#
# Options:
#   -e EVENT          event name for X-GitHub-Event: ping (default) or push
#   -r OWNER/REPO     repository to name in the payload (required for push)
#   -b BRANCH         branch for a push event (default: main)
#   -p FILE           send FILE as the payload instead of the built-in one
#                     (use -e to give its event name)
#   -f json|form      content type: application/json (default) or
#                     application/x-www-form-urlencoded (body payload=...)
#   -s FILE           read the secret from FILE instead of the environment
#   -k                do not verify the server's TLS certificate (test hosts only)
#   -h                show this help
#
# The secret comes from SKILLREG_WEBHOOK_SECRET (or -s FILE). When it holds
# several secrets (one per line or comma-separated, for rotation), the first
# one signs, as GitHub would sign with the secret it is configured with.
#
# Nothing is written outside a private temporary directory, which is removed
# on exit. Note: openssl receives the secret as a command-line argument, so
# it is briefly visible in the local process list; run this on a machine you
# control.
#
# Exit status: 0 for a 2xx answer, 1 for any other answer or a connection
# failure, 2 for a usage error.

set -euo pipefail

usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"; }
die() { printf 'send-test-delivery: %s\n' "$1" >&2; exit 2; }

event=ping
repo=
branch=main
payload_file=
format=json
secret_file=
insecure=()

while getopts ':e:r:b:p:f:s:kh' opt; do
  case "$opt" in
    e) event=$OPTARG ;;
    r) repo=$OPTARG ;;
    b) branch=$OPTARG ;;
    p) payload_file=$OPTARG ;;
    f) format=$OPTARG ;;
    s) secret_file=$OPTARG ;;
    k) insecure=(--insecure) ;;
    h) usage; exit 0 ;;
    :) die "option -$OPTARG needs a value (see -h)" ;;
    *) die "unknown option -$OPTARG (see -h)" ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || die "give exactly one URL (see -h)"
url=$1

for tool in openssl curl; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required but not installed"
done
case "$format" in json|form) ;; *) die "-f must be json or form" ;; esac
case "$url" in http://*|https://*) ;; *) die "URL must start with http:// or https://" ;; esac
case "$url" in *[[:space:]\"\\]*) die "URL must not contain spaces, quotes or backslashes" ;; esac
if [ -n "$repo" ] && ! [[ "$repo" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]]; then
  die "-r must look like OWNER/REPO"
fi

# The secret: first entry of a newline- or comma-separated list.
if [ -n "$secret_file" ]; then
  [ -r "$secret_file" ] || die "cannot read secret file $secret_file"
  secrets=$(cat -- "$secret_file")
else
  secrets=${SKILLREG_WEBHOOK_SECRET:-}
fi
secret=$(printf '%s\n' "$secrets" | tr ',' '\n' | sed 's/^[[:space:]]*//;s/[[:space:]]*$//' | grep -m1 . || true)
[ -n "$secret" ] || die "no secret: set SKILLREG_WEBHOOK_SECRET or pass -s FILE"

tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
umask 077

# A delivery id shaped like GitHub's (a GUID).
if [ -r /proc/sys/kernel/random/uuid ]; then
  delivery=$(cat /proc/sys/kernel/random/uuid)
else
  hex=$(openssl rand -hex 16)
  delivery="${hex:0:8}-${hex:8:4}-${hex:12:4}-${hex:16:4}-${hex:20:12}"
fi

repository_json() {
  # Minimal repository object with the fields skillreg matches on.
  local owner=${repo%%/*}
  printf '{"id":1,"name":"%s","full_name":"%s","private":false,' "${repo#*/}" "$repo"
  printf '"owner":{"login":"%s"},"html_url":"https://github.com/%s",' "$owner" "$repo"
  printf '"clone_url":"https://github.com/%s.git","ssh_url":"git@github.com:%s.git",' "$repo" "$repo"
  printf '"default_branch":"main"}'
}

json=$tmp/payload.json
if [ -n "$payload_file" ]; then
  [ -r "$payload_file" ] || die "cannot read payload file $payload_file"
  cp -- "$payload_file" "$json"
elif [ "$event" = ping ]; then
  {
    printf '{"zen":"Keep it logically awesome.","hook_id":1,'
    printf '"hook":{"type":"Repository","id":1,"name":"web","active":true,'
    printf '"events":["create","delete","push","release"],'
    printf '"config":{"content_type":"%s","insecure_ssl":"0","url":"%s"}}' "$format" "$url"
    if [ -n "$repo" ]; then printf ',"repository":%s' "$(repository_json)"; fi
    printf ',"sender":{"login":"send-test-delivery"}}'
  } >"$json"
elif [ "$event" = push ]; then
  [ -n "$repo" ] || die "a push needs -r OWNER/REPO"
  [[ "$branch" =~ ^[A-Za-z0-9._/-]+$ ]] || die "-b must be a plain branch name"
  zero=0000000000000000000000000000000000000000
  head=$(openssl rand -hex 20)
  {
    printf '{"ref":"refs/heads/%s","before":"%s","after":"%s",' "$branch" "$zero" "$head"
    printf '"created":false,"deleted":false,"forced":false,"commits":[],'
    printf '"head_commit":null,"repository":%s,' "$(repository_json)"
    printf '"pusher":{"name":"send-test-delivery"},"sender":{"login":"send-test-delivery"}}'
  } >"$json"
else
  die "no built-in payload for event '$event': pass one with -p FILE"
fi

# The exact bytes sent are the bytes signed.
body=$tmp/body
if [ "$format" = json ]; then
  content_type=application/json
  cp -- "$json" "$body"
else
  content_type=application/x-www-form-urlencoded
  # Percent-encode every byte outside the unreserved set (RFC 3986).
  LC_ALL=C
  raw=$(cat -- "$json")
  encoded=
  for ((i = 0; i < ${#raw}; i++)); do
    c=${raw:i:1}
    case "$c" in
      [A-Za-z0-9.~_-]) encoded+=$c ;;
      *) printf -v hexc '%%%02X' "'$c"; encoded+=$hexc ;;
    esac
  done
  printf 'payload=%s' "$encoded" >"$body"
fi

signature=$(openssl dgst -sha256 -hmac "$secret" <"$body" | awk '{print $NF}')
[[ "$signature" =~ ^[0-9a-f]{64}$ ]] || die "could not compute the HMAC with openssl"

printf 'POST %s\n  X-GitHub-Event: %s\n  X-GitHub-Delivery: %s\n  Content-Type: %s\n  bytes: %s\n' \
  "$url" "$event" "$delivery" "$content_type" "$(wc -c <"$body" | tr -d ' ')"

status=$(curl --silent --show-error "${insecure[@]}" \
  --max-time 15 \
  --output "$tmp/response" \
  --write-out '%{http_code}' \
  --request POST \
  --header "Content-Type: $content_type" \
  --header "User-Agent: GitHub-Hookshot/send-test-delivery" \
  --header "X-GitHub-Event: $event" \
  --header "X-GitHub-Delivery: $delivery" \
  --header "X-GitHub-Hook-ID: 1" \
  --header "X-Hub-Signature-256: sha256=$signature" \
  --data-binary "@$body" \
  "$url") || { echo "connection failed: is the server running and the URL right?" >&2; exit 1; }

printf 'HTTP %s\n' "$status"
if [ -s "$tmp/response" ]; then
  head -c 2000 "$tmp/response"; echo
fi

case "$status" in
  200) echo "OK: delivery accepted (ping answered, or a redelivery of a known id)." ;;
  202) echo "Accepted: a sync was queued for the matching sources." ;;
  204) echo "Ignored: skillreg tracks no source for this event or repository." ;;
  401) echo "Signature rejected: the secret here differs from the server's." ;;
  404) echo "Not found: wrong path, or the server has no webhook secret configured (endpoint not mounted)." ;;
  413) echo "Too large: the body is over the 25 MiB limit." ;;
  415) echo "Unsupported content type: use -f json or -f form." ;;
  *)   echo "Unexpected status; check the server log for delivery $delivery." ;;
esac

case "$status" in 2??) exit 0 ;; *) exit 1 ;; esac
