package registry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// PinKind is what a git source is pinned to.
type PinKind string

// Pin kinds, as written in the configuration.
const (
	PinDefault PinKind = ""        // the remote's default branch
	PinBranch  PinKind = "branch"  // a branch head
	PinTag     PinKind = "tag"     // one tag
	PinCommit  PinKind = "commit"  // one commit
	PinSemver  PinKind = "semver"  // the highest tag in a semver range
	PinRelease PinKind = "release" // the latest GitHub release ("latest")
)

// Pin is a git source's ref as configured.
type Pin struct {
	Kind  PinKind
	Value string
}

// String renders the pin as configured, e.g. "branch:main".
func (p Pin) String() string {
	if p.Kind == PinDefault {
		return "default-branch"
	}
	return string(p.Kind) + ":" + p.Value
}

// GitSource is the git part of a source.
type GitSource struct {
	URL  string // https or file URL, without credentials
	Pin  Pin
	Path string // subdirectory holding the skills ("" = root)
	// Token returns the credential to present, or "" for none. It is read
	// at each sync so rotated tokens take effect; it is never logged.
	Token func() (string, error)
	// TokenID identifies where the token comes from (for detecting config
	// changes), never the token itself.
	TokenID string
}

// Equal reports whether two git sources are configured the same way.
func (g GitSource) Equal(o GitSource) bool {
	return g.URL == o.URL && g.Pin == o.Pin && g.Path == o.Path && g.TokenID == o.TokenID
}

// ReleaseResolver gives the tag of a repository's latest GitHub release.
type ReleaseResolver interface {
	// LatestTag returns the tag name of the newest non-draft,
	// non-prerelease release of the repository at url.
	LatestTag(ctx context.Context, url string) (string, error)
}

// ErrNoRelease is returned by resolvers for repositories without releases.
var ErrNoRelease = errors.New("no published release")

// RedactURL returns u without user information, for logs, errors and
// provenance.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		// Do not echo something unparsable that may hold a secret.
		if i := strings.LastIndex(u, "@"); i >= 0 {
			return u[i+1:]
		}
		return u
	}
	p.User = nil
	return p.String()
}

func (r *Registry) syncGit(ctx context.Context, src *Source, prev *Snapshot) (*Snapshot, error) {
	return nil, fmt.Errorf("source %s: git sources are not wired yet", src.Name)
}

// GitBackend is the git machinery git sources use.
type GitBackend interface{}
