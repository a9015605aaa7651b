package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
)

// TestGitErrorNamesEachStepOnce: a failed sync's error names the failing
// operation and the repository once: gitstore's error already says "list
// refs <url>", and the registry adds nothing it repeats. (It read "list
// refs of URL: list refs URL: network error".)
func TestGitErrorNamesEachStepOnce(t *testing.T) {
	f := newGitFixture(t, Options{})
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")})
	f.srv.SetFailure(gittest.Failure{Status: http.StatusBadGateway})
	err := f.reg.SyncNow(context.Background(), "s")
	if !errors.Is(err, gitstore.ErrNetwork) {
		t.Fatalf("sync against a failing server: %v, want ErrNetwork", err)
	}
	msg := err.Error()
	if n := strings.Count(msg, "list refs"); n != 1 {
		t.Errorf("%q says \"list refs\" %d times, want once", msg, n)
	}
	if n := strings.Count(msg, f.remote.URL()); n != 1 {
		t.Errorf("%q names the repository %d times, want once", msg, n)
	}
}

// namingResolver fails as a release resolver does: naming the repository.
type namingResolver struct{}

func (namingResolver) LatestTag(_ context.Context, repo gitref.Repo) (string, error) {
	return "", fmt.Errorf("latest release of %s: %w", repo, ErrNoRelease)
}

// TestSyncErrorsWrapOnce: each layer of a sync's error adds only what the
// layer below lacks: the pin, the repository and the token's origin are
// each named once.
func TestSyncErrorsWrapOnce(t *testing.T) {
	for _, c := range []struct {
		name  string
		pin   gitref.Pin
		token func() (string, error)
		once  []string // each said exactly once
	}{
		{name: "missing branch", pin: gitref.Pin{Kind: gitref.Branch, Value: "x"}, once: []string{"branch:x", "ref not found", "resolve"}},
		{name: "no release", pin: gitref.Pin{Kind: gitref.Release, Value: "latest"}, once: []string{"release:latest", "no published release", "resolve"}},
		{name: "token file", pin: gitref.Pin{Kind: gitref.Branch, Value: "main"},
			token: func() (string, error) { return "", fmt.Errorf("token file: %w", fs.ErrNotExist) }, once: []string{"token", "source s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			git := &fakeGit{}
			repo := &fakeRepo{}
			repo.setFiles(map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
			src := git.add("s", repo)
			src.Git.Pin, src.Git.Token = c.pin, c.token
			r := New(Options{gitRepos: git.Repo, Releases: namingResolver{}})
			r.SetSources([]catalog.Source{src})
			err := r.SyncNow(context.Background(), "s")
			if err == nil {
				t.Fatal("sync succeeded")
			}
			msg := err.Error()
			for _, w := range append(c.once, repo.url) {
				if w == repo.url && c.token != nil {
					continue // failed before the repository was asked
				}
				if n := strings.Count(msg, w); n != 1 {
					t.Errorf("%q says %q %d times, want once", msg, w, n)
				}
			}
		})
	}
}
