// Package fakegithub is an in-process stand-in for the GitHub REST Releases
// API, for tests. It answers the way GitHub does where our code can tell the
// difference: JSON shaped like GitHub's, strong ETags and 304 answers to
// If-None-Match (free of rate limit for authenticated callers, as on GitHub),
// the primary rate limit with its X-RateLimit-* headers and 403 once spent,
// secondary rate limits with Retry-After, Link-header pagination, drafts that
// only authenticated callers see, and 404 for repositories it does not know.
// Tests inject faults (5xx, rate limits, answers that hang until released)
// and read per-path request counters to assert how much upstream traffic
// happened.
//
// Point go-github at it by setting the client's BaseURL to URL+"/" or, like
// GitHub Enterprise, URL+"/api/v3/".
package fakegithub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// DefaultAnonymousLimit is GitHub's primary rate limit per hour for
	// requests without credentials.
	DefaultAnonymousLimit = 60
	// DefaultAuthenticatedLimit is GitHub's primary rate limit per hour for
	// a token.
	DefaultAuthenticatedLimit = 5000
)

// enterprisePrefix is the path prefix GitHub Enterprise Server puts in front
// of the REST API; the fake accepts paths with and without it.
const enterprisePrefix = "/api/v3"

// ErrNotFound is returned by the mutating methods for an unknown repository
// or release.
var ErrNotFound = errors.New("fakegithub: not found")

// Options configures a Server. The zero value works.
type Options struct {
	// Now is the server's clock (rate-limit windows, release timestamps).
	// Nil means time.Now. Share a *Clock with the code under test.
	Now func() time.Time
	// Token, when set, is the one credential the server accepts: requests
	// carrying it are authenticated (higher limit, drafts visible, 304s
	// free); requests carrying any other Authorization get 401. Requests
	// without Authorization are anonymous.
	Token string
	// AnonymousLimit and AuthenticatedLimit are the primary rate limits per
	// hour. Zero means GitHub's defaults (60 and 5000).
	AnonymousLimit     int
	AuthenticatedLimit int
	// HTMLURL is the web host used in html_url fields. Empty means
	// "https://github.com".
	HTMLURL string
}

// Release is one release as the fake stores it.
type Release struct {
	ID              int64
	TagName         string
	Name            string
	Body            string
	TargetCommitish string
	Draft           bool
	Prerelease      bool
	CreatedAt       time.Time
	PublishedAt     time.Time // zero for drafts
}

// Stats counts the requests the server saw for one path (without the
// /api/v3 prefix).
type Stats struct {
	Requests    int         // every request, including those that failed or hung
	Conditional int         // requests carrying If-None-Match
	NotModified int         // 304 answers
	Status      map[int]int // answers by status code (hung requests that were abandoned are not answered)
}

type repository struct {
	fullName string
	id       int64
	releases []*Release
}

type bucket struct {
	limit     int
	remaining int
	reset     time.Time
}

type secondaryLimit struct {
	status int
	until  time.Time
}

// Server is a running fake GitHub API. Create it with New and Close it when
// done.
type Server struct {
	// URL is the server's base URL, without a trailing slash.
	URL string

	srv     *httptest.Server
	now     func() time.Time
	token   string
	htmlURL string

	mu        sync.Mutex
	repos     map[string]*repository // by lower-case full name
	nextID    int64
	stats     map[string]*Stats
	total     int
	anon      bucket
	authed    bucket
	failNext  int // requests still to fail; negative: until ClearFaults
	failCode  int
	secondary *secondaryLimit
	hold      chan struct{} // non-nil while held; closed on release
	apps      *appSide      // GitHub Apps, installations and their tokens (app.go)
	held      int
	heldCh    chan struct{} // closed and replaced whenever held changes
	gh        *repoState    // listings and trees (repos.go)
}

// New starts a fake GitHub API server on loopback.
func New(opts Options) *Server {
	s := &Server{
		now:     opts.Now,
		token:   opts.Token,
		htmlURL: strings.TrimSuffix(opts.HTMLURL, "/"),
		repos:   make(map[string]*repository),
		nextID:  1000,
		stats:   make(map[string]*Stats),
		heldCh:  make(chan struct{}),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.htmlURL == "" {
		s.htmlURL = "https://github.com"
	}
	s.anon.limit = opts.AnonymousLimit
	if s.anon.limit <= 0 {
		s.anon.limit = DefaultAnonymousLimit
	}
	s.authed.limit = opts.AuthenticatedLimit
	if s.authed.limit <= 0 {
		s.authed.limit = DefaultAuthenticatedLimit
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close releases any held requests and shuts the server down.
func (s *Server) Close() {
	s.mu.Lock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
	s.mu.Unlock()
	s.srv.Close()
}

// CreateRepo makes a repository (owner/name) known, with no releases yet.
// Creating an existing repository does nothing.
func (s *Server) CreateRepo(fullName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repoLocked(fullName)
}

func (s *Server) repoLocked(fullName string) *repository {
	key := strings.ToLower(fullName)
	r, ok := s.repos[key]
	if !ok {
		s.nextID++
		r = &repository{fullName: fullName, id: s.nextID}
		s.repos[key] = r
	}
	return r
}

// Publish adds a release to a repository (created if unknown) and returns it
// as stored: a zero ID is assigned, a zero CreatedAt becomes now, and a
// non-draft's zero PublishedAt becomes now.
func (s *Server) Publish(fullName string, rel Release) Release {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(fullName)
	now := s.now().UTC().Truncate(time.Second)
	if rel.ID == 0 {
		s.nextID++
		rel.ID = s.nextID
	}
	if rel.CreatedAt.IsZero() {
		rel.CreatedAt = now
	}
	if rel.Draft {
		rel.PublishedAt = time.Time{}
	} else if rel.PublishedAt.IsZero() {
		rel.PublishedAt = now
	}
	if rel.TargetCommitish == "" {
		rel.TargetCommitish = "main"
	}
	stored := rel
	r.releases = append(r.releases, &stored)
	return stored
}

// Edit changes a release in place. Publishing a draft (Draft set to false)
// stamps PublishedAt with now unless edit set it.
func (s *Server) Edit(fullName string, id int64, edit func(*Release)) (Release, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.repos[strings.ToLower(fullName)]
	if !ok {
		return Release{}, fmt.Errorf("edit release %d of %s: %w", id, fullName, ErrNotFound)
	}
	for _, rel := range r.releases {
		if rel.ID == id {
			wasDraft := rel.Draft
			edit(rel)
			rel.ID = id
			if rel.Draft {
				rel.PublishedAt = time.Time{}
			} else if wasDraft && rel.PublishedAt.IsZero() {
				rel.PublishedAt = s.now().UTC().Truncate(time.Second)
			}
			return *rel, nil
		}
	}
	return Release{}, fmt.Errorf("edit release %d of %s: %w", id, fullName, ErrNotFound)
}

// Delete removes a release.
func (s *Server) Delete(fullName string, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.repos[strings.ToLower(fullName)]
	if !ok {
		return fmt.Errorf("delete release %d of %s: %w", id, fullName, ErrNotFound)
	}
	for i, rel := range r.releases {
		if rel.ID == id {
			r.releases = append(r.releases[:i], r.releases[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("delete release %d of %s: %w", id, fullName, ErrNotFound)
}

// Releases returns a copy of a repository's releases, drafts included, in
// the order they were published.
func (s *Server) Releases(fullName string) []Release {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.repos[strings.ToLower(fullName)]
	if !ok {
		return nil
	}
	out := make([]Release, len(r.releases))
	for i, rel := range r.releases {
		out[i] = *rel
	}
	return out
}

// Stats returns the counters for one path, e.g.
// "/repos/chainbase-labs/agentkey/releases/latest" (with or without the
// /api/v3 prefix, which is not part of the key).
func (s *Server) Stats(path string) Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.stats[strings.TrimPrefix(path, enterprisePrefix)]
	if !ok {
		return Stats{Status: map[int]int{}}
	}
	out := *st
	out.Status = make(map[int]int, len(st.Status))
	for k, v := range st.Status {
		out.Status[k] = v
	}
	return out
}

// Requests returns how many requests the server saw for path.
func (s *Server) Requests(path string) int { return s.Stats(path).Requests }

// Total returns how many requests the server saw, all paths together.
func (s *Server) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// RateLimit reports the primary rate-limit state of the anonymous or the
// authenticated bucket.
func (s *Server) RateLimit(authenticated bool) (limit, remaining int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucketLocked(authenticated)
	return b.limit, b.remaining, b.reset
}

// ExhaustRateLimit spends both primary buckets until reset: every request
// gets GitHub's 403 with X-RateLimit-Remaining: 0 until the clock reaches
// reset, when the window renews.
func (s *Server) ExhaustRateLimit(reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range []*bucket{&s.anon, &s.authed} {
		b.remaining = 0
		b.reset = reset.Truncate(time.Second)
	}
}

// SecondaryRateLimit makes every request answer status (403 or 429, as
// GitHub does) with a Retry-After header until retryAfter has passed on the
// server's clock.
func (s *Server) SecondaryRateLimit(status int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secondary = &secondaryLimit{status: status, until: s.now().Add(retryAfter)}
}

// FailNext makes the next n requests answer status (for example 500 or 502)
// with a GitHub-style error body; n < 0 means every request until
// ClearFaults.
func (s *Server) FailNext(status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCode, s.failNext = status, n
}

// ClearFaults ends injected failures and secondary rate limits and releases
// held requests. The primary rate limit is left as it is.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.secondary = 0, nil
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// Hold makes every request that arrives from now on hang (after being
// counted) until the returned release function is called or the request's
// context ends, like a GitHub that does not answer in time. Calling release
// more than once is harmless.
func (s *Server) Hold() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
	ch := s.hold
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.hold == ch {
				close(ch)
				s.hold = nil
			}
		})
	}
}

// WaitHeld blocks until at least n requests are hanging in Hold, or ctx ends.
func (s *Server) WaitHeld(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		held, ch := s.held, s.heldCh
		s.mu.Unlock()
		if held >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for %d held requests (have %d): %w", n, held, ctx.Err())
		}
	}
}

func (s *Server) setHeldLocked(delta int) {
	s.held += delta
	close(s.heldCh)
	s.heldCh = make(chan struct{})
}

func (s *Server) bucketLocked(authenticated bool) *bucket {
	b := &s.anon
	if authenticated {
		b = &s.authed
	}
	now := s.now()
	if b.reset.IsZero() || !now.Before(b.reset) {
		b.remaining = b.limit
		b.reset = now.Add(time.Hour).Truncate(time.Second)
	}
	return b
}

// answer is one response being prepared.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, enterprisePrefix)
	prefix := ""
	if strings.HasPrefix(r.URL.Path, enterprisePrefix+"/") {
		prefix = enterprisePrefix
	}
	conditional := r.Header.Get("If-None-Match") != ""

	s.mu.Lock()
	s.total++
	st, ok := s.stats[path]
	if !ok {
		st = &Stats{Status: map[int]int{}}
		s.stats[path] = st
	}
	st.Requests++
	if conditional {
		st.Conditional++
	}
	hold := s.hold
	if hold != nil {
		s.setHeldLocked(1)
	}
	s.mu.Unlock()

	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.setHeldLocked(-1)
		s.mu.Unlock()
		if r.Context().Err() != nil {
			return // the caller gave up; GitHub's answer never reaches anyone
		}
	}

	s.mu.Lock()
	a := s.answerLocked(r, path, prefix)
	st.Status[a.status]++
	if a.status == http.StatusNotModified {
		st.NotModified++
	}
	s.mu.Unlock()

	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.status)
	if a.status != http.StatusNotModified && r.Method != http.MethodHead {
		_, _ = w.Write(a.body)
	}
}

// answerLocked decides the whole answer for one request, in GitHub's order:
// credentials, abuse limits, primary limit, then the resource.
func (s *Server) answerLocked(r *http.Request, path, prefix string) answer {
	now := s.now()
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	h.Set("X-GitHub-Request-Id", fmt.Sprintf("FAKE:%08X", s.total))
	h.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	h.Add("Vary", "Accept-Encoding, Accept, X-Requested-With")
	h.Set("Access-Control-Expose-Headers", "ETag, Link, Location, Retry-After, X-GitHub-OTP, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Used, X-RateLimit-Resource, X-RateLimit-Reset")

	// A GitHub App's JWT, and the App endpoints, are checked by app.go.
	app, deny := s.appAuthLocked(r, path, h, now)
	if deny != nil {
		return *deny
	}
	authenticated := app != 0
	if auth := r.Header.Get("Authorization"); auth != "" && app == 0 {
		tok := credentialToken(auth)
		if !s.installationTokenLocked(tok, now) && (s.token == "" || (auth != "Bearer "+s.token && auth != "token "+s.token)) {
			return errorAnswer(h, http.StatusUnauthorized, "Bad credentials", "https://docs.github.com/rest")
		}
		authenticated = true
	}

	if s.secondary != nil {
		if now.Before(s.secondary.until) {
			wait := s.secondary.until.Sub(now)
			secs := int64((wait + time.Second - 1) / time.Second)
			h.Set("Retry-After", strconv.FormatInt(secs, 10))
			s.rateHeadersLocked(h, authenticated)
			return errorAnswer(h, s.secondary.status,
				"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID "+h.Get("X-GitHub-Request-Id")+".",
				"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits")
		}
		s.secondary = nil
	}

	if s.failNext != 0 {
		if s.failNext > 0 {
			s.failNext--
		}
		return errorAnswer(h, s.failCode, http.StatusText(s.failCode), "")
	}

	b := s.bucketLocked(authenticated)
	if b.remaining <= 0 {
		s.rateHeadersLocked(h, authenticated)
		msg := "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)"
		if authenticated {
			msg = "API rate limit exceeded for user ID 1."
		}
		return errorAnswer(h, http.StatusForbidden, msg,
			"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-rate-limit-for-primary-rate-limits")
	}

	var a answer
	if app != 0 {
		a = s.appRouteLocked(r, path, app, h, now)
	} else {
		a = s.routeLocked(r, path, prefix, authenticated, h)
	}

	// GitHub: a 304 to an authorized conditional request costs nothing;
	// everything else, errors included, spends one request.
	if a.status == http.StatusOK {
		etag := `"` + hashHex(a.body) + `"`
		a.header.Set("ETag", etag)
		if etagMatches(r.Header.Get("If-None-Match"), etag) {
			a.status = http.StatusNotModified
			a.body = nil
			a.header.Del("Content-Type")
		}
	}
	if a.status != http.StatusNotModified || !authenticated {
		b.remaining--
	}
	s.rateHeadersLocked(a.header, authenticated)
	return a
}

func (s *Server) rateHeadersLocked(h http.Header, authenticated bool) {
	b := s.bucketLocked(authenticated)
	h.Set("X-RateLimit-Limit", strconv.Itoa(b.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(b.remaining, 0)))
	h.Set("X-RateLimit-Used", strconv.Itoa(b.limit-max(b.remaining, 0)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(b.reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

func (s *Server) routeLocked(r *http.Request, path, prefix string, authenticated bool, h http.Header) answer {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return errorAnswer(h, http.StatusNotFound, "Not Found", "https://docs.github.com/rest")
	}
	if a, ok := s.routeReposLocked(r, path, prefix, authenticated, h); ok {
		return a
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 4 || parts[0] != "repos" || parts[3] != "releases" {
		return errorAnswer(h, http.StatusNotFound, "Not Found", "https://docs.github.com/rest")
	}
	repo, ok := s.repos[strings.ToLower(parts[1]+"/"+parts[2])]
	if !ok {
		return errorAnswer(h, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/releases/releases")
	}
	if authenticated {
		h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	} else {
		h.Set("Cache-Control", "public, max-age=60, s-maxage=60")
	}
	apiBase := "http://" + r.Host + prefix
	switch {
	case len(parts) == 4:
		return s.listLocked(r, repo, apiBase, path, authenticated, h)
	case len(parts) == 5 && parts[4] == "latest":
		if rel := latest(repo.releases); rel != nil {
			return jsonAnswer(h, s.releaseJSON(repo, rel, apiBase))
		}
		return errorAnswer(h, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/releases/releases#get-the-latest-release")
	case len(parts) == 6 && parts[4] == "tags":
		for _, rel := range repo.releases {
			if rel.TagName == parts[5] && (!rel.Draft || authenticated) {
				return jsonAnswer(h, s.releaseJSON(repo, rel, apiBase))
			}
		}
		return errorAnswer(h, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/releases/releases#get-a-release-by-tag-name")
	case len(parts) == 5:
		id, err := strconv.ParseInt(parts[4], 10, 64)
		if err == nil {
			for _, rel := range repo.releases {
				if rel.ID == id && (!rel.Draft || authenticated) {
					return jsonAnswer(h, s.releaseJSON(repo, rel, apiBase))
				}
			}
		}
		return errorAnswer(h, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/releases/releases#get-a-release")
	}
	return errorAnswer(h, http.StatusNotFound, "Not Found", "https://docs.github.com/rest")
}

// latest picks what GitHub's /releases/latest answers: the newest
// published, non-prerelease release by created_at.
func latest(rels []*Release) *Release {
	var best *Release
	for _, rel := range rels {
		if rel.Draft || rel.Prerelease {
			continue
		}
		if best == nil || rel.CreatedAt.After(best.CreatedAt) ||
			(rel.CreatedAt.Equal(best.CreatedAt) && rel.ID > best.ID) {
			best = rel
		}
	}
	return best
}

func (s *Server) listLocked(r *http.Request, repo *repository, apiBase, path string, authenticated bool, h http.Header) answer {
	perPage, page := pageOf(r.URL.Query())
	var visible []*Release
	for _, rel := range repo.releases {
		if !rel.Draft || authenticated {
			visible = append(visible, rel)
		}
	}
	sort.SliceStable(visible, func(i, j int) bool {
		a, b := visible[i], visible[j]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.ID > b.ID
	})
	last := max((len(visible)+perPage-1)/perPage, 1)
	items := make([]releaseJSON, 0, perPage)
	for i := (page - 1) * perPage; i < len(visible) && i < page*perPage; i++ {
		items = append(items, s.releaseJSON(repo, visible[i], apiBase))
	}
	setLinks(h, apiBase, path, nil, perPage, page, last)
	return jsonAnswer(h, items)
}

// pageOf reads a listing's per_page (default 30, at most 100) and page
// (default 1) as GitHub does.
func pageOf(q url.Values) (perPage, page int) {
	perPage, page = 30, 1
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	return perPage, page
}

// setLinks sets GitHub's Link header for page of last pages of a listing
// at path: prev, next, last and first, each carrying keep's parameters
// besides per_page and page.
func setLinks(h http.Header, apiBase, path string, keep url.Values, perPage, page, last int) {
	link := func(n int, rel string) string {
		v := url.Values{}
		for k, vs := range keep {
			v[k] = vs
		}
		v.Set("per_page", strconv.Itoa(perPage))
		v.Set("page", strconv.Itoa(n))
		return fmt.Sprintf(`<%s%s?%s>; rel="%s"`, apiBase, path, v.Encode(), rel)
	}
	var links []string
	if page > 1 {
		links = append(links, link(min(page-1, last), "prev"))
	}
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"))
	}
	if len(links) > 0 {
		h.Set("Link", strings.Join(links, ", "))
	}
}

// releaseJSON is GitHub's release object, fields in GitHub's order.
type releaseJSON struct {
	URL             string  `json:"url"`
	AssetsURL       string  `json:"assets_url"`
	UploadURL       string  `json:"upload_url"`
	HTMLURL         string  `json:"html_url"`
	ID              int64   `json:"id"`
	Author          user    `json:"author"`
	NodeID          string  `json:"node_id"`
	TagName         string  `json:"tag_name"`
	TargetCommitish string  `json:"target_commitish"`
	Name            *string `json:"name"`
	Draft           bool    `json:"draft"`
	Prerelease      bool    `json:"prerelease"`
	CreatedAt       string  `json:"created_at"`
	PublishedAt     *string `json:"published_at"`
	Assets          []any   `json:"assets"`
	TarballURL      *string `json:"tarball_url"`
	ZipballURL      *string `json:"zipball_url"`
	Body            *string `json:"body"`
}

type user struct {
	Login     string `json:"login"`
	ID        int64  `json:"id"`
	NodeID    string `json:"node_id"`
	Type      string `json:"type"`
	SiteAdmin bool   `json:"site_admin"`
}

func (s *Server) releaseJSON(repo *repository, rel *Release, apiBase string) releaseJSON {
	repoAPI := apiBase + "/repos/" + repo.fullName
	tagPath := url.PathEscape(rel.TagName)
	out := releaseJSON{
		URL:             fmt.Sprintf("%s/releases/%d", repoAPI, rel.ID),
		AssetsURL:       fmt.Sprintf("%s/releases/%d/assets", repoAPI, rel.ID),
		UploadURL:       fmt.Sprintf("%s/releases/%d/assets{?name,label}", repoAPI, rel.ID),
		HTMLURL:         s.htmlURL + "/" + repo.fullName + "/releases/tag/" + tagPath,
		ID:              rel.ID,
		Author:          user{Login: "octocat", ID: 1, NodeID: "MDQ6VXNlcjE=", Type: "User"},
		NodeID:          fmt.Sprintf("RE_fake%d", rel.ID),
		TagName:         rel.TagName,
		TargetCommitish: rel.TargetCommitish,
		Draft:           rel.Draft,
		Prerelease:      rel.Prerelease,
		CreatedAt:       rel.CreatedAt.UTC().Format(time.RFC3339),
		Assets:          []any{},
	}
	if rel.Draft {
		out.HTMLURL = fmt.Sprintf("%s/%s/releases/tag/untagged-%d", s.htmlURL, repo.fullName, rel.ID)
	} else {
		tarball := repoAPI + "/tarball/" + tagPath
		zipball := repoAPI + "/zipball/" + tagPath
		out.TarballURL, out.ZipballURL = &tarball, &zipball
	}
	if rel.Name != "" {
		out.Name = &rel.Name
	}
	if rel.Body != "" {
		out.Body = &rel.Body
	}
	if !rel.PublishedAt.IsZero() {
		p := rel.PublishedAt.UTC().Format(time.RFC3339)
		out.PublishedAt = &p
	}
	return out
}

func jsonAnswer(h http.Header, v any) answer {
	body, err := json.Marshal(v)
	if err != nil {
		return errorAnswer(h, http.StatusInternalServerError, "Server Error", "")
	}
	return answer{status: http.StatusOK, header: h, body: body}
}

func errorAnswer(h http.Header, status int, message, doc string) answer {
	v := map[string]string{"message": message, "status": strconv.Itoa(status)}
	if doc != "" {
		v["documentation_url"] = doc
	}
	body, _ := json.Marshal(v)
	return answer{status: status, header: h, body: body}
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// etagMatches applies If-None-Match's weak comparison (RFC 9110 13.1.2).
func etagMatches(ifNoneMatch, etag string) bool {
	if ifNoneMatch == "" {
		return false
	}
	if strings.TrimSpace(ifNoneMatch) == "*" {
		return true
	}
	want := strings.TrimPrefix(etag, "W/")
	for _, candidate := range strings.Split(ifNoneMatch, ",") {
		if strings.TrimPrefix(strings.TrimSpace(candidate), "W/") == want {
			return true
		}
	}
	return false
}
