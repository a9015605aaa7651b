package gitstore

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// PinKind says how a Pin chooses a commit.
type PinKind int

// The pin kinds. PinDefault follows the remote's HEAD (its default branch).
const (
	PinDefault PinKind = iota
	PinBranch
	PinTag
	PinCommit
	PinSemver
)

// String returns the kind as configuration spells it.
func (k PinKind) String() string {
	switch k {
	case PinDefault:
		return "default"
	case PinBranch:
		return "branch"
	case PinTag:
		return "tag"
	case PinCommit:
		return "commit"
	case PinSemver:
		return "semver"
	}
	return fmt.Sprintf("PinKind(%d)", int(k))
}

// Pin says which commit of a remote a source follows: the default branch,
// a branch, a tag, a fixed commit (40 hex digits), or the highest tag
// satisfying a semver range such as ">=1.2.0 <2.0.0".
type Pin struct {
	Kind  PinKind
	Value string
}

// ParsePin builds a Pin from a configuration key ("branch", "tag",
// "commit", "semver", or "" for the default branch) and its value,
// validating and normalising it (commit ids are lowercased).
func ParsePin(kind, value string) (Pin, error) {
	var p Pin
	switch kind {
	case "", "default":
		p = Pin{Kind: PinDefault, Value: value}
	case "branch":
		p = Pin{Kind: PinBranch, Value: value}
	case "tag":
		p = Pin{Kind: PinTag, Value: value}
	case "commit":
		p = Pin{Kind: PinCommit, Value: strings.ToLower(value)}
	case "semver":
		p = Pin{Kind: PinSemver, Value: value}
	default:
		return Pin{}, fmt.Errorf("%w: unknown kind %q (want branch, tag, commit or semver)", ErrInvalidPin, kind)
	}
	return p, p.Validate()
}

// Validate reports whether the pin is well formed: a legal branch or tag
// name, a 40-hex commit id, a parseable semver range, or an empty value
// for the default branch.
func (p Pin) Validate() error {
	switch p.Kind {
	case PinDefault:
		if p.Value != "" {
			return fmt.Errorf("%w: the default-branch pin takes no value (got %q)", ErrInvalidPin, p.Value)
		}
	case PinBranch, PinTag:
		if !validRefName(p.Value) {
			return fmt.Errorf("%w: %s %q is not a valid git ref name", ErrInvalidPin, p.Kind, p.Value)
		}
	case PinCommit:
		if !isHexID(p.Value) {
			return fmt.Errorf("%w: commit %q is not 40 lowercase hex digits", ErrInvalidPin, p.Value)
		}
	case PinSemver:
		if _, err := semver.NewConstraint(p.Value); err != nil {
			return fmt.Errorf("%w: semver range %q: %v", ErrInvalidPin, p.Value, err)
		}
	default:
		return fmt.Errorf("%w: unknown kind %d", ErrInvalidPin, int(p.Kind))
	}
	return nil
}

// String describes the pin for logs and errors, e.g. `tag "v1.2.0"`.
func (p Pin) String() string {
	if p.Kind == PinDefault {
		return "default branch"
	}
	return fmt.Sprintf("%s %q", p.Kind, p.Value)
}

// isHexID reports whether s is a full lowercase SHA-1 object id.
func isHexID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validRefName applies git check-ref-format's rules to a short branch or
// tag name, so a pin can never smuggle a refspec, a revision expression or
// a path into a ref.
func validRefName(name string) bool {
	if name == "" || name == "@" || strings.HasPrefix(name, "-") ||
		strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".") || strings.Contains(name, "..") ||
		strings.Contains(name, "//") || strings.Contains(name, "@{") {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return false
		}
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	return true
}
