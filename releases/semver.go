package releases

import (
	"regexp"
	"strings"
)

// semverPattern is semver.org's regular expression for a version (2.0.0),
// with [0-9] for \d. The schema's skill_version_latest uses the same one, so
// a version this package accepts is one the schema accepts.
const semverPattern = `^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`

var semverRE = regexp.MustCompile(semverPattern)

// maxVersionLen bounds what we run the expression on; tags come from the
// network.
const maxVersionLen = 256

// VersionFromTag returns tag without one leading "v" when what remains is a
// semantic version (semver.org 2.0.0), and "" otherwise: "v1.3.0" and
// "1.3.0" give "1.3.0"; "release-7", "v1.3" and "V1.3.0" give "".
func VersionFromTag(tag string) string {
	v := strings.TrimPrefix(tag, "v")
	if !IsVersion(v) {
		return ""
	}
	return v
}

// IsVersion reports whether v is a semantic version without a leading "v".
func IsVersion(v string) bool {
	return len(v) <= maxVersionLen && semverRE.MatchString(v)
}

// compareVersions orders two semantic versions by semver precedence (build
// metadata ignored). ok is false when either is not a version.
func compareVersions(a, b string) (cmp int, ok bool) {
	ma, mb := semverRE.FindStringSubmatch(a), semverRE.FindStringSubmatch(b)
	if ma == nil || mb == nil || len(a) > maxVersionLen || len(b) > maxVersionLen {
		return 0, false
	}
	for i := 1; i <= 3; i++ {
		if c := compareNumeric(ma[i], mb[i]); c != 0 {
			return c, true
		}
	}
	pa, pb := ma[4], mb[4]
	switch {
	case pa == pb:
		return 0, true
	case pa == "":
		return 1, true // a release outranks its prereleases
	case pb == "":
		return -1, true
	}
	fa, fb := strings.Split(pa, "."), strings.Split(pb, ".")
	for i := 0; i < len(fa) && i < len(fb); i++ {
		na, nb := isNumeric(fa[i]), isNumeric(fb[i])
		var c int
		switch {
		case na && nb:
			c = compareNumeric(fa[i], fb[i])
		case na:
			c = -1
		case nb:
			c = 1
		default:
			c = strings.Compare(fa[i], fb[i])
		}
		if c != 0 {
			return c, true
		}
	}
	switch {
	case len(fa) < len(fb):
		return -1, true
	case len(fa) > len(fb):
		return 1, true
	}
	return 0, true
}

// compareNumeric compares decimal strings without leading zeros of any
// length, so huge numbers in hostile tags cannot overflow.
func compareNumeric(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func isNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
