// Package skilluri is the grammar of skill URIs (skill://<authority>/<path>)
// shared by the server, which names files with them, and the pull client,
// which must never let one point a write outside a skill: one canonical
// form, refused in every other spelling.
package skilluri

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Scheme is the URI scheme of skill files.
const Scheme = "skill://"

// ErrInvalid is wrapped by every parse error.
var ErrInvalid = errors.New("invalid skill URI")

// URI is a parsed skill URI.
type URI struct {
	Authority string   // the first segment: a lowercase reg-name
	Segments  []string // the decoded path segments after it (none for the authority alone)
}

// Path is the decoded path after the authority, slash-separated.
func (u URI) Path() string { return strings.Join(u.Segments, "/") }

// String renders the URI in its one canonical form.
func (u URI) String() string {
	if len(u.Segments) == 0 {
		return Scheme + u.Authority
	}
	return Scheme + u.Authority + "/" + EscapePath(u.Path())
}

// Parse parses a skill URI of at most maxLen bytes and accepts it only in
// canonical form: a lowercase reg-name authority; no empty, "." or ".."
// segments (encoded or not); no query or fragment; no backslash, NUL or
// other control character; no encoded separator; valid UTF-8;
// percent-encoding exactly where RFC 3986 requires it and nowhere else.
// Nothing that parses can name a path outside its authority's tree.
func Parse(s string, maxLen int) (URI, error) {
	bad := func(why string) (URI, error) { return URI{}, fmt.Errorf("%w: %s", ErrInvalid, why) }
	if len(s) > maxLen {
		return bad(fmt.Sprintf("longer than %d bytes", maxLen))
	}
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return bad("scheme must be skill://")
	}
	if strings.ContainsAny(rest, "?#") {
		return bad("query and fragment are not allowed")
	}
	raw := strings.Split(rest, "/")
	if !ValidAuthority(raw[0]) {
		return bad("the first segment must be a lowercase name (letters, digits, '-' and '.')")
	}
	u := URI{Authority: raw[0]}
	for _, seg := range raw[1:] {
		dec, err := unescape(seg)
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
		case escape(dec) != seg:
			return bad(fmt.Sprintf("segment %q is not in canonical form (want %q)", seg, escape(dec)))
		}
		u.Segments = append(u.Segments, dec)
	}
	return u, nil
}

// ValidAuthority reports whether s can stand in the authority position: a
// lowercase RFC 3986 reg-name of letters, digits, '-' and '.'.
func ValidAuthority(s string) bool {
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

// EscapePath percent-encodes each segment of a slash path where RFC 3986
// requires it.
func EscapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = escape(s)
	}
	return strings.Join(segs, "/")
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

func escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !isPchar(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
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

func unescape(s string) (string, error) {
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
