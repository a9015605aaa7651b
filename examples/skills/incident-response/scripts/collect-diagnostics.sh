#!/usr/bin/env bash
# collect-diagnostics.sh: snapshot the state of a Linux host during an
# incident into one local tarball: uptime and load, disk and inode usage,
# memory, top processes, sockets, failed services, kernel messages and
# recent warning-level logs.
#
# Usage:
#   collect-diagnostics.sh [-o DIR] [-s SINCE] [-n LINES] [-u UNIT]... [-l FILE]...
#
# Options:
#   -o DIR     where to write the tarball (default: the current directory)
#   -s SINCE   how far back to read the journal, in journalctl syntax
#              (default: "1 hour ago"; e.g. "30 min ago", "2026-11-30 14:00")
#   -n LINES   at most this many lines per log (default: 2000)
#   -u UNIT    also collect the journal of this systemd unit (repeatable)
#   -l FILE    also collect the last LINES lines of this log file (repeatable)
#   -h         show this help
#
# Safety: read-only. It runs only inspection commands, each with a timeout,
# makes no network connection and uploads nothing. It does not collect
# environment variables or full process command lines, and it masks common
# secret patterns (passwords, tokens, API keys, Authorization headers,
# credentials in URLs) in everything it writes. Masking is best effort:
# review the tarball before sharing it. The tarball is created readable by
# its owner only. Run as root to include kernel messages and all logs.
#
# Exit status: 0 when the tarball was written, 1 when it could not be,
# 2 for a usage error.

set -uo pipefail
umask 077

usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"; }
die() { printf 'collect-diagnostics: %s\n' "$1" >&2; exit "${2:-2}"; }

out_dir=.
since="1 hour ago"
lines=2000
units=()
files=()
cmd_timeout=20

while getopts ':o:s:n:u:l:h' opt; do
  case "$opt" in
    o) out_dir=$OPTARG ;;
    s) since=$OPTARG ;;
    n) lines=$OPTARG ;;
    u) units+=("$OPTARG") ;;
    l) files+=("$OPTARG") ;;
    h) usage; exit 0 ;;
    :) die "option -$OPTARG needs a value (see -h)" ;;
    *) die "unknown option -$OPTARG (see -h)" ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || die "unexpected argument: $1 (see -h)"
[[ "$lines" =~ ^[1-9][0-9]{0,5}$ ]] || die "-n must be a number from 1 to 999999"
[ -d "$out_dir" ] && [ -w "$out_dir" ] || die "output directory $out_dir is not a writable directory"
[ "$(uname -s)" = Linux ] || echo "collect-diagnostics: not Linux; some sections will be empty" >&2

host=$(hostname 2>/dev/null || uname -n)
host=${host//[^A-Za-z0-9._-]/_}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
name="diagnostics-$host-$stamp"
work=$(mktemp -d) || die "cannot create a temporary directory" 1
trap 'rm -rf -- "$work"' EXIT
dir="$work/$name"
mkdir "$dir" || die "cannot create $dir" 1

# Mask values that look like secrets. Best effort, applied to every output.
redact() {
  sed -E \
    -e 's#(://)[^/@[:space:]]+:[^/@[:space:]]+@#\1<redacted>@#g' \
    -e 's#([Aa]uthorization:?[[:space:]]*)(Bearer|Basic|token)[[:space:]]+[^[:space:]"]+#\1\2 <redacted>#g' \
    -e 's#([Pp]assword|[Pp]asswd|[Ss]ecret|[Tt]oken|[Aa][Pp][Ii][_-]?[Kk]ey|[Aa]ccess[_-]?[Kk]ey)(["]?[[:space:]]*[:=][[:space:]]*["]?)[^[:space:]",;&]+#\1\2<redacted>#g' \
    -e 's#(gh[pousr]_)[A-Za-z0-9]{20,}#\1<redacted>#g' \
    -e 's#(AKIA)[A-Z0-9]{16}#\1<redacted>#g'
}

have_timeout=0
command -v timeout >/dev/null 2>&1 && have_timeout=1

# run FILE MAX COMMAND [ARGS...]: append the command, its output (masked)
# and its exit status to FILE. MAX keeps the first MAX lines, -MAX the last.
run() {
  local file=$1 max=$2 keep=(head -n "$2")
  shift 2
  [[ "$max" == -* ]] && keep=(tail -n "${max#-}")
  {
    printf '\n$'; printf ' %q' "$@"; printf '\n'
    if ! command -v "$1" >/dev/null 2>&1; then
      printf '[not available: %s]\n' "$1"
      return
    fi
    if [ "$have_timeout" = 1 ]; then
      timeout "$cmd_timeout" "$@" </dev/null 2>&1 | "${keep[@]}" | redact
    else
      "$@" </dev/null 2>&1 | "${keep[@]}" | redact
    fi
    printf '[exit %s]\n' "${PIPESTATUS[0]}"
  } >>"$dir/$file"
}

# section FILE TITLE: start a file with a header.
section() { printf '# %s\n# collected %s on %s\n' "$2" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$host" >"$dir/$1"; }

echo "collecting into $name ..." >&2

section system.txt "System"
run system.txt 50 date -u
run system.txt 50 uname -a
run system.txt 50 uptime
run system.txt 50 cat /proc/loadavg
run system.txt 50 nproc
run system.txt 50 cat /etc/os-release
run system.txt 50 who -b
run system.txt 50 timedatectl status

section disk.txt "Disk"
run disk.txt 200 df -hT -x tmpfs -x devtmpfs -x squashfs -x overlay
run disk.txt 200 df -i -x tmpfs -x devtmpfs -x squashfs -x overlay
run disk.txt 200 lsblk -o NAME,SIZE,TYPE,FSTYPE,MOUNTPOINT
run disk.txt 200 findmnt -o TARGET,SOURCE,FSTYPE,OPTIONS -t nocgroup,noproc,nosysfs,nodevpts,notmpfs
run disk.txt 50 cat /proc/pressure/io

section memory.txt "Memory"
run memory.txt 50 free -m
run memory.txt 100 cat /proc/meminfo
run memory.txt 50 cat /proc/pressure/memory
run memory.txt 50 swapon --show
run memory.txt 50 vmstat 1 5

section processes.txt "Processes (command names only, no arguments)"
run processes.txt 41 ps -eo pid,ppid,user,pcpu,pmem,rss,etime,stat,comm --sort=-pcpu
run processes.txt 41 ps -eo pid,ppid,user,pcpu,pmem,rss,etime,stat,comm --sort=-rss
# Processes in uninterruptible sleep (state D) are usually waiting on I/O.
run processes.txt 100 bash -c "ps -eo pid,ppid,user,stat,etime,wchan:32,comm | awk 'NR == 1 || \$4 ~ /^D/'"
run processes.txt 50 cat /proc/pressure/cpu

section network.txt "Sockets (local state only; no connections are made)"
run network.txt 50 ss -s
run network.txt 200 ss -tlnu
run network.txt 50 ip -brief address
run network.txt 50 ip route show

section services.txt "Services"
run services.txt 200 systemctl --failed --no-pager --no-legend
run services.txt 100 systemctl list-jobs --no-pager

section kernel.txt "Kernel messages (errors and warnings; may need root)"
run kernel.txt "-$lines" dmesg --ctime --level=emerg,alert,crit,err,warn

section journal.txt "Journal since $since, priority warning and above"
run journal.txt "$lines" journalctl --no-pager --utc --since "$since" --priority warning --lines "$lines"

for unit in "${units[@]}"; do
  safe=${unit//[^A-Za-z0-9._@-]/_}
  section "unit-$safe.txt" "Journal of $unit since $since"
  run "unit-$safe.txt" "$lines" journalctl --no-pager --utc --since "$since" --unit "$unit" --lines "$lines"
  run "unit-$safe.txt" 50 systemctl status --no-pager --lines 0 "$unit"
done

for file in "${files[@]}"; do
  safe=$(printf '%s' "$file" | tr -c 'A-Za-z0-9._-' '_')
  section "log-$safe.txt" "Last $lines lines of $file"
  if [ -f "$file" ] && [ -r "$file" ]; then
    run "log-$safe.txt" "-$lines" tail -n "$lines" -- "$file"
  else
    printf '[not a readable file: %s]\n' "$file" >>"$dir/log-$safe.txt"
  fi
done

{
  printf 'host: %s\n' "$host"
  printf 'collected_utc: %s\n' "$stamp"
  printf 'collector: collect-diagnostics.sh (read-only, nothing uploaded)\n'
  printf 'user: %s (uid %s)\n' "$(id -un 2>/dev/null)" "$(id -u)"
  printf 'journal_since: %s\n' "$since"
  printf 'files:\n'
  (cd "$dir" && ls -1)
} >"$dir/README.txt"

tarball="$out_dir/$name.tar.gz"
tar -C "$work" -czf "$tarball" "$name" || die "could not write $tarball" 1
chmod 600 "$tarball" 2>/dev/null

echo "wrote $tarball ($(wc -c <"$tarball" | tr -d ' ') bytes)"
command -v sha256sum >/dev/null 2>&1 && sha256sum "$tarball"
echo "review it before sharing: secret masking is best effort" >&2
