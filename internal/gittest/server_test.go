package gittest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// cloneCLI clones url with the git CLI over HTTP and returns the clone's
// directory and git's error output.
func cloneCLI(t *testing.T, url string, extra ...string) (string, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	args := append([]string{"clone", "--quiet"}, extra...)
	cmd := exec.Command("git", append(args, url, dir)...)
	cmd.Env = append(os.Environ(), Env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return dir, errors.New(strings.TrimSpace(string(out)))
	}
	return dir, nil
}

func TestServeCommitsOverSmartHTTP(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	r := s.CreateRepo("skills")
	r.WriteFiles(map[string]string{"a/SKILL.md": "hello\n", "b.txt": "b\n"})
	r.Symlink("link", "b.txt")
	first := r.Commit("first")
	r.Gitlink("vendor/sub", first)
	second := r.Commit("second")
	r.Push("main")
	r.Tag("v1.0.0", true)

	if len(first) != 40 || first == second {
		t.Fatalf("commit ids %q %q", first, second)
	}
	dir, err := cloneCLI(t, r.URL())
	if err != nil {
		t.Fatalf("clone: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "a", "SKILL.md"))
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("cloned file = %q, %v", got, err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "link")); err != nil || target != "b.txt" {
		t.Fatalf("symlink = %q, %v", target, err)
	}
	ls := r.Git("ls-tree", "HEAD", "vendor/sub")
	if !strings.HasPrefix(ls, "160000 commit "+first) {
		t.Fatalf("gitlink entry = %q", ls)
	}
	if tag := r.GitBare("cat-file", "-t", "v1.0.0"); tag != "tag" {
		t.Fatalf("annotated tag type = %q", tag)
	}
	c := s.Requests()
	if c.RefListings != 1 || c.Fetches < 1 || c.FetchBytes == 0 {
		t.Fatalf("counts = %+v", c)
	}
	s.ResetRequests()
	if c := s.Requests(); c != (Counts{}) {
		t.Fatalf("counts after reset = %+v", c)
	}
}

func TestDeterministicCommitIDs(t *testing.T) {
	t.Parallel()
	var ids []string
	for range 2 {
		s := NewServer(t)
		r := s.CreateRepo("x")
		r.WriteFiles(map[string]string{"f": "1"})
		ids = append(ids, r.Commit("one"))
	}
	if ids[0] != ids[1] {
		t.Fatalf("same history gave %q and %q", ids[0], ids[1])
	}
}

func TestForcePushDeleteRefAndDelete(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	r := s.CreateRepo("x")
	r.WriteFiles(map[string]string{"f": "1"})
	base := r.Commit("one")
	r.WriteFiles(map[string]string{"f": "2"})
	r.Commit("two")
	r.Push("main")
	r.Reset(base)
	r.WriteFiles(map[string]string{"f": "3"})
	rewritten := r.Commit("three")
	r.ForcePush("main")
	if got := r.GitBare("rev-parse", "refs/heads/main"); got != rewritten {
		t.Fatalf("main = %s, want %s", got, rewritten)
	}
	r.Branch("dev")
	r.Push("dev")
	r.DeleteRef("refs/heads/dev")
	if out, err := r.git("-C", r.bare, "rev-parse", "--verify", "--quiet", "refs/heads/dev"); err == nil {
		t.Fatalf("dev still exists: %s", out)
	}
	r.Delete()
	res, err := http.Get(r.URL() + "/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("vanished repository answered %d", res.StatusCode)
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	r := s.CreateRepo("x")
	r.Commit("one")
	r.Push("main")
	refs := r.URL() + "/info/refs?service=git-upload-pack"

	status := func(req *http.Request) int {
		t.Helper()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	get := func() *http.Request {
		req, _ := http.NewRequest(http.MethodGet, refs, nil)
		return req
	}

	s.SetFailure(Failure{Status: http.StatusInternalServerError})
	if got := status(get()); got != 500 {
		t.Fatalf("Status failure answered %d", got)
	}
	s.SetFailure(Failure{Status: 500, FetchOnly: true})
	if got := status(get()); got != 200 {
		t.Fatalf("FetchOnly failure broke the listing: %d", got)
	}

	s.SetFailure(Failure{Status: 503, Count: 2})
	if a, b, c := status(get()), status(get()), status(get()); a != 503 || b != 503 || c != 200 {
		t.Fatalf("Count: 2 answered %d, %d, %d", a, b, c)
	}

	s.SetFailure(Failure{Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := http.DefaultClient.Do(get().WithContext(ctx))
		done <- err
	}()
	cancel() // the server must let go when the client does
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("hanging request ended with %v", err)
	}
	s.SetFailure(Failure{})

	s.RequireToken("s3cret")
	if got := status(get()); got != http.StatusUnauthorized {
		t.Fatalf("no token answered %d", got)
	}
	req := get()
	req.SetBasicAuth("x-access-token", "wrong")
	if got := status(req); got != http.StatusForbidden {
		t.Fatalf("wrong token answered %d", got)
	}
	req = get()
	req.SetBasicAuth("x-access-token", "s3cret")
	if got := status(req); got != http.StatusOK {
		t.Fatalf("right token answered %d", got)
	}
	s.RequireToken("")

	// A credential check is asked at each request: what it stops
	// accepting is refused from then on.
	accepted := map[string]bool{"ghs_live": true}
	var mu sync.Mutex
	var users, paths []string
	s.RequireCredential(func(path, user, password string) bool {
		mu.Lock()
		defer mu.Unlock()
		users, paths = append(users, user), append(paths, path)
		return accepted[password]
	})
	if got := status(get()); got != http.StatusUnauthorized {
		t.Fatalf("no credential answered %d", got)
	}
	req = get()
	req.SetBasicAuth("x-access-token", "ghs_live")
	if got := status(req); got != http.StatusOK {
		t.Fatalf("accepted credential answered %d", got)
	}
	mu.Lock()
	accepted["ghs_live"] = false
	mu.Unlock()
	req = get()
	req.SetBasicAuth("x-access-token", "ghs_live")
	if got := status(req); got != http.StatusForbidden {
		t.Fatalf("a credential no longer accepted answered %d", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(users) != 2 || users[0] != "x-access-token" || paths[0] != "/x.git/info/refs" {
		t.Fatalf("check saw users %q at %q, want x-access-token twice at /x.git/info/refs", users, paths)
	}
}

// TestCloseReleasesHangingRequests checks that Close does not wait for a
// client that never gives up.
func TestCloseReleasesHangingRequests(t *testing.T) {
	t.Parallel()
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := s.CreateRepo("x")
	s.SetFailure(Failure{Hang: true})
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err := http.Get(r.URL() + "/info/refs?service=git-upload-pack")
		if err == nil {
			res.Body.Close()
		}
	}()
	// Wait until the request is in the handler; the count is taken first.
	for s.Requests().RefListings == 0 {
		time.Sleep(time.Millisecond)
	}
	s.Close()
	<-done
}

func TestStartHelpersPanicWithoutTB(t *testing.T) {
	t.Parallel()
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.CreateRepo("x")
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate CreateRepo did not panic")
		}
	}()
	s.CreateRepo("x")
}
