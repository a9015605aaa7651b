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
//
// The skill cache (st.skills) is changed in place for the skills that
// changed, and the marketplace's length kept by difference, so a swap
// looks up what changed, not every skill.
func (m *Mirror) shallowTree(ctx context.Context, snap *catalog.Snapshot, st *sourceState) (tree oid, memo map[*skill.Skill]skillMemo, dirs map[string]oid, body int64, ok bool, err error) {
	skills := snap.Skills
	for i, sk := range skills {
		p := sk.Path
		if p == "" || path.Clean(p) != p || p == ".claude-plugin" || strings.HasPrefix(p, ".claude-plugin/") ||
			i > 0 && skills[i-1].Path >= p {
			return tree, nil, nil, 0, false, nil
		}
		// A path inside p sorts after p and after whatever else starts
		// with p: when the next path does not, none is inside.
		if i+1 < len(skills) && !strings.HasPrefix(skills[i+1].Path, p) {
			continue
		}
		if j, _ := slices.BinarySearchFunc(skills, p+"/", func(s *skill.Skill, t string) int { return strings.Compare(s.Path, t) }); j < len(skills) && strings.HasPrefix(skills[j].Path, p+"/") {
			return tree, nil, nil, 0, false, nil // a nested skill
		}
	}
	entry := func(sk *skill.Skill) (skillMemo, error) {
		if e, found := memo[sk]; found {
			return e, nil
		}
		e, err := m.skillEntry(ctx, snap, sk)
		if err == nil {
			memo[sk] = e
		}
		return e, err
	}
	// plugin is a plugin's share of the marketplace's length: its
	// object, the indent before it and the comma after it.
	plugin := func(e skillMemo) int64 { return int64(len("\n    ") + e.mpLen + 1) }
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
	prevDirs := st.dirs
	if st.snap == nil || st.dirs == nil || st.skills == nil || st.mpBody < 0 {
		prevDirs = nil
		memo = make(map[*skill.Skill]skillMemo, len(skills))
		for _, sk := range skills {
			e, found := st.skills[sk]
			if !found {
				if e, err = m.skillEntry(ctx, snap, sk); err != nil {
					return tree, nil, nil, 0, false, err
				}
			}
			memo[sk] = e
			body += plugin(e)
		}
	} else {
		memo, body = st.skills, st.mpBody
		// From here on the cache is being changed: a failure must not
		// leave it believed.
		st.skills, st.dirs, st.mpBody = nil, nil, -1
		drop := func(sk *skill.Skill) {
			if e, found := memo[sk]; found {
				body -= plugin(e)
				delete(memo, sk)
			}
		}
		add := func(sk *skill.Skill) error {
			e, err := entry(sk)
			body += plugin(e)
			return err
		}
		old := st.snap.Skills
		i, j := 0, 0
		for i < len(old) || j < len(skills) {
			switch {
			case j == len(skills) || i < len(old) && old[i].Path < skills[j].Path:
				touch(old[i].Path)
				drop(old[i])
				i++
			case i == len(old) || skills[j].Path < old[i].Path:
				touch(skills[j].Path)
				if err := add(skills[j]); err != nil {
					return tree, nil, nil, 0, false, err
				}
				j++
			default:
				if old[i] != skills[j] {
					touch(skills[j].Path)
					drop(old[i])
					if err := add(skills[j]); err != nil {
						return tree, nil, nil, 0, false, err
					}
				}
				i++
				j++
			}
		}
	}
	dirs = map[string]oid{}
	var fail error
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
				e, err := entry(skills[i])
				if err != nil {
					fail = err
				}
				entries = append(entries, treeEntry{name: seg, mode: modeDir, id: e.tree})
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
			e, err := entry(skills[i])
			if err != nil {
				return tree, nil, nil, 0, false, err
			}
			entries = append(entries, treeEntry{name: seg, mode: modeDir, id: e.tree})
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
	if fail != nil {
		return tree, nil, nil, 0, false, fail
	}
	enc := skillsMarketplace(snap.Source, m.o.Owner, skills) // sorted, clean paths: checked above
	enc.body = body
	claude := writeTree([]treeEntry{{name: "marketplace.json", mode: modeFile, id: enc.id()}}, nil)
	entries = append(entries, treeEntry{name: ".claude-plugin", mode: modeDir, id: claude})
	return writeTree(entries, nil), memo, dirs, body, true, nil
}
