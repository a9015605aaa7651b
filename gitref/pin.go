package gitref

import (
	"errors"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// ErrInvalidPin means a pin's kind or value is malformed.
var ErrInvalidPin = errors.New("invalid pin")

// Kind says how a Pin chooses a commit.
type Kind uint8

// The pin kinds. Default follows the remote's HEAD (its default branch).
const (
	Default Kind = iota // the remote's default branch; no value
	Branch              // a branch head
	Tag                 // one tag
	Commit              // one commit, 40 lowercase hex digits
	Semver              // the highest tag in a semantic-version range
	Release             // the latest GitHub release; the value is "latest"
)

var kindNames = [...]string{Default: "default", Branch: "branch", Tag: "tag", Commit: "commit", Semver: "semver", Release: "release"}

// String returns the kind as configuration spells it ("branch", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Pin says which commit of a remote a source follows. Make one with
// ParsePin; the zero Pin follows the default branch.
type Pin struct {
	Kind  Kind
	Value string // branch or tag name, commit id, range, or "latest"
}

// ParsePin builds a Pin from a configuration key ("branch", "tag",
// "commit", "semver", "release", or "" / "default" for the default branch)
// and its value. It normalises what git treats as the same pin (a
// "refs/heads/" or "refs/tags/" prefix, an upper-case commit id) and
// returns ErrInvalidPin for anything git would refuse or misread.
func ParsePin(kind, value string) (Pin, error) {
	var p Pin
	switch kind {
	case "", "default":
		p = Pin{Kind: Default, Value: value}
	case "branch":
		v, _ := strings.CutPrefix(value, "refs/heads/")
		p = Pin{Kind: Branch, Value: v}
	case "tag":
		v, _ := strings.CutPrefix(value, "refs/tags/")
		p = Pin{Kind: Tag, Value: v}
	case "commit":
		p = Pin{Kind: Commit, Value: strings.ToLower(value)}
	case "semver":
		p = Pin{Kind: Semver, Value: value}
	case "release":
		p = Pin{Kind: Release, Value: value}
	default:
		return Pin{}, fmt.Errorf("%w: unknown kind %q (want branch, tag, commit, semver or release)", ErrInvalidPin, kind)
	}
	if err := p.Validate(); err != nil {
		return Pin{}, err
	}
	return p, nil
}

// Validate reports whether the pin is well formed: a legal branch or tag
// name (git check-ref-format's rules), a 40-hex commit id, a parseable
// semver range, "latest" for a release, or no value for the default branch.
func (p Pin) Validate() error {
	switch p.Kind {
	case Default:
		if p.Value != "" {
			return fmt.Errorf("%w: the default-branch pin takes no value (got %q)", ErrInvalidPin, p.Value)
		}
	case Branch, Tag:
		if !ValidRefName(p.Value) {
			return fmt.Errorf("%w: %s %q is not a valid git ref name", ErrInvalidPin, p.Kind, p.Value)
		}
	case Commit:
		if !IsCommitID(p.Value) {
			return fmt.Errorf("%w: commit %q is not 40 lowercase hex digits", ErrInvalidPin, p.Value)
		}
	case Semver:
		if _, err := semver.NewConstraint(p.Value); err != nil {
			return fmt.Errorf("%w: semver range %q: %v", ErrInvalidPin, p.Value, err)
		}
	case Release:
		if p.Value != "latest" {
			return fmt.Errorf("%w: release: only \"latest\" is supported, not %q", ErrInvalidPin, p.Value)
		}
	default:
		return fmt.Errorf("%w: unknown kind %d", ErrInvalidPin, int(p.Kind))
	}
	return nil
}

// String renders the pin as provenance records it: "branch:main",
// "tag:v1.2.0", "semver:^1", "release:latest", or "default-branch".
func (p Pin) String() string {
	if p.Kind == Default {
		return "default-branch"
	}
	return p.Kind.String() + ":" + p.Value
}

// Constraint returns the parsed range of a Semver pin.
func (p Pin) Constraint() (*semver.Constraints, error) {
	if p.Kind != Semver {
		return nil, fmt.Errorf("%w: %s is not a semver range", ErrInvalidPin, p)
	}
	c, err := semver.NewConstraint(p.Value)
	if err != nil {
		return nil, fmt.Errorf("%w: semver range %q: %v", ErrInvalidPin, p.Value, err)
	}
	return c, nil
}

// MovedBy reports whether a change of the full ref name ref (for example
// "refs/heads/main" or "refs/tags/v1.2.0") can move what p resolves to.
// defaultBranch is the remote's default branch, "" when unknown: then a
// default-branch pin is moved by any branch.
func (p Pin) MovedBy(ref, defaultBranch string) bool {
	if branch, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		switch p.Kind {
		case Branch:
			return p.Value == branch
		case Default:
			return defaultBranch == "" || defaultBranch == branch
		}
		return false
	}
	if tag, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		switch p.Kind {
		case Tag:
			return p.Value == tag
		case Semver, Release:
			return true
		}
	}
	return false
}

// IsCommitID reports whether s is a full lowercase SHA-1 object id.
func IsCommitID(s string) bool {
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

// ValidRefName applies git check-ref-format's rules to a short branch or
// tag name, so a pin can never smuggle a refspec, a revision expression or
// a path into a ref.
func ValidRefName(name string) bool {
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
