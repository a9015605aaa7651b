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

	// SSH is how an ssh repository (Repo.IsSSH) is reached; the zero
	// value for others.
	SSH SSHAuth
}

// SSHAuth is the SSH part of a git source: plain values (file paths, read
// at each sync, so a rotated key or an edited known_hosts file takes
// effect) and the passphrase, read like Token.
type SSHAuth struct {
	KeyFile string // the private key (auth.ssh_key_file)
	// Passphrase returns the key's passphrase; nil when it has none. It is
	// never logged; its error says where it was to come from.
	Passphrase func() (string, error)
	// PassphraseID identifies where the passphrase comes from ("env:NAME"),
	// never the passphrase itself.
	PassphraseID   string
	KnownHostsFile string // the trusted host keys (auth.known_hosts_file)
	// InsecureIgnoreHostKey accepts any host key: a warning at every sync.
	InsecureIgnoreHostKey bool
}

// Equal reports whether two SSH configurations are the same.
func (a SSHAuth) Equal(o SSHAuth) bool {
	return a.KeyFile == o.KeyFile && a.PassphraseID == o.PassphraseID && a.KnownHostsFile == o.KnownHostsFile &&
		a.InsecureIgnoreHostKey == o.InsecureIgnoreHostKey && (a.Passphrase == nil) == (o.Passphrase == nil)
}

// Equal reports whether two git sources are configured the same way.
func (g GitSource) Equal(o GitSource) bool {
	return g.Repo == o.Repo && g.Pin == o.Pin && g.Path == o.Path && g.TokenID == o.TokenID && g.SSH.Equal(o.SSH)
}
