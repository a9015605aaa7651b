package gitmirror

import (
	"context"
	"path"
	"slices"
	"strings"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// shallowTree names the tree of a snapshot whose skills are each alone in
// their directory (no skill at the root, none inside another, none under
// .claude-plugin, clean paths): then every directory above the skills is
// a run of the sorted skills, and one whose run holds the same skill
// values as in the last build (prevSnap, whose directory ids prevDirs
// are) keeps its id, so a one-skill change encodes that skill's tree and
// the directories above it. ok is false for any other snapshot; walk
// names those.
func (m *Mirror) shallowTree(ctx context.Context, snap *catalog.Snapshot, prev, memo map[*skill.Skill]skillMemo,
	prevSnap *catalog.Snapshot, prevDirs map[string]oid) (tree oid, dirs map[string]oid, ok bool, err error) {
	skills := snap.Skills
	for i, sk := range skills {
		p := sk.Path
		if p == "" || path.Clean(p) != p || p == ".claude-plugin" || strings.HasPrefix(p, ".claude-plugin/") ||
			i > 0 && skills[i-1].Path >= p {
			return tree, nil, false, nil
		}
		// A path inside p sorts after p and after whatever else starts
		// with p: when the next path does not, none is inside.
		if i+1 < len(skills) && !strings.HasPrefix(skills[i+1].Path, p) {
			continue
		}
		if j, _ := slices.BinarySearchFunc(skills, p+"/", func(s *skill.Skill, t string) int { return strings.Compare(s.Path, t) }); j < len(skills) && strings.HasPrefix(skills[j].Path, p+"/") {
			return tree, nil, false, nil // a nested skill
		}
	}
	ids := make([]oid, len(skills))
	lens := make([]int, len(skills))
	for i, sk := range skills {
		e, found := prev[sk]
		if !found {
			if e, err = m.skillEntry(ctx, snap, sk); err != nil {
				return tree, nil, false, err
			}
		}
		memo[sk] = e
		ids[i], lens[i] = e.tree, e.mpLen
	}
	// The directories above a skill that is not the same value as in
	// the last build (or no longer there) are encoded again.
	dirty := map[string]bool{}
	touch := func(p string) {
		for i := strings.LastIndexByte(p, '/'); i >= 0; i = strings.LastIndexByte(p, '/') {
			p = p[:i]
			if dirty[p] {
				return
			}
			dirty[p] = true
		}
	}
	if prevSnap == nil || prevDirs == nil {
		prevDirs = nil
	} else {
		old := prevSnap.Skills
		i, j := 0, 0
		for i < len(old) || j < len(skills) {
			switch {
			case j == len(skills) || i < len(old) && old[i].Path < skills[j].Path:
				touch(old[i].Path)
				i++
			case i == len(old) || skills[j].Path < old[i].Path:
				touch(skills[j].Path)
				j++
			default:
				if old[i] != skills[j] {
					touch(skills[j].Path)
				}
				i++
				j++
			}
		}
	}
	dirs = map[string]oid{}
	var dir func(d string, lo, hi int) oid
	dir = func(d string, lo, hi int) oid {
		prefix := ""
		if d != "" {
			prefix = d + "/"
		}
		var entries []treeEntry
		for i := lo; i < hi; {
			rel := skills[i].Path[len(prefix):]
			seg, _, deeper := strings.Cut(rel, "/")
			if !deeper {
				entries = append(entries, treeEntry{name: seg, mode: modeDir, id: ids[i]})
				i++
				continue
			}
			sub := prefix + seg
			j := i + 1
			for j < hi && strings.HasPrefix(skills[j].Path, sub+"/") {
				j++
			}
			id, known := prevDirs[sub]
			if !known || dirty[sub] {
				id = dir(sub, i, j)
			}
			dirs[sub] = id
			entries = append(entries, treeEntry{name: seg, mode: modeDir, id: id})
			i = j
		}
		if d == "" {
			return oid{} // the root is written below, with the marketplace
		}
		return writeTree(entries, nil)
	}
	// The root: its directories, then .claude-plugin.
	var entries []treeEntry
	for i := 0; i < len(skills); {
		seg, _, deeper := strings.Cut(skills[i].Path, "/")
		if !deeper {
			entries = append(entries, treeEntry{name: seg, mode: modeDir, id: ids[i]})
			i++
			continue
		}
		j := i + 1
		for j < len(skills) && strings.HasPrefix(skills[j].Path, seg+"/") {
			j++
		}
		id, known := prevDirs[seg]
		if !known || dirty[seg] {
			id = dir(seg, i, j)
		}
		dirs[seg] = id
		entries = append(entries, treeEntry{name: seg, mode: modeDir, id: id})
		i = j
	}
	enc := skillsMarketplace(snap.Source, m.o.Owner, skills) // sorted, clean paths: checked above
	enc.size = func(i int) int { return lens[i] }
	claude := writeTree([]treeEntry{{name: "marketplace.json", mode: modeFile, id: enc.id()}}, nil)
	entries = append(entries, treeEntry{name: ".claude-plugin", mode: modeDir, id: claude})
	return writeTree(entries, nil), dirs, true, nil
}
