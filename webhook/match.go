package webhook

import (
	"net/url"
	"slices"
	"strings"
)

// PinKind is how a git source chooses its commit, as configured.
type PinKind string

// The pin kinds of a git source's ref.
const (
	PinBranch  PinKind = "branch"  // PinValue is a branch name
	PinTag     PinKind = "tag"     // PinValue is a tag name
	PinCommit  PinKind = "commit"  // PinValue is a commit id; no push moves it
	PinSemver  PinKind = "semver"  // PinValue is a version range over tags
	PinRelease PinKind = "release" // PinValue is "latest"
	PinDefault PinKind = "default" // the remote's default branch; PinValue is empty
)

// Target is one git source as the webhook sees it.
type Target struct {
	Source   string  // the source's name
	URL      string  // clone URL as configured (credentials in it are ignored)
	Pin      PinKind // how the source is pinned
	PinValue string  // the branch, tag, commit or range; empty for PinDefault
}

// Sources lists the current git sources. It is asked on every delivery, so
// a configuration reload takes effect at once.
type Sources interface {
	Targets() []Target
}

const (
	headsPrefix = "refs/heads/"
	tagsPrefix  = "refs/tags/"
)

// repository is what a payload says about its repository, reduced to what
// matching needs.
type repository struct {
	fullName      string
	urls          []string // clone, ssh, git, html and svn URLs as sent
	defaultBranch string   // "" when the payload does not say
}

// keys returns the normalised forms under which the payload's repository
// can be recognised.
func (r repository) keys(host string) []string {
	var keys []string
	for _, u := range r.urls {
		if k := repoKey(u); k != "" {
			keys = append(keys, k)
		}
	}
	if name := strings.Trim(r.fullName, "/"); name != "" && host != "" {
		keys = append(keys, strings.ToLower(host+"/"+name))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// repoKey normalises a repository URL to "host/path" in lower case: scheme,
// credentials, port, a trailing ".git" and slashes are dropped, so
// https://github.com/Owner/Name.git, ssh://git@github.com:22/owner/name,
// git@github.com:owner/name.git and git://github.com/owner/name all give
// "github.com/owner/name". It returns "" when raw is not a repository URL.
func repoKey(raw string) string {
	raw = strings.TrimSpace(raw)
	var host, path string
	switch {
	case strings.Contains(raw, "://"):
		u, err := url.Parse(raw)
		if err != nil {
			return ""
		}
		host, path = u.Hostname(), u.Path
	case isSCPLike(raw):
		at := strings.LastIndex(raw[:strings.Index(raw, ":")], "@")
		colon := strings.Index(raw, ":")
		host, path = raw[at+1:colon], raw[colon+1:]
	default:
		host, path, _ = strings.Cut(raw, "/")
	}
	path = strings.Trim(strings.ToLower(path), "/")
	path = strings.Trim(strings.TrimSuffix(path, ".git"), "/")
	if path == "" {
		return ""
	}
	return strings.ToLower(host) + "/" + path
}

// isSCPLike reports whether raw has git's scp-like form [user@]host:path,
// with a colon before any slash.
func isSCPLike(raw string) bool {
	colon := strings.Index(raw, ":")
	if colon <= 0 {
		return false
	}
	slash := strings.Index(raw, "/")
	return slash < 0 || colon < slash
}

// hostOf reduces a configured GitHub host ("github.com", "GHE.example.com:8443",
// "https://ghe.example.com/") to the lower-case host name repoKey produces.
func hostOf(s string) string {
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

// trimRef drops a "refs/heads/" or "refs/tags/" prefix a pin may carry.
func trimRef(v string) string {
	v = strings.TrimSpace(v)
	if b, ok := strings.CutPrefix(v, headsPrefix); ok {
		return b
	}
	if t, ok := strings.CutPrefix(v, tagsPrefix); ok {
		return t
	}
	return v
}

// sameRepo returns the targets whose URL names the payload's repository.
func sameRepo(targets []Target, repo repository, host string) []Target {
	keys := repo.keys(host)
	if len(keys) == 0 {
		return nil
	}
	var out []Target
	for _, t := range targets {
		if _, ok := slices.BinarySearch(keys, repoKey(t.URL)); ok {
			out = append(out, t)
		}
	}
	return out
}

// refAffects reports whether a change of the full ref name moves target t.
// defaultBranch is the repository's default branch, "" when unknown (then a
// default-pinned source is synced for any branch: a sync that finds its
// commit unchanged costs one ref listing).
func refAffects(t Target, ref, defaultBranch string) bool {
	if branch, ok := strings.CutPrefix(ref, headsPrefix); ok {
		switch t.Pin {
		case PinBranch:
			return trimRef(t.PinValue) == branch
		case PinDefault:
			return defaultBranch == "" || defaultBranch == branch
		}
		return false
	}
	if tag, ok := strings.CutPrefix(ref, tagsPrefix); ok {
		switch t.Pin {
		case PinTag:
			return trimRef(t.PinValue) == tag
		case PinSemver, PinRelease:
			return true
		}
	}
	return false
}

// names returns the sorted, distinct source names of targets.
func names(targets []Target) []string {
	out := make([]string, 0, len(targets))
	for _, t := range targets {
		out = append(out, t.Source)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
