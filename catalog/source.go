package catalog

import (
	"io/fs"
	"time"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/sigverify"
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
	// Refused, when set, is told a token the remote refused (ErrAuth at
	// the ref listing or the fetch), so the next Token call returns a
	// fresh one: the registry then retries the operation once, in the
	// same sync. Set only for minted credentials (a GitHub App's
	// installation token); nil leaves a refused token stalled.
	Refused func(token string)
	// Verify, when set, requires the commit (or the tag) served to carry
	// a valid signature by one of its keys; nil serves what the pin
	// resolves to.
	Verify *Verify

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
	return g.Repo == o.Repo && g.Pin == o.Pin && g.Path == o.Path && g.TokenID == o.TokenID && g.Verify.Equal(o.Verify) && g.SSH.Equal(o.SSH)
}

// VerifyMode says which object's signature a verified source checks.
type VerifyMode string

// The verify modes.
const (
	VerifyHead       VerifyMode = "head"         // the pinned commit
	VerifyTag        VerifyMode = "tag"          // the annotated tag that resolved a tag, semver or release pin
	VerifyTagAndHead VerifyMode = "tag-and-head" // both
)

// Commit reports whether the mode checks the commit's signature.
func (m VerifyMode) Commit() bool { return m == VerifyHead || m == VerifyTagAndHead }

// Tag reports whether the mode checks the tag's signature.
func (m VerifyMode) Tag() bool { return m == VerifyTag || m == VerifyTagAndHead }

// Verify is how a git source's commits or tags must be signed.
type Verify struct {
	Mode VerifyMode
	// Keys are the trusted keys, loaded when the runtime was built (at
	// start and at each reload, so a reload picks up rotated key files).
	Keys *sigverify.Keys
	// KeysID is Keys.ID(): a digest of the trusted keys, which tells a
	// reload that rotated them from one that did not.
	KeysID string
}

// Equal reports whether two verify settings trust the same keys the
// same way (nil is "not verified").
func (v *Verify) Equal(o *Verify) bool {
	if v == nil || o == nil {
		return v == o
	}
	return v.Mode == o.Mode && v.KeysID == o.KeysID
}
