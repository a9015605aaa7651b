package registry

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitstore"
)

// TestRefusedTokenRetriedOnce: a git source whose token can be replaced
// (GitSource.Refused) is told the token the remote refused and retried once
// with the next one, in the same sync; refused again, it stalls as
// auth_refused. A source without Refused (a token of its own auth or of
// github.token_env), or whose Token gives the same token again, is not
// retried.
func TestRefusedTokenRetriedOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		refused  bool
		same     bool // Token returns the refused token again
		listings int
	}{
		{"replaceable", true, false, 2},
		{"not replaceable", false, false, 1},
		{"replaced by itself", true, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				git := &fakeGit{}
				r := New(Options{gitRepos: git.Repo})
				repo := &fakeRepo{fail: fmt.Errorf("list refs: %w: HTTP 401 Unauthorized", gitstore.ErrAuth)}
				src := git.add("team", repo)
				src.Poll = 0
				var mu sync.Mutex
				n := 0
				var told []string
				src.Git.Token = func() (string, error) {
					mu.Lock()
					defer mu.Unlock()
					if !c.same {
						n++
					}
					return fmt.Sprintf("token-%d", n), nil
				}
				if c.refused {
					src.Git.Refused = func(tok string) {
						mu.Lock()
						defer mu.Unlock()
						told = append(told, tok)
					}
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				r.SetSources([]catalog.Source{src})
				go r.Run(ctx)
				time.Sleep(time.Minute)
				synctest.Wait()
				if got := len(repo.Listings()); got != c.listings {
					t.Fatalf("%d listings in the sync, want %d", got, c.listings)
				}
				mu.Lock()
				defer mu.Unlock()
				want := []string(nil)
				if c.refused {
					want = []string{"token-1"}
					if c.same {
						want = []string{"token-0"}
					}
				}
				if !slices.Equal(told, want) {
					t.Fatalf("Refused told %q, want %q", told, want)
				}
				if st := stateOf(r, "team"); st.Stalled != catalog.StallAuthRefused {
					t.Fatalf("state %+v, want stalled auth_refused", st)
				}
			})
		})
	}
}
