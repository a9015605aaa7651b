package registry

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/testkit"
)

// TestStalledWaitsForAChange: a sync that fails because of the
// configuration or the remote's answer (here the pinned branch is
// missing) is not retried in a loop. A source without polling is tried
// again only when a webhook names it or its configuration changes.
func TestStalledWaitsForAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		git := &fakeGit{}
		r := New(Options{gitRepos: git.Repo})
		repo := &fakeRepo{fail: fmt.Errorf("resolve branch:main: %w: branch \"main\"", gitstore.ErrRefNotFound)}
		src := git.add("team", repo)
		src.Poll = 0
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r.SetSources([]catalog.Source{src})
		go r.Run(ctx)
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(repo.Listings()); n != 1 {
			t.Fatalf("%d attempts in an hour; a stalled source must not be retried in a loop", n)
		}
		st := stateOf(r, "team")
		if st.LastResult != catalog.ResultStalled || st.Stalled != catalog.StallRefNotFound || st.Hint == "" || !st.NextRetry.IsZero() || st.Failures != 1 {
			t.Fatalf("state %+v, want stalled (ref_not_found) with a hint and no retry", st)
		}

		r.RequestSync("team", catalog.TriggerWebhook)
		synctest.Wait()
		if n := len(repo.Listings()); n != 2 {
			t.Fatalf("a webhook naming a stalled source: %d attempts, want 2", n)
		}

		changed := src
		changed.Timeout = time.Minute
		r.SetSources([]catalog.Source{changed})
		synctest.Wait()
		before := len(repo.Listings())
		if before < 3 {
			t.Fatalf("a configuration change did not try the stalled source again (%d attempts)", before)
		}

		// Mended upstream: the next webhook serves it and clears the stall.
		repo.mu.Lock()
		repo.fail = nil
		repo.mu.Unlock()
		repo.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
		r.RequestSync("team", catalog.TriggerWebhook)
		synctest.Wait()
		if st := stateOf(r, "team"); st.LastResult != catalog.ResultUpdated || st.Stalled != "" || st.Hint != "" || st.Failures != 0 {
			t.Fatalf("after the fix: %+v", st)
		}
	})
}

// TestStalledRetriedOncePerPoll: a stalled source with a poll interval is
// tried again at its polls, not at the backoff's pace, which begins at
// seconds.
func TestStalledRetriedOncePerPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		git := &fakeGit{}
		r := New(Options{gitRepos: git.Repo})
		repo := &fakeRepo{fail: fmt.Errorf("list refs: %w: HTTP 401 Unauthorized", gitstore.ErrAuth)}
		src := git.add("team", repo)
		src.Poll = 5 * time.Minute
		ctx, cancel := context.WithCancel(t.Context())
		r.SetSources([]catalog.Source{src})
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		time.Sleep(time.Hour)
		cancel()
		<-done

		ls := repo.Listings()
		// The first sync, then one per poll (each 4.5 to 5.5 minutes).
		if len(ls) < 10 || len(ls) > 15 {
			t.Fatalf("%d attempts in an hour at a 5-minute poll", len(ls))
		}
		for i := 1; i < len(ls); i++ {
			if gap := ls[i].at.Sub(ls[i-1].at); gap < 4*time.Minute {
				t.Fatalf("attempt %d came %s after the one before: retried, not polled", i+1, gap)
			}
		}
		if st := stateOf(r, "team"); st.Stalled != catalog.StallAuthRefused || st.Failures != 1 { // the same stall again is not a new failure
			t.Fatalf("state %+v after %d attempts", st, len(ls))
		}
	})
}

// TestStallReason is the table of error classes.
func TestStallReason(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want catalog.StallReason
	}{
		{name: "invalid pin", err: fmt.Errorf("source s: %w: bad", gitref.ErrInvalidPin), want: catalog.StallInvalidPin},
		{name: "invalid repository", err: fmt.Errorf("source s: %w", gitstore.ErrInvalidURL), want: catalog.StallInvalidRepo},
		{name: "ref not found", err: fmt.Errorf("resolve: %w", gitstore.ErrRefNotFound), want: catalog.StallRefNotFound},
		{name: "no release", err: fmt.Errorf("resolve release: %w", ErrNoRelease), want: catalog.StallRefNotFound},
		{name: "repository not found", err: fmt.Errorf("list refs: %w", gitstore.ErrRepoNotFound), want: catalog.StallRepoNotFound},
		{name: "auth refused", err: fmt.Errorf("list refs: %w", gitstore.ErrAuth), want: catalog.StallAuthRefused},
		{name: "ssh host key", err: fmt.Errorf("list refs: %w", gitstore.ErrHostKey), want: catalog.StallHostKey},
		{name: "ssh key unusable", err: fmt.Errorf("list refs: %w", gitstore.ErrSSHKey), want: ""},
		{name: "subpath missing", err: fmt.Errorf("walk: %w", gitstore.ErrPathNotFound), want: catalog.StallPathMissing},
		{name: "directory missing", err: fmt.Errorf("source s: %w", errDirMissing), want: catalog.StallPathMissing},
		{name: "network", err: fmt.Errorf("fetch: %w", gitstore.ErrNetwork), want: ""},
		{name: "disk full", err: fmt.Errorf("fetch: %w", gitstore.ErrStorage), want: ""},
		{name: "timeout", err: fmt.Errorf("list refs: %w", context.DeadlineExceeded), want: ""},
		{name: "timeout while refused", err: fmt.Errorf("%w: %w", gitstore.ErrAuth, context.DeadlineExceeded), want: ""},
		{name: "other", err: errors.New("boom"), want: ""},
	} {
		if got := stallReason(c.err); got != c.want {
			t.Errorf("%s: stallReason(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}

// TestDirSourceMissingStalls: a directory source whose directory does not
// exist is stalled (path_missing), and served once it appears.
func TestDirSourceMissingStalls(t *testing.T) {
	root := filepath.Join(t.TempDir(), "skills")
	r := New(Options{})
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	if err := r.SyncNow(context.Background(), "local"); !errors.Is(err, errDirMissing) {
		t.Fatalf("sync of a missing directory: %v", err)
	}
	if st := stateOf(r, "local"); st.LastResult != catalog.ResultStalled || st.Stalled != catalog.StallPathMissing || !st.NextRetry.IsZero() {
		t.Fatalf("state %+v, want stalled (path_missing)", st)
	}
	testkit.WriteFiles(t, root, map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
	if err := r.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(r, "local"); st.LastResult != catalog.ResultUpdated || st.Stalled != "" || st.Skills != 1 {
		t.Fatalf("state %+v after the directory appeared", st)
	}
}

// TestStalledHintSaysWhen: the hint of a source without polling does not
// promise a poll.
func TestStalledHintSaysWhen(t *testing.T) {
	for _, poll := range []time.Duration{0, time.Minute} {
		git := &fakeGit{}
		r := New(Options{gitRepos: git.Repo})
		src := git.add("team", &fakeRepo{fail: fmt.Errorf("list refs: %w", gitstore.ErrAuth)})
		src.Poll = poll
		r.SetSources([]catalog.Source{src})
		_ = r.SyncNow(context.Background(), "team")
		hint := stateOf(r, "team").Hint
		if strings.Contains(hint, "poll") != (poll > 0) || !strings.Contains(hint, "webhook") {
			t.Errorf("poll %v: hint %q", poll, hint)
		}
	}
}

// TestReloadRetriesStalled: a reload with the same configuration tries a
// stalled source again (an operator mended its token file or access and
// reloaded), even one without polling.
func TestReloadRetriesStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		git := &fakeGit{}
		r := New(Options{gitRepos: git.Repo})
		repo := &fakeRepo{fail: fmt.Errorf("list refs: %w: HTTP 401 Unauthorized", gitstore.ErrAuth)}
		src := git.add("team", repo)
		src.Poll = 0
		healthy := &fakeRepo{}
		healthy.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
		other := git.add("other", healthy)
		other.Poll = 0
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r.SetSources([]catalog.Source{src, other})
		go r.Run(ctx)
		synctest.Wait()
		if s := stateOf(r, "team"); s.LastResult != catalog.ResultStalled {
			t.Fatalf("state %+v, want stalled", s)
		}

		repo.mu.Lock()
		repo.fail = nil
		repo.mu.Unlock()
		repo.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
		r.SetSources([]catalog.Source{src, other})
		synctest.Wait()
		if n := len(repo.Listings()); n != 2 {
			t.Fatalf("%d attempts after a reload, want 2", n)
		}
		if s := stateOf(r, "team"); s.LastResult != catalog.ResultUpdated || s.Stalled != "" {
			t.Fatalf("state %+v after the reload", s)
		}
		if n := len(healthy.Listings()); n != 1 {
			t.Errorf("a healthy unchanged source was synced %d times, want once: a reload leaves it be", n)
		}
	})
}
