package registry

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/store"
)

// TestShutdownDuringSyncRecordsNothing: a graceful shutdown that stops a
// sync in flight (a webhook's, say, asked for just before the stop) is not
// an outcome of the source. Nothing is recorded or stored for it: after a
// restart the source's state is its last real sync, not a failure that
// never happened ("failed ... context canceled").
func TestShutdownDuringSyncRecordsNothing(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), store.FileName)
	st, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	git := &fakeGit{}
	repo := &fakeRepo{}
	src := git.add("team", repo)
	repo.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
	src.Poll = 0
	r := New(Options{gitRepos: git.Repo, Store: st})
	r.SetSources([]catalog.Source{src})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	testkit.WaitUntil(t, "the first sync", func() bool { return stateOf(r, "team").LastResult == "updated" })
	want := stateOf(r, "team")

	repo.mu.Lock()
	repo.hang = true // the next listing waits until its context ends
	repo.mu.Unlock()
	r.RequestSync("team", catalog.TriggerWebhook)
	testkit.WaitUntil(t, "the sync to wait in its listing", func() bool { return repo.Inflight() == 1 })
	cancel()
	<-done

	check := func(when string, got catalog.State) {
		t.Helper()
		if got.LastResult != "updated" || got.LastError != "" || got.Failures != 0 || !got.LastErrorAt.IsZero() || got.Syncing ||
			!got.LastStart.Equal(want.LastStart) || !got.LastEnd.Equal(want.LastEnd) {
			t.Errorf("%s: state %+v, want the last real sync's %+v", when, got, want)
		}
	}
	check("after the shutdown", stateOf(r, "team"))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	ps, err := st2.Load()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ps {
		if p.State.Source != "team" {
			continue
		}
		found = true
		if strings.Contains(p.State.LastError, "context canceled") {
			t.Errorf("the restart finds a failure that never happened: %q", p.State.LastError)
		}
		check("after the restart", p.State)
	}
	if !found {
		t.Fatal("nothing stored for the source")
	}
}

// closedConnRepo is a remote whose listing waits until its context ends
// and then fails as a connection the shutdown closed does: with a
// network error, not context.Canceled.
type closedConnRepo struct {
	*fakeRepo
	entered chan struct{}
}

func (f closedConnRepo) ListRemote(ctx context.Context, _ gitstore.Auth) (*gitstore.RemoteRefs, error) {
	close(f.entered)
	<-ctx.Done()
	return nil, fmt.Errorf("list refs %s: %w: use of closed network connection", f.url, gitstore.ErrNetwork)
}

// TestShutdownNetworkErrorRecordsNothing: a sync the registry's shutdown
// stopped is abandoned whatever error it ends with: here the remote's
// connection, closed by the shutdown, fails with a network error.
func TestShutdownNetworkErrorRecordsNothing(t *testing.T) {
	git := &fakeGit{}
	src := git.add("team", &fakeRepo{})
	repo := closedConnRepo{fakeRepo: git.repos[src.Git.Repo.URL()], entered: make(chan struct{})}
	st := &countStore{}
	r := New(Options{Store: st, gitRepos: func(string) (GitRepo, error) { return repo, nil }})
	r.SetSources([]catalog.Source{src})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.SyncNow(ctx, "team") }()
	<-repo.entered
	cancel()
	<-done
	if s := stateOf(r, "team"); s.LastResult != "" || s.Failures != 0 || s.LastError != "" || s.Syncing {
		t.Errorf("state %+v, want nothing recorded", s)
	}
	if n := st.writes(); n != 0 {
		t.Errorf("%d store writes for a sync the shutdown stopped", n)
	}
}
