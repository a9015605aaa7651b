package gitstore

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
)

// TestErrorsNameTheOperationOnce: each Repo operation's error names the
// operation and the repository, once, so that a caller adds only what
// the repository does not know. (It read "list refs of URL: list refs
// URL: network error" once the registry had added its own.)
func TestErrorsNameTheOperationOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"skills/a/SKILL.md": "---\nname: a\n---\n"})
	commit := f.remote.Commit("one")
	f.remote.Push("main")
	url := f.repo.URL()
	ctx := context.Background()

	check := func(t *testing.T, err error, want error, op string) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%v, want %v", err, want)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, op) {
			t.Errorf("%q does not start with %q", msg, op)
		}
		if n := strings.Count(msg, url); n != 1 {
			t.Errorf("%q names the repository %d times, want once", msg, n)
		}
		verb, _, _ := strings.Cut(op, " ")
		if n := strings.Count(msg, verb+" "); n != 1 {
			t.Errorf("%q names %q %d times, want once", msg, verb, n)
		}
	}

	t.Run("list refs", func(t *testing.T) {
		f.srv.SetFailure(gittest.Failure{Status: http.StatusBadGateway})
		defer f.srv.SetFailure(gittest.Failure{})
		_, err := f.repo.ListRemote(ctx, Auth{})
		check(t, err, ErrNetwork, "list refs "+url+": ")
	})
	t.Run("fetch", func(t *testing.T) {
		f.srv.SetFailure(gittest.Failure{Status: http.StatusBadGateway, FetchOnly: true})
		defer f.srv.SetFailure(gittest.Failure{})
		err := f.repo.Fetch(ctx, Resolved{Commit: commit}, Auth{})
		check(t, err, ErrNetwork, "fetch "+commit+" from "+url+": ")
	})
	t.Run("fetch waiting for the lock", func(t *testing.T) {
		if err := f.repo.lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer f.repo.unlock()
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		err := f.repo.Fetch(cancelled, Resolved{Commit: commit}, Auth{})
		check(t, err, context.Canceled, "fetch "+commit+" from "+url+": ")
	})
	t.Run("walk", func(t *testing.T) {
		if err := f.repo.Fetch(ctx, Resolved{Commit: commit}, Auth{}); err != nil {
			t.Fatal(err)
		}
		_, err := f.repo.Walk(commit, "missing")
		check(t, err, ErrPathNotFound, "walk "+commit+":missing in "+url+": ")
	})
	t.Run("after close", func(t *testing.T) {
		f.pool.Close()
		_, err := f.repo.ListRemote(ctx, Auth{})
		check(t, err, ErrClosed, "list refs "+url+": ")
		err = f.repo.Prune(ctx, nil)
		check(t, err, ErrClosed, "prune "+url+": ")
	})
}
