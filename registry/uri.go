package registry

import (
	"errors"
	"fmt"
	"strings"
)

// Scheme is the URI scheme of skill files.
const Scheme = "skill://"

// MaxURILen bounds a URI accepted from a client.
const MaxURILen = 1024

// ErrBadURI is wrapped by every URI parse error.
var ErrBadURI = errors.New("invalid skill URI")

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
	return Scheme + u.Source + "/" + EscapePath(u.Path)
}

// FileURI returns the URI of a file or directory at rel inside a source.
func FileURI(source, rel string) string { return URI{Source: source, Path: rel}.String() }

// ParseURI parses a skill URI and accepts it only in canonical form: no
// empty, "." or ".." segments (encoded or not), no query or fragment, no
// backslash or NUL, percent-encoding exactly where RFC 3986 requires it and
// nowhere else. Anything else is an error wrapping ErrBadURI; nothing that
// parses can name a path outside its source.
func ParseURI(s string) (URI, error) {
	bad := func(why string) (URI, error) {
		return URI{}, fmt.Errorf("%w: %s", ErrBadURI, why)
	}
	if len(s) > MaxURILen {
		return bad(fmt.Sprintf("longer than %d bytes", MaxURILen))
	}
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return bad("scheme must be skill://")
	}
	if strings.ContainsAny(rest, "?#") {
		return bad("query and fragment are not allowed")
	}
	if strings.ContainsAny(rest, "\\\x00") {
		return bad("backslashes and NUL are not allowed")
	}
	segs := strings.Split(rest, "/")
	if !validSourceName(segs[0]) {
		return bad("the first segment must be a source name (lowercase letters, digits, '-' and '.')")
	}
	var b strings.Builder
	for i, seg := range segs[1:] {
		dec, err := unescapeSegment(seg)
		if err != nil {
			return bad(err.Error())
		}
		switch {
		case dec == "":
			return bad("empty segment")
		case dec == "." || dec == "..":
			return bad("dot segments are not allowed")
		case strings.ContainsAny(dec, "/\\\x00"):
			return bad("encoded separators or NUL are not allowed")
		case escapeSegment(dec) != seg:
			return bad(fmt.Sprintf("segment %q is not in canonical form (want %q)", seg, escapeSegment(dec)))
		}
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(dec)
	}
	return URI{Source: segs[0], Path: b.String()}, nil
}

// validSourceName reports whether s can stand in the authority position:
// a lowercase RFC 3986 reg-name of letters, digits, '-' and '.'.
func validSourceName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' || s[0] == '-' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// ValidSourceName reports whether name can name a source.
func ValidSourceName(name string) bool { return validSourceName(name) }

// EscapePath percent-encodes each segment of a slash path where RFC 3986
// requires it.
func EscapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = escapeSegment(s)
	}
	return strings.Join(segs, "/")
}

// pchar characters other than unreserved need no encoding in a path
// segment: sub-delims, ':' and '@'.
func isPchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}

func escapeSegment(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isPchar(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
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
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", errors.New("malformed percent-encoding")
		}
		b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
		i += 2
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
