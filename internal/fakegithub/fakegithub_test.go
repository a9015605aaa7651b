package fakegithub_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/skillreg/skillreg/internal/fakegithub"
)

var epoch = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

const repo = "chainbase-labs/agentkey"

func newFake(t *testing.T, opts fakegithub.Options) (*fakegithub.Server, *fakegithub.Clock) {
	t.Helper()
	clk := fakegithub.NewClock(epoch)
	if opts.Now == nil {
		opts.Now = clk.Now
	}
	s := fakegithub.New(opts)
	t.Cleanup(s.Close)
	return s, clk
}

func client(t *testing.T, base string) *github.Client {
	t.Helper()
	c := github.NewClient(nil)
	u, err := url.Parse(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = u
	return c
}

// seed publishes, in creation order: v1.0.0, v1.1.0, a prerelease v2.0.0-rc.1
// and a draft v2.0.0.
func seed(s *fakegithub.Server) {
	s.Publish(repo, fakegithub.Release{TagName: "v1.0.0", CreatedAt: epoch.Add(-4 * time.Hour)})
	s.Publish(repo, fakegithub.Release{TagName: "v1.1.0", Name: "One one", CreatedAt: epoch.Add(-3 * time.Hour)})
	s.Publish(repo, fakegithub.Release{TagName: "v2.0.0-rc.1", Prerelease: true, CreatedAt: epoch.Add(-2 * time.Hour)})
	s.Publish(repo, fakegithub.Release{TagName: "v2.0.0", Draft: true, CreatedAt: epoch.Add(-1 * time.Hour)})
}

func TestLatestExcludesDraftsAndPrereleases(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"", "/api/v3"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			s, _ := newFake(t, fakegithub.Options{})
			seed(s)
			gh := client(t, s.URL+prefix)
			rel, resp, err := gh.Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey")
			if err != nil {
				t.Fatal(err)
			}
			if got := rel.GetTagName(); got != "v1.1.0" {
				t.Errorf("latest = %q, want v1.1.0", got)
			}
			if got, want := rel.GetHTMLURL(), "https://github.com/chainbase-labs/agentkey/releases/tag/v1.1.0"; got != want {
				t.Errorf("html_url = %q, want %q", got, want)
			}
			if rel.GetDraft() || rel.GetPrerelease() || rel.GetID() == 0 || rel.GetPublishedAt().IsZero() || rel.GetName() != "One one" {
				t.Errorf("unexpected release %+v", rel)
			}
			etag := resp.Header.Get("ETag")
			if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
				t.Errorf("ETag %q is not a strong entity tag", etag)
			}
			if resp.Rate.Limit != fakegithub.DefaultAnonymousLimit || resp.Rate.Remaining != fakegithub.DefaultAnonymousLimit-1 {
				t.Errorf("rate = %+v", resp.Rate)
			}
			if got := s.Requests("/repos/chainbase-labs/agentkey/releases/latest"); got != 1 {
				t.Errorf("requests = %d, want 1", got)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, fakegithub.Options{})
	s.CreateRepo("acme/empty")
	gh := client(t, s.URL)
	for _, r := range []string{"acme/empty", "acme/missing"} {
		_, resp, err := gh.Repositories.GetLatestRelease(context.Background(), "acme", r[len("acme/"):])
		var er *github.ErrorResponse
		if !errors.As(err, &er) || resp.StatusCode != http.StatusNotFound || er.Message != "Not Found" {
			t.Errorf("%s: err = %v, want 404 Not Found", r, err)
		}
	}
}

func TestListPaginatesAndHidesDraftsFromAnonymous(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, fakegithub.Options{Token: "sekret"})
	seed(s)
	for i := 0; i < 6; i++ {
		s.Publish(repo, fakegithub.Release{TagName: "v0.0." + strconv.Itoa(i), CreatedAt: epoch.Add(-time.Duration(10+i) * time.Hour)})
	}
	list := func(gh *github.Client) []string {
		var tags []string
		opts := &github.ListOptions{PerPage: 3}
		pages := 0
		for {
			rels, resp, err := gh.Repositories.ListReleases(context.Background(), "chainbase-labs", "agentkey", opts)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if resp.NextPage != 0 && resp.LastPage == 0 {
				t.Errorf("page %d: next without last link", opts.Page)
			}
			for _, r := range rels {
				tags = append(tags, r.GetTagName())
			}
			if resp.NextPage == 0 {
				if opts.Page > 1 && (resp.PrevPage != opts.Page-1 || resp.FirstPage != 1) {
					t.Errorf("last page: prev=%d first=%d", resp.PrevPage, resp.FirstPage)
				}
				break
			}
			opts.Page = resp.NextPage
		}
		if want := (len(tags) + 2) / 3; pages != want {
			t.Errorf("pages = %d, want %d", pages, want)
		}
		return tags
	}
	anon := list(client(t, s.URL))
	wantAnon := []string{"v2.0.0-rc.1", "v1.1.0", "v1.0.0", "v0.0.0", "v0.0.1", "v0.0.2", "v0.0.3", "v0.0.4", "v0.0.5"}
	if !equal(anon, wantAnon) {
		t.Errorf("anonymous list = %v, want %v", anon, wantAnon)
	}
	authed := list(client(t, s.URL).WithAuthToken("sekret"))
	if want := append([]string{"v2.0.0"}, wantAnon...); !equal(authed, want) {
		t.Errorf("authenticated list = %v, want %v", authed, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// conditionalGet sends GET latest with If-None-Match and returns the status
// and the remaining rate limit.
func conditionalGet(t *testing.T, gh *github.Client, etag string) (int, string, int) {
	t.Helper()
	req, err := gh.NewRequest(http.MethodGet, "repos/chainbase-labs/agentkey/releases/latest", nil)
	if err != nil {
		t.Fatal(err)
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := gh.Do(context.Background(), req, nil)
	if resp == nil {
		t.Fatalf("no response: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("ETag"), resp.Rate.Remaining
}

func TestConditionalRequests(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, fakegithub.Options{Token: "sekret"})
	seed(s)
	const path = "/repos/chainbase-labs/agentkey/releases/latest"

	authed := client(t, s.URL).WithAuthToken("sekret")
	status, etag, remaining := conditionalGet(t, authed, "")
	if status != 200 || remaining != fakegithub.DefaultAuthenticatedLimit-1 {
		t.Fatalf("first: %d, remaining %d", status, remaining)
	}
	status, etag2, remaining2 := conditionalGet(t, authed, etag)
	if status != http.StatusNotModified || etag2 != etag || remaining2 != remaining {
		t.Errorf("authorized conditional: %d etag %q remaining %d, want 304, same etag, %d (a 304 is free)", status, etag2, remaining2, remaining)
	}
	if status, _, _ := conditionalGet(t, authed, `W/"nope", `+etag); status != http.StatusNotModified {
		t.Errorf("list with weak match: %d, want 304", status)
	}

	anon := client(t, s.URL)
	_, etagAnon, before := conditionalGet(t, anon, "")
	status, _, after := conditionalGet(t, anon, etagAnon)
	if status != http.StatusNotModified || after != before-1 {
		t.Errorf("anonymous conditional: %d remaining %d -> %d, want 304 that costs one", status, before, after)
	}

	// A new release changes the body, so the old ETag no longer matches.
	s.Publish(repo, fakegithub.Release{TagName: "v1.2.0"})
	status, etag3, _ := conditionalGet(t, authed, etag)
	if status != 200 || etag3 == etag {
		t.Errorf("after publish: %d etag %q, want 200 and a new etag", status, etag3)
	}

	st := s.Stats(path)
	if st.Requests != 6 || st.Conditional != 4 || st.NotModified != 3 || st.Status[200] != 3 || st.Status[304] != 3 {
		t.Errorf("stats = %+v", st)
	}
}

func TestPrimaryRateLimit(t *testing.T) {
	t.Parallel()
	s, clk := newFake(t, fakegithub.Options{AnonymousLimit: 2})
	seed(s)
	gh := client(t, s.URL)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, _, err := gh.Repositories.GetLatestRelease(ctx, "chainbase-labs", "agentkey"); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh go-github client, so that its own memory of the limit does
	// not answer for the server.
	_, resp, err := client(t, s.URL).Repositories.GetLatestRelease(ctx, "chainbase-labs", "agentkey")
	var rl *github.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("err = %v, want RateLimitError", err)
	}
	_, _, reset := s.RateLimit(false)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-RateLimit-Remaining") != "0" ||
		resp.Header.Get("X-RateLimit-Reset") != strconv.FormatInt(reset.Unix(), 10) || !reset.Equal(epoch.Add(time.Hour)) {
		t.Errorf("403 headers = %v (reset %v)", resp.Header, reset)
	}
	clk.Set(reset)
	if _, _, err := client(t, s.URL).Repositories.GetLatestRelease(ctx, "chainbase-labs", "agentkey"); err != nil {
		t.Errorf("after reset: %v", err)
	}

	s.ExhaustRateLimit(clk.Now().Add(10 * time.Minute))
	if _, _, err := client(t, s.URL).Repositories.GetLatestRelease(ctx, "chainbase-labs", "agentkey"); !errors.As(err, &rl) {
		t.Errorf("after ExhaustRateLimit: %v, want RateLimitError", err)
	}
}

func TestSecondaryRateLimit(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTooManyRequests, http.StatusForbidden} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			s, clk := newFake(t, fakegithub.Options{})
			seed(s)
			s.SecondaryRateLimit(status, 90*time.Second)
			_, resp, err := client(t, s.URL).Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey")
			if err == nil || resp.StatusCode != status || resp.Header.Get("Retry-After") != "90" {
				t.Fatalf("err = %v, status %d, Retry-After %q", err, resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if status == http.StatusForbidden {
				var abuse *github.AbuseRateLimitError
				if !errors.As(err, &abuse) {
					t.Errorf("err = %T, want AbuseRateLimitError", err)
				}
			}
			clk.Advance(30 * time.Second)
			_, resp, _ = client(t, s.URL).Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey")
			if resp.Header.Get("Retry-After") != "60" {
				t.Errorf("Retry-After after 30s = %q, want 60", resp.Header.Get("Retry-After"))
			}
			clk.Advance(60 * time.Second)
			if _, _, err := client(t, s.URL).Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey"); err != nil {
				t.Errorf("after Retry-After: %v", err)
			}
		})
	}
}

func TestFailNextAndBadCredentials(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, fakegithub.Options{Token: "sekret"})
	seed(s)
	gh := client(t, s.URL)
	s.FailNext(http.StatusInternalServerError, 2)
	for i := 0; i < 2; i++ {
		if _, resp, err := gh.Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey"); err == nil || resp.StatusCode != 500 {
			t.Errorf("request %d: want 500, got %v", i, err)
		}
	}
	if _, _, err := gh.Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey"); err != nil {
		t.Errorf("third request: %v", err)
	}
	s.FailNext(http.StatusBadGateway, -1)
	for i := 0; i < 3; i++ {
		if _, resp, _ := gh.Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey"); resp.StatusCode != 502 {
			t.Errorf("persistent failure: %d", resp.StatusCode)
		}
	}
	s.ClearFaults()
	_, resp, err := client(t, s.URL).WithAuthToken("wrong").Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey")
	if err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %v", err)
	}
}

func TestHoldUntilReleasedOrCancelled(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, fakegithub.Options{})
	seed(s)
	gh := client(t, s.URL)
	release := s.Hold()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := gh.Repositories.GetLatestRelease(ctx, "chainbase-labs", "agentkey")
		errc <- err
	}()
	if err := s.WaitHeld(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request: %v", err)
	}

	done := make(chan error, 1)
	go func() {
		_, _, err := gh.Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey")
		done <- err
	}()
	if err := s.WaitHeld(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	release()
	release()
	if err := <-done; err != nil {
		t.Errorf("released request: %v", err)
	}
	if got := s.Requests("/repos/chainbase-labs/agentkey/releases/latest"); got != 2 {
		t.Errorf("requests = %d, want 2", got)
	}
}

func TestEditAndDeleteMoveLatest(t *testing.T) {
	t.Parallel()
	s, clk := newFake(t, fakegithub.Options{})
	seed(s)
	gh := client(t, s.URL)
	latest := func() string {
		t.Helper()
		rel, _, err := gh.Repositories.GetLatestRelease(context.Background(), "chainbase-labs", "agentkey")
		if err != nil {
			return "error: " + err.Error()
		}
		return rel.GetTagName()
	}
	rels := map[string]int64{}
	opts := &github.ListOptions{PerPage: 100}
	list, _, err := gh.Repositories.ListReleases(context.Background(), "chainbase-labs", "agentkey", opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		rels[r.GetTagName()] = r.GetID()
	}
	// Promote the prerelease.
	if _, err := s.Edit(repo, rels["v2.0.0-rc.1"], func(r *fakegithub.Release) { r.Prerelease = false }); err != nil {
		t.Fatal(err)
	}
	if got := latest(); got != "v2.0.0-rc.1" {
		t.Errorf("after promoting rc: %s", got)
	}
	if err := s.Delete(repo, rels["v2.0.0-rc.1"]); err != nil {
		t.Fatal(err)
	}
	if got := latest(); got != "v1.1.0" {
		t.Errorf("after delete: %s", got)
	}
	clk.Advance(time.Minute)
	if err := s.Delete(repo, 1); !errors.Is(err, fakegithub.ErrNotFound) {
		t.Errorf("delete unknown: %v", err)
	}
	if _, err := s.Edit("nobody/nothing", 1, func(*fakegithub.Release) {}); !errors.Is(err, fakegithub.ErrNotFound) {
		t.Errorf("edit unknown: %v", err)
	}
}

func TestReleasesListsStoredReleases(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, fakegithub.Options{})
	seed(s)
	rels := s.Releases(repo)
	if len(rels) != 4 || rels[0].TagName != "v1.0.0" || !rels[3].Draft || !rels[3].PublishedAt.IsZero() {
		t.Errorf("Releases = %+v", rels)
	}
	if s.Releases("nobody/nothing") != nil {
		t.Error("unknown repository has releases")
	}
}
