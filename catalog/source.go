package catalog

import (
	"io/fs"
	"time"

	"github.com/skillreg/skillreg/gitref"
)

// Kind is the kind of a source.
type Kind string

// Source kinds.
const (
	KindDir      Kind = "dir"      // a local directory
	KindEmbedded Kind = "embedded" // an fs.FS compiled into the binary
	KindGit      Kind = "git"      // a git repository pinned to a ref
)

// Source is one configured place skills come from.
type Source struct {
	Name string
	Kind Kind
	// Group is the name of the github: template a discovered source
	// came from ("" for a configured one).
	Group string

	Dir string // KindDir
	FS  fs.FS  // KindEmbedded

	Git *GitSource // KindGit

	// Poll is how often to look for changes without being asked: a scan
	// for directories, a ref listing for git. 0 disables polling.
	Poll time.Duration
	// Timeout bounds one sync (default registry.DefaultSyncTimeout, 60s).
	Timeout time.Duration
}

// Describe returns the ref a source follows, for people: the git pin, or
// the kind of a local source.
func (s *Source) Describe() string {
	if s.Git != nil {
		return s.Git.Pin.String()
	}
	return string(s.Kind)
}

// GitSource is the git part of a source.
type GitSource struct {
	Repo gitref.Repo // the remote, canonical and without credentials
	Pin  gitref.Pin  // validated when the configuration was loaded
	Path string      // subdirectory holding the skills ("" = root)
	// Token returns the credential to present, or "" for none. It is read
	// at each sync so rotated tokens take effect; it is never logged. Its
	// error says where the token was to come from ("token file: ..."):
	// the registry adds only the source's name.
	Token func() (string, error)
	// TokenID identifies where the token comes from (for detecting config
	// changes), never the token itself.
	TokenID string
}

// Equal reports whether two git sources are configured the same way.
func (g GitSource) Equal(o GitSource) bool {
	return g.Repo == o.Repo && g.Pin == o.Pin && g.Path == o.Path && g.TokenID == o.TokenID
}
