package registry

import (
	"context"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
)

// TestWebhookSyncBesideHungRemotes is the end-to-end case: two remotes that
// accept connections and never answer hold both sync slots (with a timeout
// far beyond the test); a push to a healthy source on a real loopback git
// server, announced as a webhook would, is served while both hung syncs are
// still in flight.
func TestWebhookSyncBesideHungRemotes(t *testing.T) {
	f := newGitFixture(t, Options{MaxParallelSyncs: 2})
	r := f.reg
	h1, h2 := gittest.NewHungServer(t), gittest.NewHungServer(t)
	hung := func(name, url string) catalog.Source {
		return catalog.Source{Name: name, Kind: catalog.KindGit, Timeout: time.Hour, Git: &catalog.GitSource{Repo: repoOf(url)}}
	}
	srcs := []catalog.Source{hung("hung1", h1.URL()), hung("hung2", h2.URL())}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	r.SetSources(srcs)
	for _, h := range []*gittest.HungServer{h1, h2} {
		select {
		case <-h.Accepted():
		case <-time.After(time.Minute):
			t.Fatal("a hung remote was never asked")
		}
	}

	good := f.source("good", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")
	r.SetSources(append(srcs, good)) // an ordinary sync: it waits for a slot
	f.remote.WriteFiles(map[string]string{"skills/c/SKILL.md": testkit.SkillMD("c")})
	f.remote.Commit("add c")
	f.remote.Push("main")
	r.RequestSync("good", catalog.TriggerWebhook)

	deadline := time.Now().Add(time.Minute) // a guard against hanging, not a measurement
	for stateOf(r, "good").Commit != f.remote.Head() {
		if time.Now().After(deadline) {
			t.Fatalf("the pushed commit was not served: %+v", stateOf(r, "good"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := skillNames(r.Current(), "good"); got != "a,b,c" {
		t.Fatalf("good serves %q", got)
	}
	for _, name := range []string{"hung1", "hung2"} {
		if st := stateOf(r, name); !st.Syncing || st.Attempted {
			t.Fatalf("%s is not in its first sync any more: %+v", name, st)
		}
	}
}
