package gitstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/redact"
)

// Auth carries the credentials for one remote call. The token is sent as
// HTTP basic auth "x-access-token:<token>", which hosted git services
// accept for app, OAuth and personal tokens. It is never logged, never put
// in an error and never written to disk.
type Auth struct {
	Token string
}

// String keeps the token out of any accidental %v or %+v.
func (a Auth) String() string {
	if a.Token == "" {
		return "Auth{}"
	}
	return "Auth{Token:<redacted>}"
}

// GoString keeps the token out of %#v.
func (a Auth) GoString() string { return a.String() }

// method returns the go-git auth method, nil when there is no token (or
// the transport is local and ignores credentials).
func (a Auth) method(scheme string) transport.AuthMethod {
	if a.Token == "" || scheme == "file" {
		return nil
	}
	return &githttp.BasicAuth{Username: TokenUser, Password: a.Token}
}

// TokenUser is the user name sent with a token in HTTP basic auth.
const TokenUser = "x-access-token"

// Resolved is a pin resolved against a listing: the commit to fetch and
// the full ref it came from ("refs/heads/main", "refs/tags/v1.2.0"; empty
// for a commit pin).
type Resolved struct {
	Commit string
	Ref    string
	// Tag is the annotated tag object the ref names when it is one (a
	// tag, semver or release pin), "" for a lightweight tag and every
	// other pin. Fetch brings it with the commit, so its signature can
	// be checked and its bytes served in a proof.
	Tag string
}

// RemoteRefs is one listing of a remote's refs, taken by ListRemote.
type RemoteRefs struct {
	head     string            // the ref HEAD points at, "" when not advertised
	headID   string            // the commit HEAD resolves to, "" when none
	refs     map[string]string // full ref name -> object id (a tag object for annotated tags)
	peeled   map[string]string // annotated tag ref -> the object it finally points at
	tagNames []string          // short tag names, sorted
}

func newRemoteRefs(ar *packp.AdvRefs) *RemoteRefs {
	rr := &RemoteRefs{refs: map[string]string{}, peeled: map[string]string{}}
	for name, h := range ar.References {
		rr.refs[name] = h.String()
		if tag, ok := strings.CutPrefix(name, "refs/tags/"); ok {
			rr.tagNames = append(rr.tagNames, tag)
		}
	}
	for name, h := range ar.Peeled {
		rr.peeled[name] = h.String()
	}
	if ar.Head != nil {
		rr.headID = ar.Head.String()
	}
	for _, v := range ar.Capabilities.Get(capability.SymRef) {
		if src, dst, ok := strings.Cut(v, ":"); ok && src == "HEAD" {
			rr.head = dst
		}
	}
	slices.Sort(rr.tagNames)
	return rr
}

// NewRemoteRefs returns a listing of refs (full ref name -> commit id) whose
// HEAD points at head ("" for none): what ListRemote returns, for in-memory
// stand-ins of a remote.
func NewRemoteRefs(head string, refs map[string]string) *RemoteRefs {
	rr := &RemoteRefs{head: head, refs: map[string]string{}, peeled: map[string]string{}}
	for name, id := range refs {
		rr.refs[name] = id
		if tag, ok := strings.CutPrefix(name, "refs/tags/"); ok {
			rr.tagNames = append(rr.tagNames, tag)
		}
	}
	rr.headID = rr.refs[head]
	slices.Sort(rr.tagNames)
	return rr
}

// DefaultBranch returns the short name of the branch the remote's HEAD
// points at, or "" when the remote does not say.
func (r *RemoteRefs) DefaultBranch() string {
	b, _ := strings.CutPrefix(r.head, "refs/heads/")
	return b
}

// Tags returns the short names of all tags, sorted.
func (r *RemoteRefs) Tags() []string { return slices.Clone(r.tagNames) }

// Ref returns the commit a full ref name resolves to (annotated tags
// peeled), and whether the ref exists.
func (r *RemoteRefs) Ref(name string) (string, bool) {
	if p, ok := r.peeled[name]; ok {
		return p, true
	}
	id, ok := r.refs[name]
	return id, ok
}

// Resolve finds the commit a pin selects. A commit pin resolves to itself
// without consulting the listing, because servers only advertise ref tips;
// whether the commit exists is known when it is fetched. A release pin is
// resolved by its caller (through a releases API, or LatestSemverTag) to a
// tag pin first.
func (r *RemoteRefs) Resolve(p gitref.Pin) (Resolved, error) {
	if err := p.Validate(); err != nil {
		return Resolved{}, err
	}
	switch p.Kind {
	case gitref.Commit:
		return Resolved{Commit: p.Value}, nil
	case gitref.Default:
		if r.head != "" {
			if id, ok := r.Ref(r.head); ok {
				return Resolved{Commit: id, Ref: r.head}, nil
			}
		}
		if r.headID != "" {
			return Resolved{Commit: r.headID, Ref: "HEAD"}, nil
		}
		return Resolved{}, fmt.Errorf("%w: the remote advertises no HEAD", ErrRefNotFound)
	case gitref.Branch:
		return r.resolveRef("refs/heads/"+p.Value, p)
	case gitref.Tag:
		return r.resolveRef("refs/tags/"+p.Value, p)
	case gitref.Semver:
		tag, err := r.highestTag(p.Value)
		if err != nil {
			return Resolved{}, err
		}
		return r.resolveRef("refs/tags/"+tag, p)
	}
	return Resolved{}, fmt.Errorf("%w: %s cannot be resolved from a ref listing alone", ErrInvalidPin, p)
}

func (r *RemoteRefs) resolveRef(name string, p gitref.Pin) (Resolved, error) {
	id, ok := r.Ref(name)
	if !ok {
		return Resolved{}, fmt.Errorf("%w: %s", ErrRefNotFound, p)
	}
	res := Resolved{Commit: id, Ref: name}
	if tag := r.refs[name]; tag != id && strings.HasPrefix(name, "refs/tags/") {
		res.Tag = tag // the ref names a tag object, peeled to id
	}
	return res, nil
}

// LatestSemverTag returns the tag with the highest semantic version that
// is not a prerelease (tags with or without a leading "v"): the stand-in
// for "the latest release" while no releases API is configured.
func (r *RemoteRefs) LatestSemverTag() (string, error) {
	return r.highestTag("")
}

// highestTag returns the tag with the highest version satisfying the
// constraint (any release version when constraint is empty). Prereleases
// only match constraints that name one, as Masterminds/semver decides.
// Equal versions spelt differently ("v1.2.0", "1.2.0") are broken by name
// so that the answer is stable.
func (r *RemoteRefs) highestTag(constraint string) (string, error) {
	var c *semver.Constraints
	if constraint != "" {
		var err error
		if c, err = semver.NewConstraint(constraint); err != nil {
			return "", fmt.Errorf("%w: semver range %q: %v", ErrInvalidPin, constraint, err)
		}
	}
	var best *semver.Version
	bestTag := ""
	for _, tag := range r.tagNames { // sorted, so the first of equals wins
		v, err := semver.NewVersion(tag)
		if err != nil {
			continue
		}
		if c != nil && !c.Check(v) {
			continue
		}
		if c == nil && v.Prerelease() != "" {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, bestTag = v, tag
		}
	}
	if best == nil {
		if constraint == "" {
			return "", fmt.Errorf("%w: no release tag (semantic version without prerelease)", ErrRefNotFound)
		}
		return "", fmt.Errorf("%w: no tag satisfies semver range %q", ErrRefNotFound, constraint)
	}
	return bestTag, nil
}

// ListRemote takes one listing of the remote's refs (a single GET of
// info/refs over HTTP): cheap enough to poll, and all a sync needs to
// decide whether anything changed.
func (r *Repo) ListRemote(ctx context.Context, auth Auth) (*RemoteRefs, error) {
	if err := r.usable(); err != nil {
		return nil, fmt.Errorf("list refs %s: %w", r.url, err)
	}
	sess, err := r.session(auth)
	if err != nil {
		return nil, r.remoteError(ctx, "list refs", err, auth)
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return nil, r.remoteError(ctx, "list refs", err, auth)
	}
	r.caps.Store(&capsSnapshot{caps: ar.Capabilities, at: time.Now()})
	return newRemoteRefs(ar), nil
}

// capsSnapshot is the capability list of the last ref listing, which lets
// the Fetch that usually follows a listing skip listing again: one HTTP
// round trip fewer per sync, the same number git fetch makes.
type capsSnapshot struct {
	caps *capability.List
	at   time.Time
}

// capsFresh bounds how old a listing's capabilities may be for a Fetch to
// rely on them; servers do not change them between two calls of a sync.
const capsFresh = time.Minute

// remoteError maps a transport failure to this package's sentinels, with
// the operation and the credential-free URL as context. The cause's text
// may come from the remote (an HTTP reason phrase, a git "ERR" line, a
// sideband error message): it is cut to maxRemoteText printable characters
// and scrubbed of the token in every spelling a server could echo.
func (r *Repo) remoteError(ctx context.Context, op string, err error, auth Auth) error {
	var out error
	switch {
	case ctx.Err() != nil:
		// The transport's own message for a cancelled request varies;
		// the context's error is the one callers test for.
		out = fmt.Errorf("%s %s: %w", op, r.url, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		out = fmt.Errorf("%s %s: %w", op, r.url, err)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		out = fmt.Errorf("%s %s: %w: %w", op, r.url, ErrRepoNotFound, err)
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		out = fmt.Errorf("%s %s: %w: %w", op, r.url, ErrAuth, err)
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		out = fmt.Errorf("%s %s: %w: %w", op, r.url, ErrRefNotFound, err)
	case strings.Contains(err.Error(), "not our ref"):
		// git upload-pack's answer to a want it will not serve: a
		// commit pin that is not reachable (or not fetchable by id).
		out = fmt.Errorf("%s %s: %w: the remote does not serve this commit: %w", op, r.url, ErrRefNotFound, err)
	default:
		if resp := unexpectedStatus(err); resp != nil {
			// go-git's text for it repeats the URL (with the request's
			// path): the status is what it adds.
			out = fmt.Errorf("%s %s: %w: HTTP %s", op, r.url, ErrNetwork, redact.Status(resp))
			break
		}
		out = fmt.Errorf("%s %s: %w: %w", op, r.url, ErrNetwork, err)
	}
	return sanitize(out, len(op)+1+len(r.url), auth)
}

// unexpectedStatus returns the answer behind go-git's error for an HTTP
// status it has no error of its own for (a 5xx, say), or nil. go-git
// wraps it in a plumbing.UnexpectedError, which does not unwrap.
func unexpectedStatus(err error) *http.Response {
	var ue *plumbing.UnexpectedError
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var he *githttp.Err
	if errors.As(err, &he) && he.Response != nil {
		return he.Response
	}
	return nil
}

// maxRemoteText bounds the remote's part of an error message.
const maxRemoteText = 300

// sanitizedError is an error whose message was cleaned. It unwraps only to
// the sentinels (and context errors) the original matched, never to the
// original, whose message still holds what was cleaned away.
type sanitizedError struct {
	msg  string
	errs []error
}

func (e *sanitizedError) Error() string   { return e.msg }
func (e *sanitizedError) Unwrap() []error { return e.errs }

// sentinels are the errors a sanitised error still matches: every one
// this package defines, and the context's.
var sentinels = []error{ErrInvalidPin, ErrInvalidURL, ErrRefNotFound, ErrRepoNotFound, ErrAuth, ErrNetwork,
	ErrPathNotFound, ErrObjectNotFound, ErrCorrupt, ErrBadTree, ErrTooLarge, ErrStorage, ErrClosed,
	context.Canceled, context.DeadlineExceeded}

// sanitize cleans an error made of our own prefix (the first keep bytes:
// operation and URL) and a cause that may hold remote text; see remoteError.
func sanitize(err error, keep int, auth Auth) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	keep = min(keep, len(msg))
	clean := msg[:keep] + redact.Remote(msg[keep:], maxRemoteText)
	if auth.Token != "" {
		s := redact.New()
		s.AddBasic(TokenUser, auth.Token)
		clean = s.String(clean)
	}
	if clean == msg {
		return err
	}
	r := &sanitizedError{msg: clean}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			r.errs = append(r.errs, s)
		}
	}
	// A local cause (a full disk while the pack is stored) stays testable.
	var errno syscall.Errno
	if errors.As(err, &errno) {
		r.errs = append(r.errs, errno)
	}
	return r
}

// maxErrorBody bounds what is read (and thrown away) of an error answer's
// body, so that its connection can be reused without reading a hostile
// stream forever.
const maxErrorBody = 64 << 10

// withoutErrorBodies returns a copy of hc whose transport replaces the body
// of every answer that is not a success with a short description of the
// status, written by us. go-git's HTTP transport (plumbing/transport/http
// NewErr, v5.19.3) reads such a body whole, without a bound, and puts it
// into its error ("authentication required: <body>"): a remote answering
// 401 with the request's Authorization header in its body would put the
// token, base64-encoded, into every error message, and from there into
// /readyz and the logs. The status and a sanitised reason phrase are all an
// operator needs.
func withoutErrorBodies(hc *http.Client) *http.Client {
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = statusOnly{base: base}
	return &c
}

type statusOnly struct{ base http.RoundTripper }

func (t statusOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode < 300 {
		return resp, err
	}
	_, _ = io.CopyN(io.Discard, resp.Body, maxErrorBody)
	resp.Body.Close()
	desc := "HTTP " + redact.Status(resp)
	resp.Body = io.NopCloser(strings.NewReader(desc))
	resp.ContentLength = int64(len(desc))
	resp.Header.Del("Content-Encoding")
	resp.Header.Set("Content-Type", "text/plain; charset=utf-8")
	return resp, nil
}
