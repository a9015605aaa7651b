package catalog

import (
	"github.com/skillreg/skillreg/skilluri"
)

// Scheme is the URI scheme of skill files.
const Scheme = skilluri.Scheme

// MaxURILen bounds a URI accepted from a client.
const MaxURILen = 1024

// ErrBadURI is wrapped by every URI parse error.
var ErrBadURI = skilluri.ErrInvalid

// URI is a parsed, normalised skill URI: skill://<source>/<path>, where path
// is a file or directory relative to the source root.
type URI struct {
	Source string
	Path   string // slash-separated, never empty segments, "" for the source root
}

// String renders the URI in its one canonical form.
func (u URI) String() string {
	if u.Path == "" {
		return Scheme + u.Source
	}
	return Scheme + u.Source + "/" + skilluri.EscapePath(u.Path)
}

// FileURI returns the URI of a file or directory at rel inside a source.
func FileURI(source, rel string) string { return URI{Source: source, Path: rel}.String() }

// ParseURI parses a skill URI from a client and accepts it only in the
// canonical form skilluri.Parse defines; nothing that parses can name a path
// outside its source.
func ParseURI(s string) (URI, error) {
	u, err := skilluri.Parse(s, MaxURILen)
	if err != nil {
		return URI{}, err
	}
	return URI{Source: u.Authority, Path: u.Path()}, nil
}

// ValidSourceName reports whether name can name a source: a lowercase
// reg-name of at most 64 characters.
func ValidSourceName(name string) bool {
	return len(name) <= 64 && skilluri.ValidAuthority(name)
}

// EscapePath percent-encodes each segment of a slash path where RFC 3986
// requires it.
func EscapePath(p string) string { return skilluri.EscapePath(p) }
