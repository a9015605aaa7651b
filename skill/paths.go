package skill

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/skillreg/skillreg/skilluri"
)

// Path limits. A segment is a file or folder name: 255 bytes is the
// smallest limit among ext4, APFS and NTFS (which counts UTF-16 units,
// never more than UTF-8 bytes). A path, percent-encoded as in its skill://
// URI, leaves room for "skill://", the longest source name (64) and a
// slash within the 1,024 bytes the server reads of a URI.
const (
	MaxSegmentBytes = 255
	MaxPathURIBytes = 1024 - len(skilluri.Scheme) - 64 - 1
)

// CheckPath judges one slash-separated path of a skill (relative to the
// source root, or to the skill) by the rules that decide whether it can be
// served, read back through its URI and installed on Linux, macOS and
// Windows alike. It returns nil, or a Problem of rule RuleGitMetadata or
// RulePath. Index applies it to every entry of a skill; pull applies it to
// every file a server lists, whatever that server checked.
//
// RuleGitMetadata: a segment that git itself refuses to check out because
// some file system reads it as .git or .gitmodules (git's verify_path with
// core.protectHFS and core.protectNTFS, is_hfs_dotgit, is_ntfs_dotgit and
// is_ntfs_dotgitmodules): any case; the code points HFS+ ignores
// (U+200C-U+200F, U+202A-U+202E, U+206A-U+206F, U+FEFF) anywhere; trailing
// dots and spaces and ":stream" suffixes, which NTFS drops; the NTFS short
// names git~1, gitmod~1..4 and the hashed gi7eba~N forms; backslashes
// splitting a segment as Windows does. Beyond git, a segment whose Unicode
// upper case is one of those (NTFS compares names upper-cased, so ".gıt"
// is ".GIT" there).
//
// RulePath: an empty, "." or ".." segment; invalid UTF-8; a segment over
// MaxSegmentBytes; a control character (C0, DEL, C1); a backslash or any of
// <>:"|? and *; a segment ending in a dot or a space; a Windows device name
// (CON, PRN, AUX, NUL, CONIN$, CONOUT$, COM1-COM9, LPT0-LPT9, and the
// COM¹²³/LPT¹²³ forms Windows also reserves), with any extension; a path
// whose percent-encoded form exceeds MaxPathURIBytes.
func CheckPath(p string) *Problem {
	if p == "" {
		return problem(RulePath, "the path is empty")
	}
	for seg := range strings.SplitSeq(p, "/") {
		if why := gitMetadata(seg); why != "" {
			return problem(RuleGitMetadata, fmt.Sprintf("%s: %s; git refuses to check it out, and git run in an installed copy would obey it", quotePath(p), why))
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		if why := badSegment(seg); why != "" {
			return problem(RulePath, quotePath(p)+": "+why)
		}
	}
	if len(p)*3 > MaxPathURIBytes { // only then can escaping make it too long
		if n := len(skilluri.EscapePath(p)); n > MaxPathURIBytes {
			return problem(RulePath, fmt.Sprintf("%s is %d bytes percent-encoded, more than the %d a skill:// URI leaves for a path", quotePath(p), n, MaxPathURIBytes))
		}
	}
	return nil
}

// quotePath quotes a path for a message: escaped where it is not
// printable, and shortened when long.
func quotePath(p string) string {
	if len(p) > 160 {
		cut := 160
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		return fmt.Sprintf("%q...", p[:cut])
	}
	return fmt.Sprintf("%q", p)
}

// gitMetadata says why a segment names git metadata, or "".
func gitMetadata(seg string) string {
	// Windows splits names on backslashes too: "a\.git" is a/.git there.
	for part := range strings.SplitSeq(seg, `\`) {
		if why := gitMetadataName(part); why != "" {
			if part != seg {
				why += " (Windows reads the backslash as a folder separator)"
			}
			return why
		}
	}
	return ""
}

func gitMetadataName(s string) string {
	switch {
	case s == ".git":
		return `".git" is git's own folder`
	case s == ".gitmodules":
		return `".gitmodules" configures git submodules`
	case asciiEqualFold(s, ".git"):
		return fmt.Sprintf("%q is .git on case-insensitive file systems (macOS, Windows)", s)
	case asciiEqualFold(s, ".gitmodules"):
		return fmt.Sprintf("%q is .gitmodules on case-insensitive file systems (macOS, Windows)", s)
	case isHFSDot(s, "git"):
		return fmt.Sprintf("%q is .git on macOS, whose HFS+ ignores the invisible code points in it", s)
	case isHFSDot(s, "gitmodules"):
		return fmt.Sprintf("%q is .gitmodules on macOS, whose HFS+ ignores the invisible code points in it", s)
	case isNTFSDotGit(s), isNTFSDotGeneric(s, "gitmodules", "gi7eba"):
		return fmt.Sprintf("%q is %s on Windows, %s", s, ntfsTarget(s), ntfsWhy(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			// NTFS compares names by their upper case.
			if u := strings.Map(unicode.ToUpper, s); u != s && (isNTFSDotGit(u) || isNTFSDotGeneric(u, "gitmodules", "gi7eba")) {
				return fmt.Sprintf("%q is %s on Windows, which compares names by their upper case (%q)", s, ntfsTarget(u), u)
			}
			break
		}
	}
	return ""
}

func ntfsTarget(s string) string {
	if isNTFSDotGit(s) {
		return ".git"
	}
	return ".gitmodules"
}

func ntfsWhy(s string) string {
	switch {
	case strings.Contains(s, "~"):
		return "where it is the short (8.3) name of that file"
	case strings.Contains(s, ":"):
		return `where "name:stream" names a data stream of the file`
	}
	return "which drops trailing dots and spaces"
}

// hfsIgnorable reports the code points HFS+ leaves out when it compares
// names (git's next_hfs_char).
func hfsIgnorable(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
}

// nextHFSRune is git's next_hfs_char: the next code point of s from i
// that HFS+ does not ignore, and where the one after it starts; 0 at the
// end and for malformed UTF-8 (git's UTF-8 reader also refuses U+FFFE and
// U+FFFF), which cannot then spell .git.
func nextHFSRune(s string, i int) (rune, int) {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || r == 0xfffe || r == 0xffff {
			return 0, len(s)
		}
		i += n
		if !hfsIgnorable(r) {
			return r, i
		}
	}
	return 0, i
}

// isHFSDot is git's is_hfs_dot_generic: s is "." followed by needle, as
// HFS+ reads it (ASCII case folded, ignorable code points skipped).
func isHFSDot(s, needle string) bool {
	r, i := nextHFSRune(s, 0)
	if r != '.' {
		return false
	}
	for k := 0; k < len(needle); k++ {
		r, i = nextHFSRune(s, i)
		if r > 127 || asciiLower(byte(r)) != needle[k] {
			return false
		}
	}
	r, _ = nextHFSRune(s, i)
	return r == 0 || r == '/'
}

// byteAt is s[i], or 0 past its end, as a C string reads.
func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// isNTFSDotGit is git's is_ntfs_dotgit: ".git" or "git~1", in any ASCII
// case, followed only by dots and spaces up to the end, a separator or an
// alternate data stream's ':'.
func isNTFSDotGit(s string) bool {
	var i int
	switch c := byteAt(s, 0); {
	case c == '.':
		if asciiLower(byteAt(s, 1)) != 'g' || asciiLower(byteAt(s, 2)) != 'i' || asciiLower(byteAt(s, 3)) != 't' {
			return false
		}
		i = 4
	case c == 'g' || c == 'G':
		if asciiLower(byteAt(s, 1)) != 'i' || asciiLower(byteAt(s, 2)) != 't' || byteAt(s, 3) != '~' || byteAt(s, 4) != '1' {
			return false
		}
		i = 5
	default:
		return false
	}
	for ; ; i++ {
		switch byteAt(s, i) {
		case 0, '/', '\\', ':':
			return true
		case '.', ' ':
		default:
			return false
		}
	}
}

// isNTFSDotGeneric is git's is_ntfs_dot_generic: "." + name followed only
// by dots and spaces (to the end or a ':'), its short name (the first six
// characters of name, '~' and 1-4), or the fall-back short name (a prefix
// of the hashed short, '~', a digit 1-9 and digits, eight characters in
// all).
func isNTFSDotGeneric(s, name, short string) bool {
	onlySpacesAndPeriods := func(i int) bool {
		for ; ; i++ {
			switch byteAt(s, i) {
			case 0, ':':
				return true
			case ' ', '.':
			default:
				return false
			}
		}
	}
	if byteAt(s, 0) == '.' && len(s) >= 1+len(name) && asciiEqualFold(s[1:1+len(name)], name) {
		return onlySpacesAndPeriods(1 + len(name))
	}
	if len(s) >= 8 && asciiEqualFold(s[:6], name[:6]) && s[6] == '~' && s[7] >= '1' && s[7] <= '4' {
		return onlySpacesAndPeriods(8)
	}
	sawTilde := false
	i := 0
	for ; i < 8; i++ {
		c := byteAt(s, i)
		switch {
		case c == 0:
			return false
		case sawTilde:
			if c < '0' || c > '9' {
				return false
			}
		case c == '~':
			i++
			if c = byteAt(s, i); c < '1' || c > '9' {
				return false
			}
			sawTilde = true
		case i >= 6, c&0x80 != 0, asciiLower(c) != short[i]:
			return false
		}
	}
	return onlySpacesAndPeriods(i)
}

func asciiLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// asciiEqualFold compares ASCII case-insensitively, as strncasecmp does
// (strings.EqualFold would also equate "k" and the Kelvin sign).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if asciiLower(a[i]) != asciiLower(b[i]) {
			return false
		}
	}
	return true
}

// badSegment says why a segment cannot be a file name everywhere, or "".
func badSegment(seg string) string {
	switch {
	case seg == "":
		return "an empty segment (a doubled, leading or trailing slash)"
	case seg == "." || seg == "..":
		return fmt.Sprintf("a %q segment (in a git tree, a bad tree entry: git refuses to check it out)", seg)
	case !utf8.ValidString(seg):
		return fmt.Sprintf("segment %q is not valid UTF-8", seg)
	case len(seg) > MaxSegmentBytes:
		return fmt.Sprintf("a segment of %d bytes, more than the %d a file name may hold", len(seg), MaxSegmentBytes)
	}
	for _, r := range seg {
		switch {
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
			return fmt.Sprintf("segment %q holds the control character %U", seg, r)
		case r == '\\':
			return fmt.Sprintf("segment %q holds a backslash, a folder separator on Windows", seg)
		case strings.ContainsRune(`<>:"|?*`, r):
			return fmt.Sprintf("segment %q holds %q, which Windows does not allow in a file name", seg, r)
		}
	}
	switch seg[len(seg)-1] {
	case '.':
		return fmt.Sprintf("segment %q ends in a dot, which Windows drops", seg)
	case ' ':
		return fmt.Sprintf("segment %q ends in a space, which Windows drops", seg)
	}
	if dev := windowsDevice(seg); dev != "" {
		return fmt.Sprintf("segment %q is the Windows device %s (whatever the extension)", seg, dev)
	}
	return ""
}

// windowsDevice returns the reserved device name a segment opens on
// Windows, or "": the name in any ASCII case, then optional spaces, then
// the end, an extension or a stream (git's is_valid_win32_path, plus the
// superscript-digit ports Windows documents as reserved).
func windowsDevice(seg string) string {
	n := 0
	for _, d := range [...]string{"CONIN$", "CONOUT$", "CON", "PRN", "AUX", "NUL"} {
		if len(seg) >= len(d) && asciiEqualFold(seg[:len(d)], d) {
			n = len(d)
			break
		}
	}
	if n == 0 && len(seg) > 3 && (asciiEqualFold(seg[:3], "COM") || asciiEqualFold(seg[:3], "LPT")) {
		rest := seg[3:]
		switch {
		case rest[0] >= '1' && rest[0] <= '9', rest[0] == '0' && asciiLower(seg[0]) == 'l':
			n = 4
		case strings.HasPrefix(rest, "¹"), strings.HasPrefix(rest, "²"), strings.HasPrefix(rest, "³"):
			n = 3 + len("¹")
		}
	}
	if n == 0 {
		return ""
	}
	i := n
	for i < len(seg) && seg[i] == ' ' {
		i++
	}
	if c := byteAt(seg, i); c == 0 || c == '.' || c == ':' || c == '\\' {
		return strings.ToUpper(seg[:n])
	}
	return ""
}

// PathSet collects the paths of one skill and refuses two that one file
// system would take for the same entry: equal after Unicode case folding,
// after normalisation (macOS stores names decomposed, and compares them
// so), or after leaving out the code points HFS+ ignores; or one path that
// is both a file and a folder. Every folder a path implies counts as a
// path. The zero value is empty and ready.
type PathSet struct {
	seen map[string]pathSeen
}

type pathSeen struct {
	path string
	dir  bool
}

// Add adds a path (a file, or a folder when dir is set) and its parent
// folders, and returns a RulePath problem when it collides with a path
// added before. Adding the same path twice is no collision.
func (s *PathSet) Add(p string, dir bool) *Problem {
	if s.seen == nil {
		s.seen = make(map[string]pathSeen)
	}
	if pr := s.add(p, dir); pr != nil {
		return pr
	}
	for d := p; ; {
		i := strings.LastIndexByte(d, '/')
		if i < 0 {
			return nil
		}
		d = d[:i]
		if prev, ok := s.seen[FoldPath(d)]; ok && prev.path == d && prev.dir {
			return nil // its parents were added with it
		}
		if pr := s.add(d, true); pr != nil {
			return pr
		}
	}
}

func (s *PathSet) add(p string, dir bool) *Problem {
	k := FoldPath(p)
	prev, ok := s.seen[k]
	switch {
	case !ok:
		s.seen[k] = pathSeen{p, dir}
		return nil
	case prev.path == p && prev.dir == dir:
		return nil
	case prev.path == p:
		return problem(RulePath, fmt.Sprintf("%s is both a file and a folder", quotePath(p)))
	}
	why := "on file systems that ignore case and Unicode normalisation (macOS, Windows)"
	switch {
	case strings.EqualFold(prev.path, p):
		why = "on case-insensitive file systems (macOS, Windows)"
	case norm.NFC.String(prev.path) == norm.NFC.String(p):
		why = "after Unicode normalisation (macOS)"
	}
	return problem(RulePath, fmt.Sprintf("%s and %s are the same entry %s", quotePath(prev.path), quotePath(p), why))
}

// FoldPath is the key under which PathSet compares paths: without the
// code points HFS+ ignores, canonically decomposed, case folded (full
// Unicode folding), then composed again. ASCII paths are only lowered.
func FoldPath(p string) string {
	ascii, upper := true, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		upper = upper || c >= 'A' && c <= 'Z'
	}
	if ascii {
		if !upper {
			return p
		}
		return strings.ToLower(p)
	}
	p = strings.Map(func(r rune) rune {
		if hfsIgnorable(r) {
			return -1
		}
		return r
	}, p)
	return norm.NFC.String(cases.Fold().String(norm.NFD.String(p)))
}

// StoredRules names the rules CheckStored applies, as this version
// applies them. A store records it with every snapshot it saves (every
// skill a daemon serves, and so saves, passed them: indexed by it, or
// restored and judged), so that a restart judges only the snapshots an
// older set of rules passed, and serves the others without a pass over
// every path (at 100,000 skills, most of a restart's time before its
// first page). Change it whenever CheckStored's verdicts change:
// TestStoredRulesNamed fails until it is.
const StoredRules = "paths-1"

// CheckStored applies to a skill indexed earlier (by this version or an
// older one, as a store restores it) the rules that need no reading: the
// path rules on each of its files and folders, and the frontmatter depth.
// A problem means the skill must not be served before it is indexed again.
func CheckStored(s *Skill) *Problem {
	if !frontmatterDepthOK(s.Frontmatter) {
		return problem(RuleFrontmatter, fmt.Sprintf("frontmatter nests deeper than the %d levels allowed", MaxFrontmatterDepth))
	}
	var set PathSet
	check := func(rel string, dir bool) *Problem {
		p := joinPath(s.Path, rel)
		if pr := CheckPath(p); pr != nil {
			return pr
		}
		return set.Add(p, dir)
	}
	for _, f := range s.Files {
		if pr := check(f.Path, false); pr != nil {
			return pr
		}
	}
	for _, d := range s.Dirs {
		if pr := check(d, true); pr != nil {
			return pr
		}
	}
	return nil
}
