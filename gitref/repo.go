package gitref

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
)

// ErrInvalidRepo means a remote URL is not an accepted https, http or file
// URL, or carries credentials, a query or a fragment.
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
// form. Only https, http and file URLs are accepted. A URL with
// credentials is refused, and the message shows it without them: a token
// belongs in a source's auth, where it never reaches a key, a path, a log
// line or an error.
func ParseRepo(raw string) (Repo, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// url.Parse's message quotes the input, which may hold a secret.
		return Repo{}, fmt.Errorf("%w: %s is not a URL", ErrInvalidRepo, Redact(raw))
	}
	// The scheme first: an ssh URL's user is no credential, and the
	// scheme is what is wrong with it.
	switch u.Scheme = strings.ToLower(u.Scheme); u.Scheme {
	case "https", "http", "file":
	case "":
		return Repo{}, fmt.Errorf("%w: %s: no scheme (want https://, http:// or file://)", ErrInvalidRepo, Redact(raw))
	default:
		return Repo{}, fmt.Errorf("%w: scheme %q (want https, http or file)", ErrInvalidRepo, u.Scheme)
	}
	if u.User != nil {
		u.User = nil
		return Repo{}, fmt.Errorf("%w: %s: credentials in the URL are not accepted; configure a token instead", ErrInvalidRepo, u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.ForceQuery {
		// Not shown: a query string is a classic place for a token.
		u.RawQuery, u.Fragment, u.ForceQuery, u.Opaque = "", "", false, ""
		return Repo{}, fmt.Errorf("%w: %s: query strings and fragments are not accepted", ErrInvalidRepo, u.Redacted())
	}
	switch u.Scheme {
	case "https", "http":
		host := strings.ToLower(u.Hostname())
		if host == "" {
			return Repo{}, fmt.Errorf("%w: %s: no host", ErrInvalidRepo, u.Redacted())
		}
		port := u.Port()
		if u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" {
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
	u.Path, u.RawPath = p, ""
	return Repo{url: u.String()}, nil
}

// URL returns the canonical URL.
func (r Repo) URL() string { return r.url }

// String returns the canonical URL.
func (r Repo) String() string { return r.url }

// IsZero reports whether r names no repository.
func (r Repo) IsZero() bool { return r.url == "" }

// Scheme returns "https", "http" or "file".
func (r Repo) Scheme() string {
	s, _, _ := strings.Cut(r.url, ":")
	return s
}

// Host returns the lower-case host name, without a port ("" for file URLs).
func (r Repo) Host() string {
	u, err := url.Parse(r.url)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Key returns the repository's key: "host/path" in lower case, without
// scheme, port or a trailing ".git". It is what Match compares.
func (r Repo) Key() string { return Key(r.url) }

// OwnerName returns the two path segments of a GitHub-style repository
// URL (https://host/owner/name[.git]); ok is false for any other shape.
func (r Repo) OwnerName() (owner, name string, ok bool) {
	u, err := url.Parse(r.url)
	if err != nil {
		return "", "", false
	}
	p := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
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
