package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skillreg/skillreg/jsonbound"
)

// Bounds of what the API may send.
const (
	// MaxPageBytes bounds one page of a repository listing (100
	// repositories of a few KiB each on GitHub).
	MaxPageBytes = 8 << 20
	// MaxTreeBytes bounds a recursive tree (GitHub truncates at 100,000
	// entries and 7 MB).
	MaxTreeBytes = 16 << 20
	// MaxPages bounds one listing (100 repositories a page).
	MaxPages = 1000
	// perPage is the largest page GitHub serves.
	perPage = 100
	// rateRetries bounds how often one request waits out a rate limit.
	rateRetries = 3
)

var jsonLimits = jsonbound.Limits{MaxDepth: 16}

// ErrRateLimited means a rate limit outlasted the waits one request may
// make.
var ErrRateLimited = errors.New("github rate limit")

// errNotFound is a 404 (or, for a tree, 409: an empty repository).
var errNotFound = errors.New("not found")

// api asks GitHub's REST API, one request at a time per call, honouring
// its rate limits: X-RateLimit-Remaining 0 holds every request until
// X-RateLimit-Reset, and a 403 or 429 with Retry-After holds them that
// long.
type api struct {
	base   string
	client func(owner string) *http.Client
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error

	mu        sync.Mutex
	notBefore time.Time
}

func newAPI(o Options) *api {
	base := strings.TrimSuffix(o.APIURL, "/")
	if base == "" {
		base = "https://api.github.com"
	}
	client := o.Client
	if client == nil {
		client = func(string) *http.Client { return http.DefaultClient }
	}
	return &api{base: base, client: client, now: o.Now, sleep: o.Sleep}
}

// answer is one API answer.
type answer struct {
	status int
	body   []byte
	etag   string
	next   string // the Link header's rel="next"
}

// get asks for u on behalf of owner, conditional on etag when set.
func (a *api) get(ctx context.Context, owner, u, etag string, limit int64) (answer, error) {
	for attempt := 0; ; attempt++ {
		if err := a.wait(ctx); err != nil {
			return answer{}, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return answer{}, fmt.Errorf("GET %s: %w", u, err)
		}
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := a.client(owner).Do(req)
		if err != nil {
			return answer{}, fmt.Errorf("GET %s: %w", u, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		resp.Body.Close()
		if err != nil {
			return answer{}, fmt.Errorf("GET %s: %w", u, err)
		}
		limited := a.noteLimits(resp)
		switch {
		case resp.StatusCode == http.StatusOK:
			if int64(len(body)) > limit {
				return answer{}, fmt.Errorf("GET %s: answer larger than %d bytes", u, limit)
			}
			return answer{status: resp.StatusCode, body: body, etag: resp.Header.Get("ETag"), next: nextLink(resp.Header.Get("Link"))}, nil
		case resp.StatusCode == http.StatusNotModified:
			return answer{status: resp.StatusCode, etag: etag}, nil
		case limited && attempt < rateRetries:
			continue // wait() holds the next attempt until the limit resets
		case limited:
			return answer{}, fmt.Errorf("GET %s: %w (status %d)", u, ErrRateLimited, resp.StatusCode)
		case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusConflict:
			return answer{}, fmt.Errorf("GET %s: %w (status %d)", u, errNotFound, resp.StatusCode)
		default:
			return answer{}, fmt.Errorf("GET %s: status %d: %s", u, resp.StatusCode, message(body))
		}
	}
}

// wait holds a request while a rate limit lasts.
func (a *api) wait(ctx context.Context) error {
	for {
		a.mu.Lock()
		d := a.notBefore.Sub(a.now())
		a.mu.Unlock()
		if d <= 0 {
			return ctx.Err()
		}
		if err := a.sleep(ctx, d); err != nil {
			return fmt.Errorf("wait %s for the GitHub rate limit: %w", d.Round(time.Second), err)
		}
	}
}

// noteLimits reads an answer's rate-limit headers: it reports whether
// the answer is a refusal for a rate limit, and holds later requests
// until the limit resets.
func (a *api) noteLimits(resp *http.Response) (limited bool) {
	h := resp.Header
	var until time.Time
	refused := resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests
	if ra := h.Get("Retry-After"); ra != "" && refused {
		if secs, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && secs >= 0 {
			until = a.now().Add(time.Duration(secs) * time.Second)
			limited = true
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			if t := time.Unix(reset, 0); t.After(until) {
				until = t
			}
			limited = limited || refused
		}
	}
	if !until.IsZero() {
		a.mu.Lock()
		if until.After(a.notBefore) {
			a.notBefore = until
		}
		a.mu.Unlock()
	}
	return limited
}

// nextLink returns the rel="next" URL of a Link header.
func nextLink(h string) string {
	for _, part := range strings.Split(h, ",") {
		target, params, ok := strings.Cut(part, ";")
		if !ok {
			continue
		}
		target = strings.TrimSpace(target)
		if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			if strings.TrimSpace(p) == `rel="next"` {
				return target[1 : len(target)-1]
			}
		}
	}
	return ""
}

// message is the "message" of a GitHub error body, shortened.
func message(body []byte) string {
	var v struct {
		Message string `json:"message"`
	}
	if jsonbound.Check(body, jsonLimits) == nil && json.Unmarshal(body, &v) == nil && v.Message != "" {
		body = []byte(v.Message)
	}
	s := strings.ToValidUTF8(string(body), "?")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// repoJSON is the part of GitHub's repository object discovery reads.
type repoJSON struct {
	ID            int64    `json:"id"`
	FullName      string   `json:"full_name"`
	Archived      bool     `json:"archived"`
	Fork          bool     `json:"fork"`
	Private       bool     `json:"private"`
	DefaultBranch string   `json:"default_branch"`
	CloneURL      string   `json:"clone_url"`
	HTMLURL       string   `json:"html_url"`
	Topics        []string `json:"topics"`
}

// DecodeRepos reads one page of a repository listing: a JSON array of
// repositories, or (installation) an object with a "repositories" array.
// Entries without an id, an owner/name full name or a clone URL are
// dropped.
func DecodeRepos(body []byte) ([]Repo, error) {
	if err := jsonbound.Check(body, jsonLimits); err != nil {
		return nil, fmt.Errorf("repository listing: %w", err)
	}
	var list []repoJSON
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var inst struct {
			Repositories []repoJSON `json:"repositories"`
		}
		if err := json.Unmarshal(trimmed, &inst); err != nil {
			return nil, fmt.Errorf("repository listing: %w", err)
		}
		list = inst.Repositories
	} else if err := json.Unmarshal(trimmed, &list); err != nil {
		return nil, fmt.Errorf("repository listing: %w", err)
	}
	out := make([]Repo, 0, len(list))
	for _, r := range list {
		owner, name, ok := strings.Cut(r.FullName, "/")
		if r.ID <= 0 || !ok || owner == "" || name == "" || strings.Contains(name, "/") || !validCloneURL(r.CloneURL) {
			continue
		}
		out = append(out, Repo(r))
	}
	return out, nil
}

func validCloneURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil
}

// DecodeTree reads a Git Trees API answer: the paths of its blobs and
// whether GitHub truncated it.
func DecodeTree(body []byte) (paths []string, truncated bool, err error) {
	if err := jsonbound.Check(body, jsonLimits); err != nil {
		return nil, false, fmt.Errorf("tree: %w", err)
	}
	var t struct {
		Tree []struct {
			Path string `json:"path"`
			Type string `json:"type"`
		} `json:"tree"`
		Truncated bool `json:"truncated"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, false, fmt.Errorf("tree: %w", err)
	}
	for _, e := range t.Tree {
		if e.Type == "blob" {
			paths = append(paths, e.Path)
		}
	}
	return paths, t.Truncated, nil
}

// listing fetches an owner's repositories, page by page, each page
// conditional on its ETag from prev. changed is false when every page
// answered 304.
func (a *api) listing(ctx context.Context, owner string, installation bool, prev []Page) (pages []Page, changed bool, err error) {
	old := map[string]Page{}
	for _, p := range prev {
		old[p.URL] = p
	}
	first := a.base + "/orgs/" + url.PathEscape(owner) + "/repos?per_page=" + strconv.Itoa(perPage) + "&type=all"
	users := a.base + "/users/" + url.PathEscape(owner) + "/repos?per_page=" + strconv.Itoa(perPage) + "&type=owner"
	switch {
	case installation:
		first = a.base + "/installation/repositories?per_page=" + strconv.Itoa(perPage)
	case len(prev) > 0 && prev[0].URL == users:
		first = users // a user, not an organisation: known from the last listing
	}
	for u := first; u != ""; {
		if len(pages) >= MaxPages {
			return nil, false, fmt.Errorf("list %s: more than %d pages", owner, MaxPages)
		}
		p := old[u]
		ans, err := a.get(ctx, owner, u, p.ETag, MaxPageBytes)
		if errors.Is(err, errNotFound) && len(pages) == 0 && u == first && !installation && first != users {
			u, first = users, users // no such organisation: a user
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("list repositories of %s: %w", owner, err)
		}
		if ans.status == http.StatusNotModified {
			pages = append(pages, p)
			u = p.Next
			continue
		}
		repos, err := DecodeRepos(ans.body)
		if err != nil {
			return nil, false, fmt.Errorf("list repositories of %s: %w", owner, err)
		}
		changed = true
		np := Page{URL: u, ETag: ans.etag, Repos: repos, Next: ans.next}
		pages = append(pages, np)
		u = ans.next
	}
	return pages, changed || len(pages) != len(prev), nil
}

// tree checks whether a repository's default branch has a SKILL.md under
// dir, conditional on the last check's ETag.
func (a *api) tree(ctx context.Context, r *Repo, dir string, prev *TreeCheck) (TreeCheck, error) {
	ref := r.DefaultBranch
	if ref == "" {
		ref = "HEAD"
	}
	owner, name := r.Owner(), r.Name()
	u := a.base + "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/git/trees/" + url.PathEscape(ref) + "?recursive=1"
	etag := ""
	if prev != nil && prev.Ref == ref && prev.Path == dir {
		etag = prev.ETag // a 304 keeps the last judgement, for this ref and path only
	}
	ans, err := a.get(ctx, owner, u, etag, MaxTreeBytes)
	switch {
	case errors.Is(err, errNotFound):
		return TreeCheck{ID: r.ID, Ref: ref, Path: dir}, nil // empty, or no such branch: no skill
	case err != nil:
		return TreeCheck{}, fmt.Errorf("tree of %s: %w", r.FullName, err)
	case ans.status == http.StatusNotModified:
		return *prev, nil
	}
	paths, truncated, err := DecodeTree(ans.body)
	if err != nil {
		return TreeCheck{}, fmt.Errorf("tree of %s: %w", r.FullName, err)
	}
	return TreeCheck{ID: r.ID, Ref: ref, Path: dir, ETag: ans.etag, HasSkill: hasSkill(paths, dir), Truncated: truncated && !hasSkill(paths, dir)}, nil
}
