package discovery

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// MaxNameLen bounds a discovered source's name (the URI authority's
// label).
const MaxNameLen = 63

// SourceName is the name a repository is given at its first discovery:
// "<owner>-<repo>" lower-cased, every character outside [a-z0-9.-] mapped
// to '-', a '.' after a '.' mapped to '-' (no ".." in a URI authority),
// at most MaxNameLen characters, starting and ending with a letter or
// digit. ok is false when nothing of the kind is left.
func SourceName(owner, repo string) (string, bool) {
	var b strings.Builder
	for _, r := range strings.ToLower(owner + "-" + repo) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == '.':
			if strings.HasSuffix(b.String(), ".") {
				b.WriteByte('-')
			} else {
				b.WriteByte('.')
			}
		default:
			b.WriteByte('-')
		}
	}
	s := b.String()
	if len(s) > MaxNameLen {
		s = s[:MaxNameLen]
	}
	s = strings.Trim(s, "-.")
	if s == "" {
		return "", false
	}
	return s, true
}

// Reasons a listed repository is not included, as Found.Reason says them.
const (
	ReasonArchived  = "archived (set archived: true to include archived repositories)"
	ReasonFork      = "fork (set forks: true to include forks)"
	ReasonNoSkill   = "no SKILL.md under path"
	ReasonTruncated = "tree truncated by the Trees API: included, its syncs decide"
)

// cheapReason says why a repository is left out before its tree is looked
// at (archived, fork, globs, topic), or "" when its tree decides.
func (t *Template) cheapReason(r *Repo) string {
	switch {
	case r.Archived && !t.Archived:
		return ReasonArchived
	case r.Fork && !t.Forks:
		return ReasonFork
	}
	name := r.Name()
	if len(t.Include) > 0 && !slices.ContainsFunc(t.Include, func(g string) bool { return globMatch(g, name) }) {
		return fmt.Sprintf("not matched by include %q", t.Include)
	}
	for _, g := range t.Exclude {
		if globMatch(g, name) {
			return fmt.Sprintf("excluded by glob %q", g)
		}
	}
	if t.Topic != "" && !slices.ContainsFunc(r.Topics, func(x string) bool { return strings.EqualFold(x, t.Topic) }) {
		return fmt.Sprintf("topic %q missing", t.Topic)
	}
	return ""
}

// globMatch matches a repository name against a path.Match glob, case
// insensitively (GitHub's names are).
func globMatch(glob, name string) bool {
	ok, err := path.Match(strings.ToLower(glob), strings.ToLower(name))
	return err == nil && ok
}

// hasSkill reports whether a tree listing holds a SKILL.md under dir (""
// the whole repository).
func hasSkill(paths []string, dir string) bool {
	dir = strings.Trim(dir, "/")
	for _, p := range paths {
		if p != "SKILL.md" && !strings.HasSuffix(p, "/SKILL.md") {
			continue
		}
		if dir == "" || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}
