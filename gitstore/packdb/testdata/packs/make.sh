#!/bin/sh
# Regenerates the seed packs of FuzzIndexPack and TestSeedPacks from a
# small history made here, with fixed names and dates, by git itself:
#
#   base.pack       commit c1 and everything it reaches (the thin packs' bases)
#   full-ofs.pack   commit c3 whole, deltas as OFS_DELTA
#   full-ref.pack   commit c3 whole, deltas as REF_DELTA
#   thin-ofs.pack   c3 for a receiver holding c1 (--thin): REF_DELTAs against c1's objects
#   thin-ref.pack   the same without --delta-base-offset
#
# Run it from this directory: sh make.sh
set -eu
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=seed GIT_AUTHOR_EMAIL=seed@example.com
export GIT_COMMITTER_NAME=seed GIT_COMMITTER_EMAIL=seed@example.com
out=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
git init -q -b main .
doc() { # doc <edited line> <text>: 120 lines that change slowly
	i=0
	while [ $i -lt 120 ]; do
		if [ $i -eq "$1" ]; then echo "$2"; else echo "line $i of a long document that changes slowly"; fi
		i=$((i + 1))
	done
}
commit() { # commit <n>
	git add -A
	GIT_AUTHOR_DATE="2026-01-0$1T12:00:00Z" GIT_COMMITTER_DATE="2026-01-0$1T12:00:00Z" git commit -q -m "c$1"
}
mkdir -p skills/a skills/b
printf -- '---\nname: a\ndescription: the first skill\n---\n# a\n' >skills/a/SKILL.md
printf 'echo a\n' >skills/a/run.sh
chmod +x skills/a/run.sh
doc 10 "edited in c1" >skills/b/doc.md
doc 10 "edited in c1" | sed 's/line/row/' >skills/b/copy.md
commit 1
doc 50 "edited in c2" >skills/b/doc.md
printf -- '---\nname: c\ndescription: added in c2\n---\n' >skills/c.md
commit 2
doc 90 "edited in c3" >skills/b/doc.md
doc 90 "edited in c3" | sed 's/line/row/' >skills/b/copy.md
commit 3
git repack -q -a -d -f --window=50 --depth=50
c1=$(git rev-parse HEAD~2)
c3=$(git rev-parse HEAD)
pack() { # pack <name> <revs> <args...>
	name=$1 revs=$2
	shift 2
	printf "$revs" | git pack-objects -q --revs --stdout "$@" >"$out/$name"
}
pack base.pack "$c1\n"
pack full-ofs.pack "$c3\n" --delta-base-offset
pack full-ref.pack "$c3\n"
pack thin-ofs.pack "$c3\n^$c1\n" --thin --delta-base-offset
pack thin-ref.pack "$c3\n^$c1\n" --thin
