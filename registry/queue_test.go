package registry

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/testkit"
)

// fakeGit is an in-memory git layer: one fakeRepo per URL.
type fakeGit struct {
	mu    sync.Mutex
	repos map[string]*fakeRepo
}

func (g *fakeGit) Repo(url string) (GitRepo, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.repos[url]
	if !ok {
		return nil, fmt.Errorf("no fake repository %s", url)
	}
	return r, nil
}

func (g *fakeGit) add(name string, r *fakeRepo) catalog.Source {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.repos == nil {
		g.repos = map[string]*fakeRepo{}
	}
	r.url = "https://git.example/" + name + ".git"
	r.blobs = map[string]string{}
	g.repos[r.url] = r
	return catalog.Source{Name: name, Kind: catalog.KindGit, Poll: 5 * time.Second, Git: &catalog.GitSource{Repo: repoOf(r.url), Pin: gitref.Pin{Kind: gitref.Branch, Value: "main"}}}
}

// fakeRepo is a remote that answers at once (files), fails at once (fail),
// or hangs until the sync's deadline (hang), like one that accepted the
// connection and never answered.
type fakeRepo struct {
	url  string
	mu   sync.Mutex
	hang bool
	fail error
	// gate, when set, holds each listing until it receives
	gate chan struct{}
	// files of the commit the remote's main branch points at
	files  map[string]string
	commit string
	blobs  map[string]string

	// listings records when each ListRemote began and the state the
	// registry showed for the source then.
	listings []listing
	inflight int // ListRemote calls in progress
	state    func() catalog.State
}

type listing struct {
	at    time.Time
	state catalog.State
}

func (f *fakeRepo) setFiles(files map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := sha1.New()
	for p, c := range files {
		fmt.Fprintf(h, "%s\x00%s\x00", p, c)
	}
	f.files, f.commit = files, hex.EncodeToString(h.Sum(nil))
}

func (f *fakeRepo) URL() string                           { return f.url }
func (f *fakeRepo) HasCommit(string) bool                 { return true }
func (f *fakeRepo) DiskUsage() (int64, error)             { return 0, nil }
func (f *fakeRepo) Prune(context.Context, []string) error { return nil }

// ReadObject: the fake holds no commit or tag objects (its sources
// have no verify).
func (f *fakeRepo) ReadObject(id string) (string, []byte, error) {
	return "", nil, fmt.Errorf("read object %s: %w", id, gitstore.ErrObjectNotFound)
}

func (f *fakeRepo) Inflight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight
}

func (f *fakeRepo) Listings() []listing {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]listing(nil), f.listings...)
}

func (f *fakeRepo) ListRemote(ctx context.Context, _ gitstore.Auth) (*gitstore.RemoteRefs, error) {
	var st catalog.State
	if f.state != nil {
		st = f.state()
	}
	f.mu.Lock()
	f.listings = append(f.listings, listing{at: time.Now(), state: st})
	hang, fail, commit, gate := f.hang, f.fail, f.commit, f.gate
	if hang {
		f.inflight++
	}
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, fmt.Errorf("list refs %s: %w", f.url, ctx.Err())
		}
	}
	if hang {
		<-ctx.Done()
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
		return nil, fmt.Errorf("list refs %s: %w", f.url, ctx.Err())
	}
	if fail != nil {
		return nil, fail
	}
	return gitstore.NewRemoteRefs("refs/heads/main", map[string]string{"refs/heads/main": commit}), nil
}

func (f *fakeRepo) Fetch(context.Context, gitstore.Resolved, gitstore.Auth) error { return nil }

func (f *fakeRepo) Walk(commit, _ string) ([]gitstore.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []gitstore.Entry
	for p, c := range f.files {
		sum := sha1.Sum([]byte(c))
		id := hex.EncodeToString(sum[:])
		f.blobs[id] = c
		out = append(out, gitstore.Entry{Path: p, Mode: gitstore.ModeRegular, Blob: id})
	}
	return out, nil
}

func (f *fakeRepo) OpenBlob(id string) (io.ReadCloser, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.blobs[id]
	if !ok {
		return nil, 0, gitstore.ErrObjectNotFound
	}
	return io.NopCloser(strings.NewReader(c)), int64(len(c)), nil
}

func stateOf(r *Registry, name string) catalog.State {
	for _, st := range r.States() {
		if st.Source == name {
			return st
		}
	}
	return catalog.State{}
}

// TestPollRespectsBackoff: a source whose remote fails (at once, or by
// hanging until the timeout) is asked again only when its backoff says so,
// however short its poll interval; a healthy source keeps polling.
func TestPollRespectsBackoff(t *testing.T) {
	for _, c := range []struct {
		name string
		repo *fakeRepo
	}{
		{"fails at once", &fakeRepo{fail: fmt.Errorf("list refs: %w: HTTP 502 Bad Gateway", gitstore.ErrNetwork)}},
		{"hangs", &fakeRepo{hang: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				git := &fakeGit{}
				r := New(Options{gitRepos: git.Repo})
				dead := git.add("dead", c.repo)
				dead.Timeout = 20 * time.Second
				alive := &fakeRepo{}
				alive.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
				c.repo.state = func() catalog.State { return stateOf(r, "dead") }
				ctx, cancel := context.WithCancel(t.Context())
				r.SetSources([]catalog.Source{dead, git.add("alive", alive)})
				done := make(chan error)
				go func() { done <- r.Run(ctx) }()
				time.Sleep(30 * time.Minute)
				cancel()
				<-done

				ls := c.repo.Listings()
				if len(ls) < 5 {
					t.Fatalf("%d attempts in 30 minutes: retries stopped", len(ls))
				}
				for i, l := range ls[1:] {
					prev := ls[i]
					if l.state.Failures == 0 || l.state.NextRetry.IsZero() {
						t.Fatalf("attempt %d began with state %+v: no failure recorded", i+2, l.state)
					}
					if l.at.Before(l.state.NextRetry) {
						t.Fatalf("attempt %d at %s, %s after the previous one, before its retry time %s (failures %d)",
							i+2, l.at.Format(time.TimeOnly), l.at.Sub(prev.at), l.state.NextRetry.Format(time.TimeOnly), l.state.Failures)
					}
				}
				if n := len(alive.Listings()); n < 100 {
					t.Fatalf("the healthy source was listed %d times in 30 minutes at a 5 s poll", n)
				}
				st := stateOf(r, "dead")
				if st.Failures < len(ls)-1 || st.LastResult != "failed" {
					t.Fatalf("state %+v after %d attempts", st, len(ls))
				}
			})
		})
	}
}

// TestHungRemotesDoNotStarveWebhooks: with both slots held by remotes that
// never answer, a webhook-triggered sync of a healthy source runs at once
// (the express slot); once they have failed, they share one slot and a
// healthy source always finds the other.
func TestHungRemotesDoNotStarveWebhooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		git := &fakeGit{}
		r := New(Options{gitRepos: git.Repo, MaxParallelSyncs: 2})
		var grants []string
		r.slots.onGrant = func(name string, c syncClass, k slotKind) {
			grants = append(grants, fmt.Sprintf("%s:%s:%d", name, c, k))
		}
		h1, h2 := &fakeRepo{hang: true}, &fakeRepo{hang: true}
		hung1, hung2 := git.add("hung1", h1), git.add("hung2", h2)
		healthy := &fakeRepo{}
		healthy.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
		good := git.add("good", healthy)
		good.Poll = time.Hour
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r.SetSources([]catalog.Source{hung1, hung2})
		go r.Run(ctx)
		synctest.Wait()
		if h1.Inflight() != 1 || h2.Inflight() != 1 {
			t.Fatalf("hung syncs in flight: %d, %d", h1.Inflight(), h2.Inflight())
		}

		// Configured while both slots hang: an ordinary sync waits...
		r.SetSources([]catalog.Source{hung1, hung2, good})
		synctest.Wait()
		if st := stateOf(r, "good"); st.Attempted || st.Syncing {
			t.Fatalf("good synced in a third slot without being urgent: %+v (grants %v)", st, grants)
		}
		// ...and a push to it does not.
		r.RequestSync("good", catalog.TriggerWebhook)
		synctest.Wait()
		if _, ok := r.Current().Snapshot("good"); !ok || stateOf(r, "good").LastResult != "updated" {
			t.Fatalf("webhook sync of good did not complete while the remotes hang: %+v (grants %v)", stateOf(r, "good"), grants)
		}
		if !stateOf(r, "hung1").Syncing || !stateOf(r, "hung2").Syncing || h1.Inflight()+h2.Inflight() != 2 {
			t.Fatal("the hung syncs are no longer in flight: the test proves nothing")
		}

		// Past the timeout both have failed; from now on they share the
		// failing lane (one slot), retrying, and the other slot is free.
		time.Sleep(61 * time.Second)
		for range 20 {
			healthy.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a"), "b/SKILL.md": testkit.SkillMD("b"), "n": time.Now().String()})
			r.RequestSync("good", catalog.TriggerPoll)
			synctest.Wait()
			if n := h1.Inflight() + h2.Inflight(); n > 1 {
				t.Fatalf("%d failing syncs hold slots at once; the lane is one slot", n)
			}
			if st := stateOf(r, "good"); st.Syncing || st.Commit != healthy.commit {
				t.Fatalf("an ordinary sync of good waited behind failing remotes: %+v", st)
			}
			time.Sleep(17 * time.Second)
		}
		if stateOf(r, "hung1").Failures == 0 || stateOf(r, "hung2").Failures == 0 {
			t.Fatal("the hung remotes never failed")
		}
	})
}

// TestSlotsOrder is the queue's table: which waiter gets which slot.
func TestSlotsOrder(t *testing.T) {
	type req struct {
		name  string
		class syncClass
	}
	cases := []struct {
		name  string
		n     int
		held  []req // granted first, in order, never released
		wait  []req // then asked for, in order
		want  []string
		block []string // still waiting at the end
	}{
		{"failing never take the last slot", 2,
			[]req{{"f1", classFailing}}, []req{{"f2", classFailing}, {"h", classNormal}},
			[]string{"f1:failing:1", "h:normal:0"}, []string{"f2"}},
		{"urgent uses the express slot", 2,
			[]req{{"a", classNormal}, {"b", classNormal}}, []req{{"n", classNormal}, {"u", classUrgent}, {"u2", classUrgent}},
			[]string{"a:normal:0", "b:normal:0", "u:urgent:2"}, []string{"n", "u2"}},
		{"one slot: failing may use it", 1,
			[]req{{"f", classFailing}}, []req{{"u", classUrgent}, {"n", classNormal}},
			[]string{"f:failing:1", "u:urgent:2"}, []string{"n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSlots(c.n)
				var got []string
				s.onGrant = func(name string, cl syncClass, k slotKind) { got = append(got, fmt.Sprintf("%s:%s:%d", name, cl, k)) }
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				for _, q := range c.held {
					if _, err := s.acquire(ctx, q.name, q.class); err != nil {
						t.Fatal(err)
					}
				}
				errs := make(chan error, len(c.wait))
				for _, q := range c.wait {
					go func() {
						_, err := s.acquire(ctx, q.name, q.class)
						errs <- err
					}()
					synctest.Wait()
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("grants %v, want %v", got, c.want)
				}
				s.mu.Lock()
				var waiting []string
				for w := range s.waiting {
					if slices.Contains(c.block, w.name) {
						waiting = append(waiting, w.name)
					}
				}
				s.mu.Unlock()
				if len(waiting) != len(c.block) || len(s.waiting) != len(c.block) {
					t.Fatalf("waiting %v, want %v", waiting, c.block)
				}
				cancel()
				for range c.block {
					if err := <-errs; !errors.Is(err, context.Canceled) && err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}

// TestSyncErrorsScrubbed: whatever a git layer's error holds, the token a
// source presents (plain, base64 as basic auth, URL-encoded, in a URL) and
// control characters reach neither the state nor the log.
func TestSyncErrorsScrubbed(t *testing.T) {
	const token = "tok/S3cret+value="
	pair := base64.StdEncoding.EncodeToString([]byte(gitstore.TokenUser + ":" + token))
	git := &fakeGit{}
	var logs bytes.Buffer
	r := New(Options{gitRepos: git.Repo, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	repo := &fakeRepo{fail: fmt.Errorf("list refs: %w: echoed Basic %s, %s, %s, https://u:%s@h/\x1b[2J\n",
		gitstore.ErrAuth, pair, token, url.QueryEscape(token), url.PathEscape(token))}
	src := git.add("s", repo)
	src.Git.Token = func() (string, error) { return token, nil }
	r.SetSources([]catalog.Source{src})
	err := r.SyncNow(context.Background(), "s")
	if !errors.Is(err, gitstore.ErrAuth) {
		t.Fatalf("SyncNow: %v, want ErrAuth", err)
	}
	st := stateOf(r, "s")
	for what, text := range map[string]string{"state": st.LastError, "log": logs.String(), "error": err.Error()} {
		for _, leak := range []string{token, pair, url.QueryEscape(token), url.PathEscape(token), "\x1b", "\\u001b"} {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds %q: %s", what, leak, text)
			}
		}
	}
	if !strings.Contains(st.LastError, "authentication failed") || !strings.Contains(st.LastError, "<redacted>") {
		t.Fatalf("last_error %q lost what it should say", st.LastError)
	}
}

// TestReconfiguredWhileWaiting: a source reconfigured while its sync waits
// for a slot leaves no waiter behind, and Run still stops.
func TestReconfiguredWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		git := &fakeGit{}
		r := New(Options{gitRepos: git.Repo, MaxParallelSyncs: 2})
		h1, h2, h3 := &fakeRepo{hang: true}, &fakeRepo{hang: true}, &fakeRepo{hang: true}
		s1, s2, s3 := git.add("hung1", h1), git.add("hung2", h2), git.add("hung3", h3)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		r.SetSources([]catalog.Source{s1, s2, s3})
		go func() { done <- r.Run(ctx) }()
		synctest.Wait()
		if n := h1.Inflight() + h2.Inflight() + h3.Inflight(); n != 2 {
			t.Fatalf("%d syncs in flight, want 2 with one waiting", n)
		}
		var waiting string
		for _, st := range r.States() {
			if !st.Syncing {
				waiting = st.Source
			}
		}
		srcs := []catalog.Source{s1, s2, s3}
		for i := range srcs {
			if srcs[i].Name == waiting {
				srcs[i].Timeout = time.Minute // changed: a new run replaces the waiting one
			}
		}
		r.SetSources(srcs)
		synctest.Wait()
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return after its context ended")
		}
		r.slots.mu.Lock()
		defer r.slots.mu.Unlock()
		if len(r.slots.waiting) != 0 || r.slots.busy != 0 || r.slots.express {
			t.Fatalf("slots left: %d waiting, %d busy, express %v", len(r.slots.waiting), r.slots.busy, r.slots.express)
		}
	})
}

// TestRequestsCoalesceWhileASyncRuns: the queue is the one place sync
// requests coalesce. However many arrive while a sync of a source runs,
// exactly one follow-up sync runs after it; none arriving while none runs
// starts nothing.
func TestRequestsCoalesceWhileASyncRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		git := &fakeGit{}
		r := New(Options{gitRepos: git.Repo})
		repo := &fakeRepo{}
		src := git.add("team", repo)
		src.Poll = 0
		repo.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r.SetSources([]catalog.Source{src})
		go r.Run(ctx)
		synctest.Wait()
		if n := len(repo.Listings()); n != 1 {
			t.Fatalf("%d syncs at start, want 1", n)
		}

		gate := make(chan struct{})
		repo.mu.Lock()
		repo.gate = gate
		repo.mu.Unlock()
		r.RequestSync("team", catalog.TriggerPoll)
		synctest.Wait() // the sync waits in its listing
		for _, why := range []catalog.Trigger{catalog.TriggerWebhook, catalog.TriggerPoll, catalog.TriggerRetry, catalog.TriggerChanged} {
			for range 25 {
				r.RequestSync("team", why)
			}
		}
		gate <- struct{}{} // the running sync ends
		gate <- struct{}{} // the one follow-up
		synctest.Wait()
		if n := len(repo.Listings()); n != 3 {
			t.Fatalf("100 requests during a sync ran %d syncs after it, want exactly 1", n-2)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(repo.Listings()); n != 3 {
			t.Fatalf("syncs ran without requests: %d listings", n)
		}
	})
}
