package gitstore

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/gittest"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	const token = "tok-s3cret-123"
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"v": "1"})
	commit := f.remote.Commit("one")
	f.remote.Push("main")
	f.srv.RequireToken(token)
	ctx := context.Background()

	for _, auth := range []Auth{{}, {Token: "wrong-" + token}} {
		_, err := f.repo.ListRemote(ctx, auth)
		if !errors.Is(err, ErrAuth) {
			t.Fatalf("ListRemote with %v: %v, want ErrAuth", auth, err)
		}
		if strings.Contains(err.Error(), token) {
			t.Fatalf("error leaks the token: %v", err)
		}
		err = f.repo.Fetch(ctx, Resolved{Commit: commit}, auth)
		if !errors.Is(err, ErrAuth) || strings.Contains(err.Error(), token) {
			t.Fatalf("Fetch with %v: %v, want ErrAuth without the token", auth, err)
		}
	}

	auth := Auth{Token: token}
	refs, err := f.repo.ListRemote(ctx, auth)
	if err != nil {
		t.Fatal(err)
	}
	res, err := refs.Resolve(gitref.Pin{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.repo.Fetch(ctx, res, auth); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, f.repo, commit, ""); got["v"] != "1" {
		t.Fatalf("snapshot: %v", got)
	}
	// Nothing on disk holds the token.
	err = filepath.WalkDir(f.repo.Dir(), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), token) {
			t.Errorf("%s holds the token", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestServerError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"v": "1"})
	commit := f.remote.Commit("one")
	f.remote.Push("main")
	ctx := context.Background()

	f.srv.SetFailure(gittest.Failure{Status: http.StatusInternalServerError})
	if _, err := f.repo.ListRemote(ctx, Auth{}); !errors.Is(err, ErrNetwork) {
		t.Fatalf("ListRemote against a 500: %v, want ErrNetwork", err)
	}
	f.srv.SetFailure(gittest.Failure{Status: http.StatusBadGateway, FetchOnly: true})
	if err := f.repo.Fetch(ctx, Resolved{Commit: commit}, Auth{}); !errors.Is(err, ErrNetwork) {
		t.Fatalf("Fetch against a 502: %v, want ErrNetwork", err)
	}
	if f.repo.HasCommit(commit) {
		t.Fatal("a failed fetch left the commit held")
	}
	assertNoTempFiles(t, f.repo)

	f.srv.SetFailure(gittest.Failure{})
	if err := f.repo.Fetch(ctx, Resolved{Commit: commit}, Auth{}); err != nil {
		t.Fatalf("Fetch after the server recovered: %v", err)
	}
}

func TestServerHangs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"v": "1"})
	commit := f.remote.Commit("one")
	f.remote.Push("main")

	// The server never answers, so the deadline always wins, however
	// slow the machine: the outcome does not depend on timing.
	f.srv.SetFailure(gittest.Failure{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := f.repo.ListRemote(ctx, Auth{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ListRemote against a hanging server: %v, want DeadlineExceeded", err)
	}

	f.srv.SetFailure(gittest.Failure{Hang: true, FetchOnly: true})
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := f.repo.Fetch(ctx, Resolved{Commit: commit}, Auth{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch against a hanging server: %v, want DeadlineExceeded", err)
	}
	assertNoTempFiles(t, f.repo)

	// A cancelled caller does not wait for the repository lock forever.
	if err := f.repo.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	err := f.repo.Fetch(ctx, Resolved{Commit: commit}, Auth{})
	f.repo.unlock()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch waiting for a held lock with a cancelled context: %v", err)
	}
}

func TestPackTooLarge(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("big")
	remote.WriteFiles(bigTree(50, "x"))
	commit := remote.Commit("one")
	remote.Push("main")
	pool, err := NewPool(t.TempDir(), PoolOptions{MaxPackBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	repo, err := pool.Repo(remote.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Fetch(context.Background(), Resolved{Commit: commit}, Auth{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Fetch of a pack over the limit: %v, want ErrTooLarge", err)
	}
	assertNoTempFiles(t, repo)
}

func TestClosedPool(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.pool.Close()
	if _, err := f.pool.Repo(f.remote.URL()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Repo after Close: %v", err)
	}
	if _, err := f.repo.ListRemote(context.Background(), Auth{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("ListRemote after Close: %v", err)
	}
}

func assertNoTempFiles(t *testing.T, r *Repo) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(r.Dir(), "objects", "pack"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "tmp_") {
			t.Errorf("left behind %s", e.Name())
		}
	}
}

// TestFetchRetriesWithAFreshListing checks the shortcut that lets a Fetch
// reuse the capabilities of the listing just taken: when its request
// fails, the Fetch lists again and retries once.
func TestFetchRetriesWithAFreshListing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"v": "1"})
	f.remote.Commit("one")
	f.remote.Push("main")
	res := resolve(t, f.repo, gitref.Pin{})
	f.srv.ResetRequests()
	f.srv.SetFailure(gittest.Failure{Status: http.StatusBadGateway, FetchOnly: true, Count: 1})
	if err := f.repo.Fetch(context.Background(), res, Auth{}); err != nil {
		t.Fatalf("Fetch with one failing request: %v", err)
	}
	if c := f.srv.Requests(); c.RefListings != 1 || c.Fetches != 2 {
		t.Fatalf("requests: %+v, want the failed fetch, a listing and a fetch", c)
	}
}

func TestEmptyRemote(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // created, never pushed to
	if _, err := f.repo.ListRemote(context.Background(), Auth{}); !errors.Is(err, ErrRefNotFound) {
		t.Fatalf("ListRemote of an empty repository: %v, want ErrRefNotFound", err)
	}
}

// TestHostileRemoteErrors: a remote that echoes the Authorization header
// (base64 and decoded) in its reason phrase and body, with control
// characters, must leave no spelling of the token, no control character
// and none of its body in the errors ListRemote and Fetch return; the
// status stays, and the sentinel.
func TestHostileRemoteErrors(t *testing.T) {
	t.Parallel()
	const token = "tok-S3cret/with+chars=="
	for _, c := range []struct {
		status int
		want   error
	}{
		{http.StatusUnauthorized, ErrAuth},
		{http.StatusForbidden, ErrAuth},
		{http.StatusNotFound, ErrRepoNotFound},
		{http.StatusInternalServerError, ErrNetwork},
		{http.StatusTeapot, ErrNetwork},
	} {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			srv := gittest.NewEchoServer(t, c.status)
			repo, err := newPool(t, t.TempDir()).Repo(srv.URL() + "/skills.git")
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			auth := Auth{Token: token}
			_, lerr := repo.ListRemote(ctx, auth)
			ferr := repo.Fetch(ctx, Resolved{Commit: strings.Repeat("a", 40)}, auth)
			for _, err := range []error{lerr, ferr} {
				if !errors.Is(err, c.want) {
					t.Fatalf("error %v, want %v", err, c.want)
				}
				msg := err.Error()
				pair := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
				for _, leak := range []string{token, pair, "x-access-token:", "Bad credentials", "script", "\x1b", "\x00", "\n"} {
					if strings.Contains(msg, leak) {
						t.Fatalf("error %q holds %q", msg, leak)
					}
				}
				code := strconv.Itoa(c.status)
				if !strings.Contains(msg, "HTTP "+code) && !strings.Contains(msg, "status code: "+code) && c.status != http.StatusNotFound {
					t.Fatalf("error %q does not say the status", msg)
				}
				if len(msg) > 600 {
					t.Fatalf("error of %d bytes", len(msg))
				}
			}
			if srv.Requests() == 0 {
				t.Fatal("the remote was never asked")
			}
		})
	}
}
