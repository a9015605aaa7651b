package pull

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// uriScheme is the scheme of every skill URI.
const uriScheme = "skill://"

// maxURILen bounds a URI taken from a server.
const maxURILen = 4096

// errBadURI is wrapped by every URI the client refuses.
var errBadURI = errors.New("not a canonical skill URI")

// parseURI splits a skill URI into its decoded path segments (the first is
// the authority) and accepts it only in the one canonical form the
// extension allows: no empty, "." or ".." segments (encoded or not), no
// query or fragment, no backslash, NUL or control character, no encoded
// separator, and percent-encoding exactly where RFC 3986 requires it. Only
// a URI that passes can name a file, so nothing a server sends can point
// a write outside the skill.
func parseURI(s string) ([]string, error) {
	bad := func(why string) ([]string, error) { return nil, fmt.Errorf("%w: %s", errBadURI, why) }
	if len(s) > maxURILen {
		return bad(fmt.Sprintf("longer than %d bytes", maxURILen))
	}
	rest, ok := strings.CutPrefix(s, uriScheme)
	if !ok {
		return bad("scheme must be skill://")
	}
	if strings.ContainsAny(rest, "?#") {
		return bad("query and fragment are not allowed")
	}
	raw := strings.Split(rest, "/")
	if !validAuthority(raw[0]) {
		return bad("the first segment must be a lowercase host name (letters, digits, '-' and '.')")
	}
	segs := []string{raw[0]}
	for _, seg := range raw[1:] {
		dec, err := unescapeSegment(seg)
		if err != nil {
			return bad(err.Error())
		}
		switch {
		case dec == "":
			return bad("empty segment (an absolute path or a doubled slash)")
		case dec == "." || dec == "..":
			return bad("dot segments are not allowed")
		case !utf8.ValidString(dec):
			return bad("a segment is not valid UTF-8")
		case strings.ContainsFunc(dec, func(r rune) bool { return r == '/' || r == '\\' || r < 0x20 || r == 0x7f }):
			return bad("separators, backslashes and control characters are not allowed in a segment")
		case escapeSegment(dec) != seg:
			return bad(fmt.Sprintf("segment %q is not in canonical form (want %q)", seg, escapeSegment(dec)))
		}
		segs = append(segs, dec)
	}
	return segs, nil
}

func validAuthority(s string) bool {
	if s == "" || len(s) > 253 || s[0] == '.' || s[0] == '-' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// isPchar reports whether c may stand unencoded in a path segment:
// unreserved characters, sub-delims, ':' and '@'.
func isPchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}

const upperHex = "0123456789ABCDEF"

func escapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isPchar(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

func unescapeSegment(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
			return "", errors.New("malformed percent-encoding")
		}
		b.WriteByte(byte(unhex(s[i+1])<<4 | unhex(s[i+2])))
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
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
