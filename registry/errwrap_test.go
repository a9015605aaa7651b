package registry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
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
