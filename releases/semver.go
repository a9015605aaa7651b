package releases

import (
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
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
	if !IsVersion(a) || !IsVersion(b) {
		return 0, false
	}
	va, err1 := semver.StrictNewVersion(a)
	vb, err2 := semver.StrictNewVersion(b)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return va.Compare(vb), true
}
