package gitref

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
)

// ErrInvalidRepo means a remote URL is not an accepted https, http, file or
// ssh URL (or scp-like address), or carries credentials, a query or a
// fragment.
var ErrInvalidRepo = errors.New("invalid repository URL")

// Repo is a remote repository's identity. Its URL is canonical (scheme and
// host lower-cased, default ports dropped, dot segments and trailing
// slashes removed) and never holds credentials, so it is safe in a log
// line, an error, a metric, a path hash or the store. Make one with
// ParseRepo; the zero Repo names nothing.
type Repo struct {
	url string
}

// ParseRepo validates raw as a source's remote and returns its canonical
// form. Accepted are https, http and file URLs, ssh URLs
// (ssh://[user@]host[:port]/path) and git's scp-like form
// ([user@]host:path, which carries no port). A URL with credentials is
// refused, and the message shows it without them: a token belongs in a
// source's auth, where it never reaches a key, a path, a log line or an
// error. An ssh user name is no credential and is kept (it is the account
// the SSH server authenticates the key for), except the default "git",
// which the canonical ssh:// URL leaves out.
//
// The scp-like form names a path relative to the account's home directory
// unless it starts with "/": an absolute one is made the ssh URL it is
// equal to, a relative one keeps its form (the canonical
// user@host:path), since the ssh URL of the same text names another
// directory.
func ParseRepo(raw string) (Repo, error) {
	raw = strings.TrimSpace(raw)
	if !hasScheme(raw) && isSCPLike(raw) {
		return parseSCP(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's message quotes the input, which may hold a secret.
		return Repo{}, fmt.Errorf("%w: %s is not a URL", ErrInvalidRepo, Redact(raw))
	}
	// The scheme first: an ssh URL's user is no credential, and the
	// scheme is what is wrong with it.
	switch u.Scheme = strings.ToLower(u.Scheme); u.Scheme {
	case "https", "http", "file", "ssh":
	case "":
		return Repo{}, fmt.Errorf("%w: %s: no scheme (want https://, http://, file:// or ssh://)", ErrInvalidRepo, Redact(raw))
	default:
		return Repo{}, fmt.Errorf("%w: scheme %q (want https, http, file or ssh)", ErrInvalidRepo, u.Scheme)
	}
	if u.Scheme == "ssh" && u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword {
			u.User = nil
			return Repo{}, fmt.Errorf("%w: %s: a password in an ssh URL is not accepted; configure auth.ssh_key_file instead", ErrInvalidRepo, u.Redacted())
		}
		if name := u.User.Username(); !validSSHUser(name) {
			u.User = nil
			return Repo{}, fmt.Errorf("%w: %s: the ssh user name must be letters, digits, '.', '_' and '-' (not first)", ErrInvalidRepo, u.Redacted())
		} else if name == DefaultSSHUser {
			// The default goes: a URL's user information is what log
			// scrubbers hide, and "git" is no secret worth hiding.
			u.User = nil
		}
	} else if u.User != nil {
		u.User = nil
		return Repo{}, fmt.Errorf("%w: %s: credentials in the URL are not accepted; configure a token instead", ErrInvalidRepo, u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.ForceQuery {
		// Not shown: a query string is a classic place for a token.
		u.RawQuery, u.Fragment, u.ForceQuery, u.Opaque = "", "", false, ""
		return Repo{}, fmt.Errorf("%w: %s: query strings and fragments are not accepted", ErrInvalidRepo, u.Redacted())
	}
	switch u.Scheme {
	case "https", "http", "ssh":
		host := strings.ToLower(u.Hostname())
		if host == "" {
			return Repo{}, fmt.Errorf("%w: %s: no host", ErrInvalidRepo, u.Redacted())
		}
		if u.Scheme == "ssh" && !validSSHHost(host) {
			return Repo{}, fmt.Errorf("%w: %s: %q is not a host name", ErrInvalidRepo, u.Redacted(), host)
		}
		port := u.Port()
		if u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" || u.Scheme == "ssh" && port == "22" {
			port = ""
		}
		u.Host = host
		if port != "" {
			u.Host = net.JoinHostPort(host, port)
		} else if strings.Contains(host, ":") {
			u.Host = "[" + host + "]"
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return Repo{}, fmt.Errorf("%w: %s: file URLs must be local (file:///path)", ErrInvalidRepo, u.Redacted())
		}
		u.Host = ""
	}
	p := path.Clean("/" + u.Path)
	if p == "/" {
		return Repo{}, fmt.Errorf("%w: %s: no repository path", ErrInvalidRepo, u.Redacted())
	}
	if u.Scheme == "ssh" && strings.HasPrefix(p, "/-") {
		return Repo{}, fmt.Errorf("%w: %s: a path starting with '-' is not accepted", ErrInvalidRepo, u.Redacted())
	}
	u.Path, u.RawPath = p, ""
	if Key(u.String()) == "" {
		// A path of spaces and slashes ("file:///  "): nothing to match.
		return Repo{}, fmt.Errorf("%w: %s: no repository path", ErrInvalidRepo, u.Redacted())
	}
	return Repo{url: u.String()}, nil
}

// parseSCP parses git's scp-like address [user@]host:path (raw trimmed,
// isSCPLike). Messages never echo raw: "user:secret@host/path" is
// scp-like too (host "user"), and is refused for the "@" in its path.
func parseSCP(raw string) (Repo, error) {
	colon := strings.Index(raw, ":")
	userHost, p := raw[:colon], raw[colon+1:]
	user, host := "", userHost
	if at := strings.LastIndex(userHost, "@"); at >= 0 {
		user, host = userHost[:at], userHost[at+1:]
		if !validSSHUser(user) {
			return Repo{}, fmt.Errorf("%w: scp-like address: the ssh user name must be letters, digits, '.', '_' and '-' (not first)", ErrInvalidRepo)
		}
	}
	host = strings.ToLower(host)
	if !validSSHHost(host) {
		return Repo{}, fmt.Errorf("%w: scp-like address: %q is not a host name", ErrInvalidRepo, Redact(host))
	}
	at := host
	if user != "" {
		at = user + "@" + host
	}
	switch {
	case strings.Contains(p, "@"):
		return Repo{}, fmt.Errorf("%w: scp-like address on %s: a path with '@' is not accepted (credentials belong in auth, not in the URL)", ErrInvalidRepo, host)
	case scpPortRE(p):
		// go-git reads host:PORT:path as a port, git as a path: neither
		// is what the address says to both.
		return Repo{}, fmt.Errorf("%w: %s:%s: the scp-like form carries no port; write ssh://%s:PORT/path", ErrInvalidRepo, at, p, at)
	case strings.ContainsFunc(p, func(c rune) bool { return c <= ' ' || c == 0x7f || c == '?' || c == '#' || c == '\\' }):
		return Repo{}, fmt.Errorf("%w: scp-like address on %s: the path holds '?', '#', a backslash, a space or a control character (an ssh:// URL can spell them)", ErrInvalidRepo, host)
	}
	if strings.HasPrefix(p, "/") {
		// Absolute: the ssh URL of the same path is the same repository.
		u := url.URL{Scheme: "ssh", Host: host, Path: p}
		if user != "" {
			u.User = url.User(user)
		}
		return ParseRepo(u.String())
	}
	clean := path.Clean(p)
	switch {
	case clean == "." || clean == ".." || strings.HasPrefix(clean, "../"):
		return Repo{}, fmt.Errorf("%w: %s:%s: no repository path inside the home directory", ErrInvalidRepo, at, p)
	case strings.HasPrefix(clean, "-"):
		return Repo{}, fmt.Errorf("%w: %s:%s: a path starting with '-' is not accepted", ErrInvalidRepo, at, p)
	}
	out := at + ":" + clean
	if Key(out) == "" {
		return Repo{}, fmt.Errorf("%w: %s: no repository path", ErrInvalidRepo, out) // ".git"
	}
	return Repo{url: out}, nil
}

// scpPortRE reports whether an scp-like path starts with what go-git
// reads as a port: 1-5 digits and a colon.
func scpPortRE(p string) bool {
	d, _, ok := strings.Cut(p, ":")
	if !ok || d == "" || len(d) > 5 {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validSSHUser reports whether name is an account name an ssh URL may
// carry: conservative, since it reaches a remote login.
func validSSHUser(name string) bool {
	if name == "" || len(name) > 64 || name[0] == '-' {
		return false
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validSSHHost reports whether host (lower case, no port) is a DNS name,
// an IPv4 address or an IPv6 literal (as url.URL.Hostname gives it): a
// host starting with '-' reads as an option to an ssh command.
func validSSHHost(host string) bool {
	if host == "" || len(host) > 253 || host[0] == '-' {
		return false
	}
	if strings.Contains(host, ":") {
		return net.ParseIP(host) != nil
	}
	for _, c := range host {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// URL returns the canonical URL.
func (r Repo) URL() string { return r.url }

// String returns the canonical URL.
func (r Repo) String() string { return r.url }

// IsZero reports whether r names no repository.
func (r Repo) IsZero() bool { return r.url == "" }

// Scheme returns "https", "http", "file" or "ssh" (for the scp-like form
// too).
func (r Repo) Scheme() string {
	if r.url == "" {
		return ""
	}
	if !hasScheme(r.url) {
		return "ssh" // user@host:path
	}
	s, _, _ := strings.Cut(r.url, ":")
	return s
}

// IsSSH reports whether the repository is reached over SSH.
func (r Repo) IsSSH() bool { return r.Scheme() == "ssh" }

// Host returns the lower-case host name, without a port ("" for file URLs).
func (r Repo) Host() string {
	if r.url != "" && !hasScheme(r.url) {
		return r.scp().host
	}
	u, err := url.Parse(r.url)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// DefaultSSHUser is the account an ssh URL that names none is reached
// as: the one every hosted git service expects. The canonical ssh:// URL
// leaves it out (ssh://git@host/x is ssh://host/x).
const DefaultSSHUser = "git"

// SSHUser returns the account an ssh repository is reached as: the URL's
// user, else DefaultSSHUser ("" for other schemes).
func (r Repo) SSHUser() string {
	if !r.IsSSH() {
		return ""
	}
	user := ""
	if !hasScheme(r.url) {
		user = r.scp().user
	} else if u, err := url.Parse(r.url); err == nil && u.User != nil {
		user = u.User.Username()
	}
	if user == "" {
		return DefaultSSHUser
	}
	return user
}

type scpParts struct{ user, host, path string }

// scp splits a canonical scp-like URL.
func (r Repo) scp() scpParts {
	userHost, p, _ := strings.Cut(r.url, ":")
	var s scpParts
	s.path = p
	if u, h, ok := strings.Cut(userHost, "@"); ok {
		s.user, s.host = u, h
	} else {
		s.host = userHost
	}
	return s
}

// repoPath is the path of the repository on its host.
func (r Repo) repoPath() (string, bool) {
	if r.url != "" && !hasScheme(r.url) {
		return r.scp().path, true
	}
	u, err := url.Parse(r.url)
	if err != nil {
		return "", false
	}
	return u.Path, true
}

// Key returns the repository's key: "host/path" in lower case, without
// scheme, port or a trailing ".git". It is what Match compares.
func (r Repo) Key() string { return Key(r.url) }

// OwnerName returns the two path segments of a GitHub-style repository
// URL (https://host/owner/name[.git], ssh://git@host/owner/name.git,
// git@host:owner/name.git); ok is false for any other shape.
func (r Repo) OwnerName() (owner, name string, ok bool) {
	raw, ok := r.repoPath()
	if !ok {
		return "", "", false
	}
	p := strings.TrimSuffix(strings.Trim(raw, "/"), ".git")
	owner, name, ok = strings.Cut(p, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return owner, name, true
}

// Match reports whether raw, a repository URL in any form git or GitHub
// spells it (https, ssh://, scp-like git@host:path, git://, host/path),
// names r. It is the one test of whether a webhook's repository is a
// source's.
func (r Repo) Match(raw string) bool {
	k := Key(raw)
	return k != "" && k == r.Key()
}

// Key normalises a repository URL in any form git or GitHub spells it to
// "host/path" in lower case: scheme, credentials, port, a trailing ".git"
// and slashes are dropped, so https://github.com/Owner/Name.git,
// ssh://git@github.com:22/owner/name, git@github.com:owner/name.git and
// git://github.com/owner/name all give "github.com/owner/name". It
// returns "" when raw is not a repository URL.
func Key(raw string) string {
	raw = strings.TrimSpace(raw)
	var host, p string
	switch {
	case hasScheme(raw):
		u, err := url.Parse(raw)
		if err != nil {
			return ""
		}
		host, p = u.Hostname(), u.Path
		if strings.Contains(host, ":") {
			host = "[" + host + "]" // an IPv6 literal, bracketed so the key reads back as a host
		}
	case isSCPLike(raw):
		colon := strings.Index(raw, ":")
		at := strings.LastIndex(raw[:colon], "@")
		host, p = raw[at+1:colon], raw[colon+1:]
	default:
		host, p, _ = strings.Cut(raw, "/")
	}
	// Trimmed until nothing changes, so that a key is its own key.
	const cut = "/ \t\n\v\f\r"
	p = strings.Trim(strings.ToLower(p), cut)
	for strings.HasSuffix(p, ".git") {
		p = strings.Trim(strings.TrimSuffix(p, ".git"), cut)
	}
	host = strings.TrimSpace(strings.ToLower(host))
	if p == "" || strings.ContainsAny(host, "/ \t\n\v\f\r") {
		return ""
	}
	return host + "/" + p
}

// hasScheme reports whether raw starts with a URL scheme and "://".
func hasScheme(raw string) bool {
	i := strings.Index(raw, "://")
	if i <= 0 {
		return false
	}
	for j, c := range raw[:i] {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case j > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// HostOf reduces a configured host ("github.com", "GHE.example.com:8443",
// "https://ghe.example.com/") to the lower-case host name Key uses.
func HostOf(s string) string {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "://") {
		if u, err := url.Parse(s); err == nil {
			return strings.ToLower(u.Hostname())
		}
		return ""
	}
	s, _, _ = strings.Cut(s, "/")
	if u, err := url.Parse("//" + s); err == nil {
		return strings.ToLower(u.Hostname())
	}
	return strings.ToLower(s)
}

// Redact returns raw with anything that may be a credential removed (the
// user information of a URL, or everything up to the last "@" of text
// that does not parse), for messages about a URL that was refused.
func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if u.User == nil {
			return raw
		}
		u.User = nil
		return u.String()
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		return raw[i+1:]
	}
	return raw
}

// isSCPLike reports whether raw has git's scp-like form [user@]host:path,
// with a colon before any slash (and not a bracketed IPv6 host, which has
// colons of its own).
func isSCPLike(raw string) bool {
	if strings.HasPrefix(raw, "[") {
		return false
	}
	colon := strings.Index(raw, ":")
	if colon <= 0 {
		return false
	}
	slash := strings.Index(raw, "/")
	return slash < 0 || colon < slash
}
