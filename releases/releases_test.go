package releases_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/releases"
)

const v130URL = "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"

func TestLatestFetchesOnceThenServesFromCache(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{})
	for i := 0; i < 3; i++ {
		rel, err := c.Latest(t.Context(), "Chainbase-Labs/AgentKey")
		if err != nil {
			t.Fatal(err)
		}
		if rel.Tag != "v1.3.0" || rel.Version != "1.3.0" || rel.URL != v130URL || !rel.FetchedAt.Equal(epoch) || rel.PublishedAt.IsZero() {
			t.Errorf("Latest = %+v", rel)
		}
	}
	if n := e.gh.Requests(latestPath); n != 1 {
		t.Errorf("upstream requests = %d, want 1", n)
	}
	if got := e.metrics.get("upstream", releases.ResultOK); got != 1 {
		t.Errorf("ok upstream = %d", got)
	}
	if got, miss := e.metrics.get("lookup", releases.LookupFresh), e.metrics.get("lookup", releases.LookupMiss); got != 2 || miss != 1 {
		t.Errorf("lookups fresh=%d miss=%d, want 2 and 1", got, miss)
	}
	// The entry is persisted with its ETag.
	cached, ok, err := e.store.LoadRelease(agentkey)
	if err != nil || !ok || cached.Tag != "v1.3.0" || cached.ETag == "" || !cached.FetchedAt.Equal(epoch) {
		t.Errorf("stored = %+v %v %v", cached, ok, err)
	}
}

func TestConcurrentFirstCallsMakeOneRequest(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{})
	release := e.gh.Hold()

	const callers = 100
	var wg sync.WaitGroup
	results := make(chan string, callers)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				results <- c.Get(context.Background(), agentkey, 0).Version
				return
			}
			rel, err := c.Latest(context.Background(), agentkey)
			if err != nil {
				results <- err.Error()
				return
			}
			results <- rel.Version
		}(i)
	}
	if err := e.gh.WaitHeld(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	release()
	wg.Wait()
	close(results)
	for v := range results {
		if v != "1.3.0" {
			t.Errorf("a caller got %q", v)
		}
	}
	if n := e.gh.Requests(latestPath); n != 1 {
		t.Errorf("upstream requests = %d, want exactly 1", n)
	}
}

func TestTTLExpiryRefreshesWithConditionalRequest(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{})
	if _, err := c.Latest(t.Context(), agentkey); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(23 * time.Hour)
	if _, err := c.Latest(t.Context(), agentkey); err != nil {
		t.Fatal(err)
	}
	if n := e.gh.Requests(latestPath); n != 1 {
		t.Fatalf("within TTL: %d requests", n)
	}

	e.clock.Advance(2 * time.Hour)
	rel, err := c.Latest(t.Context(), agentkey)
	if err != nil {
		t.Fatal(err)
	}
	st := e.gh.Stats(latestPath)
	if st.Requests != 2 || st.Conditional != 1 || st.NotModified != 1 {
		t.Errorf("after TTL: stats %+v, want a second request, conditional, answered 304", st)
	}
	if rel.Tag != "v1.3.0" || rel.URL != v130URL || !rel.FetchedAt.Equal(e.clock.Now()) {
		t.Errorf("after 304: %+v, want the tag kept and the time renewed", rel)
	}
	if got := e.metrics.get("upstream", releases.ResultNotModified); got != 1 {
		t.Errorf("not_modified upstream = %d", got)
	}
	if cached, _, _ := e.store.LoadRelease(agentkey); !cached.FetchedAt.Equal(e.clock.Now()) || cached.ETag == "" {
		t.Errorf("stored after 304: %+v", cached)
	}

	// The next expiry, after a release: the ETag no longer matches.
	e.gh.Publish(agentkey, fakegithub.Release{TagName: "v1.4.0"})
	e.clock.Advance(25 * time.Hour)
	rel, err = c.Latest(t.Context(), agentkey)
	if err != nil || rel.Tag != "v1.4.0" {
		t.Errorf("after new release: %+v %v", rel, err)
	}
	st = e.gh.Stats(latestPath)
	if st.Requests != 3 || st.Conditional != 2 || st.NotModified != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestConditionalRequestsCostNoRateLimitWithToken(t *testing.T) {
	const token = "ghp_0123456789abcdefSECRET"
	e := newEnv(t, fakegithub.Options{Token: token})
	e.publishAgentkey()
	// A short TTL keeps all requests inside one rate-limit hour.
	c := e.client(releases.Options{Token: token, TTL: 10 * time.Minute})
	if _, err := c.Latest(t.Context(), agentkey); err != nil {
		t.Fatal(err)
	}
	_, before, _ := e.gh.RateLimit(true)
	for i := 0; i < 3; i++ {
		e.clock.Advance(11 * time.Minute)
		if _, err := c.Latest(t.Context(), agentkey); err != nil {
			t.Fatal(err)
		}
	}
	if _, after, _ := e.gh.RateLimit(true); after != fakegithub.DefaultAuthenticatedLimit-1 || before != after {
		t.Errorf("remaining %d -> %d; 304s must be free", before, after)
	}
	if st := e.gh.Stats(latestPath); st.NotModified != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestGetServesStaleAndRefreshesInBackground(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{})
	if v := c.Get(t.Context(), agentkey, 0).Version; v != "1.3.0" {
		t.Fatalf("first Get = %q", v)
	}
	e.gh.Publish(agentkey, fakegithub.Release{TagName: "v1.4.0"})
	e.clock.Advance(25 * time.Hour)

	release := e.gh.Hold()
	// GitHub hangs, yet Get answers at once from the cache, many times,
	// with one refresh in flight.
	for i := 0; i < 10; i++ {
		if v := c.Get(t.Context(), agentkey, 0).Version; v != "1.3.0" {
			t.Fatalf("stale Get = %q", v)
		}
	}
	if err := e.gh.WaitHeld(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	release()
	c.Wait()
	if v := c.Get(t.Context(), agentkey, 0).Version; v != "1.4.0" {
		t.Errorf("after background refresh: %q", v)
	}
	if n := e.gh.Requests(latestPath); n != 2 {
		t.Errorf("upstream requests = %d, want 2", n)
	}
	if got := e.metrics.get("lookup", releases.LookupStale); got != 10 {
		t.Errorf("stale lookups = %d, want 10", got)
	}
	// A per-call maxAge shorter than the TTL refreshes sooner.
	e.clock.Advance(2 * time.Hour)
	c.Get(t.Context(), agentkey, time.Hour)
	c.Wait()
	if n := e.gh.Requests(latestPath); n != 3 {
		t.Errorf("maxAge 1h after 2h: %d requests, want 3", n)
	}
}

// TestFailureModes runs every failure of the protocol's table on the first
// lookup and on a stale cache: the answer is always valid, empty when
// nothing is known, the cached value otherwise, and GitHub is not asked
// again before it allows.
func TestFailureModes(t *testing.T) {
	type failure struct {
		name string
		// inject breaks GitHub (or the store) and returns the Options to use.
		inject func(e *env) releases.Options
		// retryAfter is how long until GitHub may be asked again (0: not a
		// rate limit).
		retryAfter time.Duration
		wantErr    error
	}
	failures := []failure{
		{name: "no network", inject: func(e *env) releases.Options {
			dead := fakegithub.New(fakegithub.Options{})
			dead.Close()
			return releases.Options{APIURL: dead.URL}
		}, wantErr: releases.ErrUnavailable},
		{name: "403 rate limit with reset", inject: func(e *env) releases.Options {
			e.gh.ExhaustRateLimit(e.clock.Now().Add(20 * time.Minute))
			return releases.Options{}
		}, retryAfter: 20 * time.Minute, wantErr: releases.ErrRateLimited},
		{name: "429 with Retry-After", inject: func(e *env) releases.Options {
			e.gh.SecondaryRateLimit(http.StatusTooManyRequests, 90*time.Second)
			return releases.Options{}
		}, retryAfter: 90 * time.Second, wantErr: releases.ErrRateLimited},
		{name: "403 secondary limit with Retry-After", inject: func(e *env) releases.Options {
			e.gh.SecondaryRateLimit(http.StatusForbidden, 2*time.Minute)
			return releases.Options{}
		}, retryAfter: 2 * time.Minute, wantErr: releases.ErrRateLimited},
		{name: "500", inject: func(e *env) releases.Options {
			e.gh.FailNext(http.StatusInternalServerError, -1)
			return releases.Options{}
		}, wantErr: releases.ErrUnavailable},
		{name: "502", inject: func(e *env) releases.Options {
			e.gh.FailNext(http.StatusBadGateway, -1)
			return releases.Options{}
		}, wantErr: releases.ErrUnavailable},
		{name: "slow beyond the timeout", inject: func(e *env) releases.Options {
			e.gh.Hold()
			// The fake never answers, so the outcome does not depend on
			// how short the timeout is.
			return releases.Options{Timeout: 10 * time.Millisecond}
		}, wantErr: releases.ErrUnavailable},
	}

	for _, f := range failures {
		t.Run("first lookup/"+f.name, func(t *testing.T) {
			e := newEnv(t, fakegithub.Options{})
			e.publishAgentkey()
			c := e.client(f.inject(e))
			rel := c.Get(t.Context(), agentkey, 0)
			if rel != (releases.Release{}) {
				t.Errorf("Get = %+v, want zero", rel)
			}
			got := checkSchema(t, releases.BuildResponse(agentkeyMeta, rel, "claude-code"))
			if !sameJSON(t, got, exampleOffline) {
				t.Errorf("answer %s, want the offline example", got)
			}
			// Later calls never wait, and do not hammer GitHub. Count what
			// the client sent: a request abandoned at the timeout may
			// reach the fake late, or never.
			sent := e.sent()
			for i := 0; i < 5; i++ {
				if rel := c.Get(t.Context(), agentkey, 0); rel.Tag != "" {
					t.Errorf("Get = %+v", rel)
				}
			}
			_, err := c.Latest(t.Context(), agentkey)
			if !errors.Is(err, f.wantErr) {
				t.Errorf("Latest error = %v, want %v", err, f.wantErr)
			}
			c.Wait()
			if e.sent() != sent || sent != 1 {
				t.Errorf("client sent %d requests, then %d more while it must not", sent, e.sent()-sent)
			}
			if f.retryAfter > 0 {
				// Not a second before the time GitHub gave.
				e.clock.Advance(f.retryAfter - time.Second)
				c.Get(t.Context(), agentkey, 0)
				c.Wait()
				if e.sent() != sent {
					t.Errorf("asked before the rate limit lifted")
				}
				e.clock.Advance(time.Second)
			} else {
				e.clock.Advance(time.Minute) // past the first error backoff
			}
			switch f.name {
			case "no network":
				return // that client points at a dead address for good
			case "slow beyond the timeout":
				// Its tiny timeout would make recovery depend on speed;
				// a restart with the default one recovers.
				e.gh.ClearFaults()
				c = e.client(releases.Options{})
			}
			e.gh.ClearFaults()
			c.Get(t.Context(), agentkey, 0) // starts the background retry
			c.Wait()
			if v := c.Get(t.Context(), agentkey, 0).Version; v != "1.3.0" {
				t.Errorf("after recovery: %q", v)
			}
		})

		t.Run("stale cache/"+f.name, func(t *testing.T) {
			e := newEnv(t, fakegithub.Options{})
			e.publishAgentkey()
			warm := e.client(releases.Options{})
			if _, err := warm.Latest(t.Context(), agentkey); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(48 * time.Hour)
			c := e.client(f.inject(e)) // same store: a restart with a stale cache
			rel, err := c.Latest(t.Context(), agentkey)
			if err != nil || rel.Tag != "v1.3.0" || !rel.FetchedAt.Equal(epoch) {
				t.Errorf("Latest = %+v, %v; want the cached release", rel, err)
			}
			rel = c.Get(t.Context(), agentkey, 0)
			c.Wait()
			got := checkSchema(t, releases.BuildResponse(agentkeyMeta, rel, "claude-code"))
			if !sameJSON(t, got, exampleCode) {
				t.Errorf("answer %s, want the Claude Code example", got)
			}
			if cached, _, _ := e.store.LoadRelease(agentkey); cached.Tag != "v1.3.0" {
				t.Errorf("stored entry lost: %+v", cached)
			}
		})
	}
}

func TestRateLimitIsSharedAcrossRepositoriesAndRestarts(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	e.gh.Publish("acme/other", fakegithub.Release{TagName: "v0.1.0"})
	e.gh.SecondaryRateLimit(http.StatusTooManyRequests, 5*time.Minute)
	c := e.client(releases.Options{})
	if _, err := c.Latest(t.Context(), agentkey); !errors.Is(err, releases.ErrRateLimited) {
		t.Fatalf("err = %v", err)
	}
	// The limit is the token's: another repository waits too.
	if _, err := c.Latest(t.Context(), "acme/other"); !errors.Is(err, releases.ErrRateLimited) {
		t.Errorf("other repo: %v", err)
	}
	// A restart remembers the repository's retry time through the store.
	restarted := e.client(releases.Options{})
	if _, err := restarted.Latest(t.Context(), agentkey); !errors.Is(err, releases.ErrRateLimited) {
		t.Errorf("after restart: %v", err)
	}
	if n := e.gh.Total(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
	// Refresh (a webhook) honours the limit as well.
	if err := c.Refresh(t.Context(), agentkey); !errors.Is(err, releases.ErrRateLimited) {
		t.Errorf("Refresh: %v", err)
	}
	e.clock.Advance(5 * time.Minute)
	if rel, err := c.Latest(t.Context(), "acme/other"); err != nil || rel.Version != "0.1.0" {
		t.Errorf("after the limit: %+v %v", rel, err)
	}
}

func TestSpentLimitOnSuccessStopsFurtherRequests(t *testing.T) {
	e := newEnv(t, fakegithub.Options{AnonymousLimit: 1})
	e.publishAgentkey()
	e.gh.Publish("acme/other", fakegithub.Release{TagName: "v0.1.0"})
	c := e.client(releases.Options{})
	if _, err := c.Latest(t.Context(), agentkey); err != nil {
		t.Fatal(err)
	}
	// That answer said "0 remaining": do not spend a request on a 403.
	if _, err := c.Latest(t.Context(), "acme/other"); !errors.Is(err, releases.ErrRateLimited) {
		t.Errorf("err = %v", err)
	}
	if n := e.gh.Total(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestCorruptCacheEntryIsDroppedAndRefetched(t *testing.T) {
	future := epoch.Add(48 * time.Hour).Format(time.RFC3339)
	cases := map[string]string{
		"undecodable":        "\x00{not json",
		"truncated":          `{"v":1,"tag":"v1.3.0","html_url":"https://github.com/chainbase-labs/agentkey/rel`,
		"unknown version":    `{"v":7,"tag":"v9.9.9"}`,
		"unknown field":      `{"v":1,"tag":"v9.9.9","html_url":"https://x.test/","fetched_at":"2025-03-01T09:00:00Z","evil":1}`,
		"tag without time":   `{"v":1,"tag":"v9.9.9","html_url":"https://x.test/"}`,
		"script url":         `{"v":1,"tag":"v9.9.9","html_url":"javascript:alert(1)","fetched_at":"2025-03-01T09:00:00Z"}`,
		"fetched in future":  `{"v":1,"tag":"v9.9.9","html_url":"https://x.test/","fetched_at":"` + future + `"}`,
		"control characters": `{"v":1,"tag":"v9\n9.9","html_url":"https://x.test/","fetched_at":"2025-03-01T09:00:00Z"}`,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, fakegithub.Options{})
			e.publishAgentkey()
			e.store.PutRawForTest(agentkey, []byte(raw))
			c := e.client(releases.Options{})
			rel := c.Get(t.Context(), agentkey, 0)
			if rel.Version != "1.3.0" {
				t.Errorf("Get = %+v, want a refetched v1.3.0", rel)
			}
			checkSchema(t, releases.BuildResponse(agentkeyMeta, rel, "claude-ai"))
			if n := e.gh.Requests(latestPath); n != 1 {
				t.Errorf("requests = %d, want 1", n)
			}
			cached, ok, err := e.store.LoadRelease(agentkey)
			if err != nil || !ok || cached.Tag != "v1.3.0" {
				t.Errorf("store now holds %+v %v %v", cached, ok, err)
			}
		})
	}
	t.Run("refetch fails too", func(t *testing.T) {
		e := newEnv(t, fakegithub.Options{})
		e.publishAgentkey()
		e.gh.FailNext(http.StatusServiceUnavailable, -1)
		e.store.PutRawForTest(agentkey, []byte("garbage"))
		c := e.client(releases.Options{})
		got := checkSchema(t, releases.BuildResponse(agentkeyMeta, c.Get(t.Context(), agentkey, 0), "claude-code"))
		if !sameJSON(t, got, exampleOffline) {
			t.Errorf("answer %s", got)
		}
		if _, ok, err := e.store.LoadRelease(agentkey); ok || err != nil {
			t.Errorf("corrupt entry still stored: ok=%v err=%v", ok, err)
		}
	})
}

func TestRepositoryWithoutReleases(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.gh.CreateRepo("acme/empty")
	e.gh.Publish("acme/drafts-only", fakegithub.Release{TagName: "v1.0.0", Draft: true})
	e.gh.Publish("acme/drafts-only", fakegithub.Release{TagName: "v0.9.0", Prerelease: true})
	c := e.client(releases.Options{})
	for _, repo := range []string{"acme/empty", "acme/drafts-only", "acme/does-not-exist"} {
		rel, err := c.Latest(t.Context(), repo)
		if !errors.Is(err, releases.ErrNoRelease) || rel.Tag != "" {
			t.Errorf("%s: %+v, %v; want ErrNoRelease", repo, rel, err)
		}
		resp := releases.BuildResponse(releases.SkillMeta{Skill: "x", Repo: repo}, c.Get(t.Context(), repo, 0), "cursor")
		checkSchema(t, resp)
		if resp.SkillVersionLatest != "" || resp.UpdateCommand != "" {
			t.Errorf("%s: answer %+v", repo, resp)
		}
	}
	// "No release" is cached like a release.
	if n := e.gh.Total(); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
	if got := e.metrics.get("upstream", releases.ResultNotFound); got != 3 {
		t.Errorf("not_found = %d", got)
	}
	// And it ends when a release appears and the TTL passes.
	e.gh.Publish("acme/empty", fakegithub.Release{TagName: "v0.1.0"})
	e.clock.Advance(25 * time.Hour)
	if rel, err := c.Latest(t.Context(), "acme/empty"); err != nil || rel.Version != "0.1.0" {
		t.Errorf("after first release: %+v %v", rel, err)
	}
}

func TestWebhookPutNeverGoesBackwards(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{})
	cur, err := c.Latest(t.Context(), agentkey)
	if err != nil {
		t.Fatal(err)
	}
	t0 := cur.PublishedAt
	url := func(tag string) string { return "https://github.com/chainbase-labs/agentkey/releases/tag/" + tag }

	steps := []struct {
		name    string
		ev      event
		applied bool
		want    string
	}{
		{"published newer", event{Tag: "v1.4.0", HTMLURL: url("v1.4.0"), PublishedAt: t0.Add(time.Hour)}, true, "v1.4.0"},
		{"old published redelivered", event{Tag: "v1.3.0", HTMLURL: url("v1.3.0"), PublishedAt: t0}, false, "v1.4.0"},
		{"older release edited", event{Tag: "v1.2.0", HTMLURL: url("v1.2.0"), PublishedAt: t0.Add(-time.Hour)}, false, "v1.4.0"},
		{"current release edited", event{Tag: "v1.4.0", HTMLURL: url("v1.4.0"), PublishedAt: t0.Add(time.Hour)}, true, "v1.4.0"},
		{"later backport wins like on GitHub", event{Tag: "v1.4.1", HTMLURL: url("v1.4.1"), PublishedAt: t0.Add(3 * time.Hour)}, true, "v1.4.1"},
		{"no published_at, lower version", event{Tag: "v1.3.5", HTMLURL: url("v1.3.5")}, false, "v1.4.1"},
		{"no published_at, higher version", event{Tag: "v1.5.0", HTMLURL: url("v1.5.0")}, true, "v1.5.0"},
		{"redelivered after that", event{Tag: "v1.4.0", HTMLURL: url("v1.4.0"), PublishedAt: t0.Add(time.Hour)}, false, "v1.5.0"},
		{"invalid url", event{Tag: "v9.0.0", HTMLURL: "javascript:x", PublishedAt: t0.Add(9 * time.Hour)}, false, "v1.5.0"},
		{"empty tag", event{Tag: "", HTMLURL: url(""), PublishedAt: t0.Add(9 * time.Hour)}, false, "v1.5.0"},
	}
	for _, s := range steps {
		e.clock.Advance(time.Minute)
		if got := releases.PutForTest(c, agentkey, s.ev.Tag, s.ev.HTMLURL, s.ev.PublishedAt); got != s.applied {
			t.Errorf("%s: applied = %v, want %v", s.name, got, s.applied)
		}
		rel := c.Get(t.Context(), agentkey, 0)
		if rel.Tag != s.want {
			t.Errorf("%s: latest = %q, want %q", s.name, rel.Tag, s.want)
		}
	}
	c.Wait()
	if n := e.gh.Requests(latestPath); n != 1 {
		t.Errorf("upstream requests = %d, want 1 (webhooks cost none)", n)
	}
	if cached, _, _ := e.store.LoadRelease(agentkey); cached.Tag != "v1.5.0" || cached.ETag != "" {
		t.Errorf("stored = %+v, want v1.5.0 without the old ETag", cached)
	}
	resp := releases.BuildResponse(agentkeyMeta, c.Get(t.Context(), agentkey, 0), "claude-code")
	checkSchema(t, resp)
	if resp.SkillVersionLatest != "1.5.0" || resp.ReleaseNotesURL != url("v1.5.0") {
		t.Errorf("answer %+v", resp)
	}
}

// event is the part of a release webhook payload that Put takes.
type event struct {
	Tag, HTMLURL string
	PublishedAt  time.Time
}

func TestPutUndecidableAsksGitHub(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.gh.Publish("acme/dated", fakegithub.Release{TagName: "build-100"})
	c := e.client(releases.Options{})
	if _, err := c.Latest(t.Context(), "acme/dated"); err != nil {
		t.Fatal(err)
	}
	e.gh.Publish("acme/dated", fakegithub.Release{TagName: "build-101", CreatedAt: epoch.Add(time.Minute)})
	// No published_at and no versions: Put cannot order them.
	if releases.PutForTest(c, "acme/dated", "build-101", "https://github.com/acme/dated/releases/tag/build-101", time.Time{}) {
		t.Error("undecidable Put applied")
	}
	c.Wait()
	if rel := c.Get(t.Context(), "acme/dated", 0); rel.Tag != "build-101" {
		t.Errorf("after GitHub was asked: %+v", rel)
	}
}

func TestPutDuringRequestIsNotUndone(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{})
	if _, err := c.Latest(t.Context(), agentkey); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(25 * time.Hour)
	release := e.gh.Hold()
	done := make(chan releases.Release)
	go func() {
		rel, _ := c.Latest(context.Background(), agentkey)
		done <- rel
	}()
	if err := e.gh.WaitHeld(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	// The webhook lands while GitHub (lagging) still answers v1.3.0.
	if !releases.PutForTest(c, agentkey, "v1.4.0", "https://github.com/chainbase-labs/agentkey/releases/tag/v1.4.0", e.clock.Now()) {
		t.Fatal("Put not applied")
	}
	release()
	if rel := <-done; rel.Tag != "v1.4.0" {
		t.Errorf("Latest = %q, want the webhook's v1.4.0", rel.Tag)
	}
	if rel := c.Get(t.Context(), agentkey, 0); rel.Tag != "v1.4.0" {
		t.Errorf("Get = %q", rel.Tag)
	}
}

func TestRefreshAfterDeleteGoesBackwards(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	v14 := e.gh.Publish(agentkey, fakegithub.Release{TagName: "v1.4.0", CreatedAt: epoch.Add(-time.Minute)})
	c := e.client(releases.Options{})
	if rel, _ := c.Latest(t.Context(), agentkey); rel.Tag != "v1.4.0" {
		t.Fatalf("Latest = %q", rel.Tag)
	}
	if err := e.gh.Delete(agentkey, v14.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(t.Context(), agentkey); err != nil {
		t.Fatal(err)
	}
	// No request needed to see it: the refresh went backwards on purpose.
	if rel := c.Get(t.Context(), agentkey, 0); rel.Tag != "v1.3.0" {
		t.Errorf("after Refresh: %+v; want v1.3.0", rel)
	}
	if st := e.gh.Stats(latestPath); st.Requests != 2 || st.Conditional != 1 || st.NotModified != 0 {
		t.Errorf("stats %+v", st)
	}
	// Deleting every release leaves none.
	for _, tag := range []string{"v1.2.0", "v1.3.0", "v1.4.0-rc.1", "v1.4.0"} {
		if err := deleteTag(e.gh, agentkey, tag); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Refresh(t.Context(), agentkey); err != nil {
		t.Errorf("Refresh with no releases: %v", err)
	}
	if rel, err := c.Latest(t.Context(), agentkey); !errors.Is(err, releases.ErrNoRelease) || rel.Tag != "" {
		t.Errorf("Latest after the last release went = %+v, %v", rel, err)
	}
	checkSchema(t, releases.BuildResponse(agentkeyMeta, c.Get(t.Context(), agentkey, 0), "codex"))
}

func TestRefreshWaitsForOlderRequestAndCoalesces(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{})
	release := e.gh.Hold()
	first := make(chan struct{})
	go func() {
		defer close(first)
		_, _ = c.Latest(context.Background(), agentkey)
	}()
	if err := e.gh.WaitHeld(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	// A webhook arrives while that request is out: its answer may predate
	// the change, so every Refresh needs a request sent after it; ten of
	// them share one.
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Refresh(context.Background(), agentkey); err != nil {
				t.Error(err)
			}
		}()
	}
	releases.WaitFollowUpJoinsForTest(c, agentkey, 10)
	// A plain lookup now waits for the refresh too instead of trusting the
	// cache.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := c.Latest(context.Background(), agentkey); err != nil {
			t.Error(err)
		}
	}()
	releases.WaitFollowUpJoinsForTest(c, agentkey, 11)
	release()
	<-first
	wg.Wait()
	if n := e.gh.Requests(latestPath); n != 2 {
		t.Errorf("requests = %d, want 2 (the old one, then one for all refreshes)", n)
	}
}

func TestPersistedEntryServesAfterRestart(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	first := e.client(releases.Options{})
	if _, err := first.Latest(t.Context(), agentkey); err != nil {
		t.Fatal(err)
	}
	_ = first.Close()
	e.clock.Advance(time.Hour)
	second := e.client(releases.Options{})
	if v := second.Get(t.Context(), agentkey, 0).Version; v != "1.3.0" {
		t.Errorf("after restart: %q", v)
	}
	if n := e.gh.Total(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
	e.clock.Advance(24 * time.Hour)
	second.Get(t.Context(), agentkey, 0)
	second.Wait()
	if st := e.gh.Stats(latestPath); st.NotModified != 1 {
		t.Errorf("the persisted ETag was not used: %+v", st)
	}
}

func TestTokenNeverInErrorsOrLogs(t *testing.T) {
	const token = "ghp_TOKENthatMUSTnotLEAK"
	e := newEnv(t, fakegithub.Options{Token: "a-different-one"})
	e.publishAgentkey()
	c := e.client(releases.Options{Token: token})
	_, err := c.Latest(t.Context(), agentkey)
	if err == nil {
		t.Fatal("bad credentials accepted")
	}
	c.Wait()
	if strings.Contains(err.Error(), token) || strings.Contains(e.logs.String(), token) {
		t.Errorf("token leaked: %v\n%s", err, e.logs.String())
	}
	if e.metrics.get("upstream", releases.ResultError) != 1 {
		t.Errorf("401 not counted as error")
	}
	if _, err := releases.New(releases.Options{APIURL: "https://user:" + token + "@ghe.example/api/v3"}); err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("api_url with credentials: %v", err)
	}
}

func TestEnterpriseAPIURL(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{APIURL: e.gh.URL + "/api/v3"})
	if rel, err := c.Latest(t.Context(), agentkey); err != nil || rel.Version != "1.3.0" {
		t.Errorf("Latest = %+v %v", rel, err)
	}
	if e.gh.Requests(latestPath) != 1 {
		t.Errorf("stats by path without prefix: %+v", e.gh.Stats(latestPath))
	}
}

func TestInvalidRepository(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	c := e.client(releases.Options{})
	for _, repo := range []string{"", "agentkey", "a/b/c", "../x", "owner/..", "own er/x", "-owner/x", "o/" + strings.Repeat("x", 101)} {
		if _, err := c.Latest(t.Context(), repo); !errors.Is(err, releases.ErrInvalidRepo) {
			t.Errorf("Latest(%q) = %v", repo, err)
		}
		if rel := c.Get(t.Context(), repo, 0); rel != (releases.Release{}) {
			t.Errorf("Get(%q) = %+v", repo, rel)
		}
		if releases.PutForTest(c, repo, "v1.0.0", "https://x.test/", time.Time{}) {
			t.Errorf("Put(%q) applied", repo)
		}
	}
	if e.gh.Total() != 0 {
		t.Errorf("GitHub asked about invalid names")
	}
	if key, err := releases.RepoKey("Chainbase-Labs/AgentKey"); err != nil || key != agentkey {
		t.Errorf("RepoKey = %q %v", key, err)
	}
}

func TestCloseCancelsAndStops(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{Timeout: time.Hour})
	if _, err := c.Latest(t.Context(), agentkey); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(25 * time.Hour)
	e.gh.Hold()
	if v := c.Get(t.Context(), agentkey, 0).Version; v != "1.3.0" {
		t.Errorf("stale Get = %q", v)
	}
	if err := e.gh.WaitHeld(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // must not wait for the hour
	if rel, err := c.Latest(t.Context(), agentkey); err != nil || rel.Tag != "v1.3.0" {
		t.Errorf("after Close: %+v %v; want the cached release", rel, err)
	}
	if err := c.Refresh(t.Context(), agentkey); !errors.Is(err, releases.ErrClosed) {
		t.Errorf("Refresh after Close: %v", err)
	}
}

func TestCallerContextEndsWait(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{Timeout: time.Hour})
	release := e.gh.Hold()
	defer release()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		_ = e.gh.WaitHeld(context.Background(), 1)
		cancel()
	}()
	if rel := c.Get(ctx, agentkey, 0); rel != (releases.Release{}) {
		t.Errorf("Get = %+v", rel)
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if _, err := c.Latest(ctx2, agentkey); !errors.Is(err, context.Canceled) {
		t.Errorf("Latest = %v", err)
	}
	// The request goes on for the other callers.
	release()
	c.Wait()
	if v := c.Get(t.Context(), agentkey, 0).Version; v != "1.3.0" {
		t.Errorf("after the request completed: %q", v)
	}
}

// deleteTag deletes every release with that tag.
func deleteTag(gh *fakegithub.Server, repo, tag string) error {
	for _, rel := range gh.Releases(repo) {
		if rel.TagName == tag {
			if err := gh.Delete(repo, rel.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// The webhook package's Releases interface, as it declares it: the Client
// plugs in without an adapter.
var _ interface {
	Put(repo, tag, htmlURL string, publishedAt time.Time)
	Refresh(ctx context.Context, repo string) error
} = (*releases.Client)(nil)

func TestWebhooksIgnoreRepositoriesNotFollowed(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{})
	c.Put(agentkey, "v9.0.0", "https://github.com/chainbase-labs/agentkey/releases/tag/v9.0.0", epoch)
	if err := c.Refresh(t.Context(), agentkey); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if n := e.gh.Total(); n != 0 {
		t.Errorf("requests = %d, want 0", n)
	}
	if _, ok, _ := e.store.LoadRelease(agentkey); ok {
		t.Error("an entry was stored for a repository nobody looked up")
	}
	// The first lookup asks GitHub, which is the truth anyway.
	if rel, err := c.Latest(t.Context(), agentkey); err != nil || rel.Tag != "v1.3.0" {
		t.Errorf("Latest = %+v %v", rel, err)
	}
	// From now on webhooks count, even after a restart (the store knows).
	restarted := e.client(releases.Options{})
	restarted.Put(agentkey, "v1.4.0", "https://github.com/chainbase-labs/agentkey/releases/tag/v1.4.0", epoch.Add(time.Hour))
	if rel := restarted.Get(t.Context(), agentkey, 0); rel.Tag != "v1.4.0" {
		t.Errorf("after restart and Put: %+v", rel)
	}
}

// TestHostileAPIErrors: an API endpoint that echoes the Authorization
// header in its reason phrase and body (as GitHub's JSON "message") leaves
// neither the token nor its body in the error or the log; the status stays.
func TestHostileAPIErrors(t *testing.T) {
	const token = "ghp_TOKENthatMUSTnotLEAK/x+y"
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity, http.StatusTeapot} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer conn.Close()
						req, err := http.ReadRequest(bufio.NewReader(conn))
						if err != nil {
							return
						}
						auth := req.Header.Get("Authorization")
						body, _ := json.Marshal(map[string]any{"message": "Bad credentials: " + auth + "\x1b[2J",
							"errors": []map[string]string{{"message": auth}}, "documentation_url": "https://x/" + url.QueryEscape(auth)})
						fmt.Fprintf(conn, "HTTP/1.1 %d Nope %s\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
							status, auth, len(body), body)
					}()
				}
			}()
			var logs bytes.Buffer
			c, err := releases.New(releases.Options{APIURL: "http://" + ln.Addr().String() + "/", Token: token,
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Latest(t.Context(), agentkey)
			if err == nil {
				t.Fatal("error answer accepted")
			}
			c.Wait()
			for what, text := range map[string]string{"error": err.Error(), "log": logs.String()} {
				for _, leak := range []string{token, url.QueryEscape(token), "Bad credentials", "\x1b", `\u001b`} {
					if strings.Contains(text, leak) {
						t.Errorf("%s holds %q: %s", what, leak, text)
					}
				}
			}
			if !strings.Contains(logs.String(), strconv.Itoa(status)) {
				t.Errorf("the log does not say the status: %s", logs.String())
			}
		})
	}
}
