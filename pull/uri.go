package pull

import (
	"fmt"
	"strings"

	"github.com/skillreg/skillreg/skilluri"
)

// uriScheme is the scheme of every skill URI.
const uriScheme = skilluri.Scheme

// maxURILen bounds a URI taken from a server.
const maxURILen = 4096

// errBadURI is wrapped by every URI the client refuses.
var errBadURI = skilluri.ErrInvalid

// parseURI splits a skill URI into its decoded path segments (the first is
// the authority) and accepts it only in the one canonical form the
// extension allows (see skilluri.Parse): only a URI that passes can name a
// file, so nothing a server sends can point a write outside the skill.
func parseURI(s string) ([]string, error) {
	u, err := skilluri.Parse(s, maxURILen)
	if err != nil {
		return nil, err
	}
	return append([]string{u.Authority}, u.Segments...), nil
}

// skillLocation is where a skill lives, from its SKILL.md URI.
type skillLocation struct {
	dirURI string   // skill://.../<name>, no trailing slash
	segs   []string // decoded segments of the skill directory
	name   string   // the last segment: must equal the frontmatter name
}

// locateSkill checks an entry URI: a canonical skill URI ending in
// /SKILL.md with at least one segment before it.
func locateSkill(uri string) (skillLocation, error) {
	segs, err := parseURI(uri)
	if err != nil {
		return skillLocation{}, err
	}
	if len(segs) < 2 || segs[len(segs)-1] != "SKILL.md" {
		return skillLocation{}, fmt.Errorf("%w: a skill's URI must end in /SKILL.md", errBadURI)
	}
	dir := segs[:len(segs)-1]
	return skillLocation{
		dirURI: strings.TrimSuffix(uri, "/SKILL.md"),
		segs:   dir,
		name:   dir[len(dir)-1],
	}, nil
}

// relPath returns the slash-separated path of a file of the skill, relative
// to the skill directory, or an error when the URI is not canonical or
// points outside the skill.
func (l skillLocation) relPath(uri string) (string, error) {
	segs, err := parseURI(uri)
	if err != nil {
		return "", err
	}
	if len(segs) <= len(l.segs) || !equalSegments(segs[:len(l.segs)], l.segs) {
		return "", fmt.Errorf("%w: outside the skill directory %s", errBadURI, l.dirURI)
	}
	return strings.Join(segs[len(l.segs):], "/"), nil
}

func equalSegments(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
