// Package gittest runs a real smart-HTTP git server on loopback for tests
// and benchmarks: `git http-backend` behind net/http/cgi in an
// httptest.Server, with helpers that build repositories through the git CLI
// in scratch working clones. Tests exercise the same protocol a hosted git
// service speaks, not a mock of it.
//
// Every git command this package runs sets GIT_CONFIG_GLOBAL=/dev/null and
// GIT_CONFIG_NOSYSTEM=1 itself, so the developer's configuration never leaks
// into a test; tests that run git themselves add Env to the command's
// environment.
package gittest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Counts is the number of requests the server has received since it
// started (or since ResetRequests), by kind. Failed requests count too.
type Counts struct {
	// RefListings is the number of GET info/refs?service=git-upload-pack.
	RefListings int64
	// Fetches is the number of POST git-upload-pack (a negotiation that
	// may send a pack).
	Fetches int64
	// FetchBytes is the number of response bytes sent by those POSTs:
	// roughly the size of the packs, so tests can tell "only the new
	// objects" from "everything again".
	FetchBytes int64
}

// Failure makes the server misbehave, for failure tests. The zero value
// serves normally.
type Failure struct {
	// Status, when non-zero, answers every request with this HTTP status
	// instead of serving it.
	Status int
	// Hang blocks every request until the client gives up (its context
	// ends) or the server closes.
	Hang bool
	// FetchOnly limits Status and Hang to POST git-upload-pack, so that a
	// ref listing still succeeds and the failure hits the fetch.
	FetchOnly bool
	// Count, when positive, limits the failure to that many requests
	// (of the kind FetchOnly selects); then the server serves again. For
	// testing retries.
	Count int
}

// Server is a loopback smart-HTTP git server serving the bare repositories
// under its directory at URL()+"/"+name+".git".
type Server struct {
	root string // bare repositories live here
	tmp  string // scratch working clones live here
	srv  *httptest.Server
	cgi  *cgi.Handler
	// fail reports a helper's error: t.Fatal for NewServer, panic for Start.
	fail func(error)

	refListings, fetches, fetchBytes atomic.Int64

	mu      sync.Mutex
	failure Failure
	token   string
	check   func(path, user, password string) bool
	closed  chan struct{}
	once    sync.Once
}

// NewServer starts a server whose repositories live in tb.TempDir() and
// registers its Close with tb.Cleanup. Helper errors fail the test.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start(tb.TempDir())
	if err != nil {
		tb.Fatalf("gittest: %v", err)
	}
	s.fail = func(err error) {
		tb.Helper()
		tb.Fatalf("gittest: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Start starts a server whose repositories live under dir, for programs
// that have no testing.TB (the benchmark). Helper errors panic. Call Close
// when done.
func Start(dir string) (*Server, error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("gittest: git CLI not found: %w", err)
	}
	root := filepath.Join(dir, "repos")
	tmp := filepath.Join(dir, "work")
	for _, d := range []string{root, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("gittest: %w", err)
		}
	}
	s := &Server{
		root:   root,
		tmp:    tmp,
		fail:   func(err error) { panic(fmt.Errorf("gittest: %w", err)) },
		closed: make(chan struct{}),
		cgi: &cgi.Handler{
			Path: gitPath,
			Args: []string{"http-backend"},
			Dir:  root,
			// http-backend explains refusals (a vanished repository) on
			// stderr; the HTTP status already says it to the client.
			Stderr: io.Discard,
			Env: append([]string{
				"GIT_PROJECT_ROOT=" + root,
				"GIT_HTTP_EXPORT_ALL=1",
			}, Env()...),
		},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s, nil
}

// Env is the environment that isolates a git process from the machine's
// configuration (no global or system config, no credential prompt). Every
// git command this package runs has it; a test that runs git itself
// appends it to the command's Env, which keeps the test free to run in
// parallel (os.Setenv in a TestMain or t.Setenv would not).
func Env() []string {
	return []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
}

// URL returns the server's base URL, without a trailing slash.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server; hanging requests are released first so Close
// does not wait for them.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Requests returns the request counts so far.
func (s *Server) Requests() Counts {
	return Counts{
		RefListings: s.refListings.Load(),
		Fetches:     s.fetches.Load(),
		FetchBytes:  s.fetchBytes.Load(),
	}
}

// ResetRequests sets all counts back to zero.
func (s *Server) ResetRequests() {
	s.refListings.Store(0)
	s.fetches.Store(0)
	s.fetchBytes.Store(0)
}

// SetFailure makes the server misbehave as f says until the next call;
// SetFailure(Failure{}) restores normal service.
func (s *Server) SetFailure(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = f
}

// RequireToken makes every request need HTTP basic auth whose password is
// token (any user name, as hosted git services accept
// "x-access-token:<token>"): no credentials get 401, wrong ones 403. An
// empty token turns the check off.
func (s *Server) RequireToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// RequireCredential makes every request need HTTP basic auth that check
// accepts (path is the request's, "/acme/skills.git/info/refs"): no
// credentials get 401, refused ones 403, as RequireToken. The check is
// asked at each request, so a credential it stops accepting (an expired
// installation token, say) is refused from then on. Nil turns it off; with
// RequireToken as well, both must accept.
func (s *Server) RequireCredential(check func(path, user, password string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.check = check
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	isFetch := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack")
	switch {
	case isFetch:
		s.fetches.Add(1)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") &&
		r.URL.Query().Get("service") == "git-upload-pack":
		s.refListings.Add(1)
	}

	s.mu.Lock()
	f, token, check := s.failure, s.token, s.check
	if f != (Failure{}) && (!f.FetchOnly || isFetch) && f.Count > 0 {
		if s.failure.Count--; s.failure.Count == 0 {
			s.failure = Failure{}
		}
	}
	s.mu.Unlock()

	if token != "" || check != nil {
		user, pass, ok := r.BasicAuth()
		switch {
		case !ok:
			w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		case token != "" && pass != token, check != nil && !check(r.URL.Path, user, pass):
			http.Error(w, "bad credentials", http.StatusForbidden)
			return
		}
	}
	if !f.FetchOnly || isFetch {
		if f.Hang {
			select {
			case <-r.Context().Done():
			case <-s.closed:
			}
			return
		}
		if f.Status != 0 {
			http.Error(w, http.StatusText(f.Status), f.Status)
			return
		}
	}
	if isFetch {
		cw := &countingWriter{ResponseWriter: w}
		s.cgi.ServeHTTP(cw, r)
		s.fetchBytes.Add(cw.n)
		return
	}
	s.cgi.ServeHTTP(w, r)
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// Repo is a bare repository on the server plus a scratch working clone
// that the helpers edit, commit in and push from. Helpers push through the
// file system, not HTTP, so server failures and token checks set for the
// code under test do not get in their way, and the request counts only
// see the code under test.
type Repo struct {
	s    *Server
	name string
	bare string
	work string
	// seq gives each commit and tag its own fixed timestamp, so that
	// commit ids are deterministic yet never collide.
	seq int
}

// CreateRepo creates an empty bare repository served at
// URL()+"/"+name+".git" whose default branch is main, and a scratch
// working clone on branch main.
func (s *Server) CreateRepo(name string) *Repo {
	r := &Repo{
		s:    s,
		name: name,
		bare: filepath.Join(s.root, name+".git"),
		work: filepath.Join(s.tmp, name),
	}
	if _, err := os.Stat(r.bare); err == nil {
		s.fail(fmt.Errorf("repository %q already exists", name))
		return r
	}
	steps := [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", r.bare},
		{"-C", r.bare, "config", "uploadpack.allowAnySHA1InWant", "true"},
		{"-C", r.bare, "config", "http.receivepack", "true"},
		{"-C", r.bare, "config", "gc.auto", "0"},
		{"-C", r.bare, "config", "receive.denyDeleteCurrent", "ignore"},
		{"init", "--quiet", "--initial-branch=main", r.work},
		{"-C", r.work, "config", "gc.auto", "0"},
		{"-C", r.work, "config", "core.autocrlf", "false"},
	}
	for _, args := range steps {
		if _, err := r.git(args...); err != nil {
			s.fail(err)
			return r
		}
	}
	return r
}

// Name returns the name the repository was created with.
func (r *Repo) Name() string { return r.name }

// URL returns the repository's smart-HTTP URL.
func (r *Repo) URL() string { return r.s.URL() + "/" + r.name + ".git" }

// BareDir returns the server-side bare repository's directory.
func (r *Repo) BareDir() string { return r.bare }

// WorkDir returns the scratch working clone's directory, for writing large
// generated trees directly (corpus.Write(r.WorkDir(), ...)) before Commit.
func (r *Repo) WorkDir() string { return r.work }

// Git runs git with args in the working clone and returns its trimmed
// standard output: the escape hatch for what the helpers do not cover.
func (r *Repo) Git(args ...string) string {
	out, err := r.git(append([]string{"-C", r.work}, args...)...)
	if err != nil {
		r.s.fail(err)
	}
	return out
}

// GitBare runs git with args in the server-side bare repository.
func (r *Repo) GitBare(args ...string) string {
	out, err := r.git(append([]string{"-C", r.bare}, args...)...)
	if err != nil {
		r.s.fail(err)
	}
	return out
}

func (r *Repo) git(args ...string) (string, error) { return r.gitIn("", args...) }

// gitIn runs git with stdin as its standard input.
func (r *Repo) gitIn(stdin string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Stdin = strings.NewReader(stdin)
	date := fmt.Sprintf("@%d +0000", 1_700_000_000+r.seq)
	cmd.Env = append(os.Environ(), Env()...)
	cmd.Env = append(cmd.Env,
		"GIT_AUTHOR_NAME=gittest", "GIT_AUTHOR_EMAIL=gittest@example.invalid",
		"GIT_COMMITTER_NAME=gittest", "GIT_COMMITTER_EMAIL=gittest@example.invalid",
		"GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// WriteFiles writes files (slash paths relative to the repository root,
// contents) into the working clone, creating directories as needed.
func (r *Repo) WriteFiles(files map[string]string) {
	for p, data := range files {
		full := filepath.Join(r.work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.s.fail(err)
			return
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			r.s.fail(err)
			return
		}
	}
}

// WriteTree lets fn write anything into the working clone's directory,
// for large generated trees.
func (r *Repo) WriteTree(fn func(dir string) error) {
	if err := fn(r.work); err != nil {
		r.s.fail(err)
	}
}

// Chmod sets a file's permission bits (0o755 makes git record 100755).
func (r *Repo) Chmod(path string, mode os.FileMode) {
	if err := os.Chmod(filepath.Join(r.work, filepath.FromSlash(path)), mode); err != nil {
		r.s.fail(err)
	}
}

// Symlink creates a symbolic link at path pointing to target.
func (r *Repo) Symlink(path, target string) {
	full := filepath.Join(r.work, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		r.s.fail(err)
		return
	}
	if err := os.Symlink(target, full); err != nil {
		r.s.fail(err)
	}
}

// Gitlink stages a submodule entry (mode 160000) at path pointing to
// commit sha, without any .gitmodules or nested repository: the tree entry
// is all a reader of the tree ever sees.
func (r *Repo) Gitlink(path, sha string) {
	// An empty directory is how git sees a submodule that is not checked
	// out; without it, Commit's "git add -A" would stage a deletion.
	if err := os.MkdirAll(filepath.Join(r.work, filepath.FromSlash(path)), 0o755); err != nil {
		r.s.fail(err)
		return
	}
	r.Git("update-index", "--add", "--cacheinfo", "160000,"+sha+","+path)
}

// Commit stages everything in the working clone (git add -A) and commits
// it, even when nothing changed, and returns the new commit id.
func (r *Repo) Commit(msg string) string {
	r.seq++
	r.Git("add", "-A")
	r.Git("commit", "--quiet", "--allow-empty", "--no-verify", "-m", msg)
	return r.Head()
}

// PushWide pushes to branch a commit whose root tree holds HEAD's trees
// at dirs and n entries of HEAD's file filler, each named with nameLen
// bytes and more (900 of 4,000 make a root of 3.6 MB, within gitstore's
// bound on a tree and past the proof of any skill below it), and returns
// its id; its parent is the branch's tip on the server, when it has one.
// It is made with git mktree and commit-tree, never checked out: the
// names are too long for a file system.
func (r *Repo) PushWide(branch, filler string, n, nameLen int, dirs ...string) string {
	var list strings.Builder
	for _, d := range dirs {
		list.WriteString("040000 tree " + r.Git("rev-parse", "HEAD:"+d) + "\t" + d + "\n")
	}
	blob, long := r.Git("rev-parse", "HEAD:"+filler), strings.Repeat("n", nameLen)
	for i := range n {
		fmt.Fprintf(&list, "100644 blob %s\t%s-%03d\n", blob, long, i)
	}
	tree, err := r.gitIn(list.String(), "-C", r.work, "mktree")
	if err != nil {
		r.s.fail(err)
		return ""
	}
	args := []string{"commit-tree", "-m", "wide", tree}
	if tip, err := r.git("-C", r.bare, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err == nil {
		args = append(args, "-p", tip)
	}
	r.seq++
	commit := r.Git(args...)
	r.Git("push", "--quiet", r.bare, commit+":refs/heads/"+branch)
	return commit
}

// WideRepo creates a repository whose one skill, x, has no proof a server
// may serve: its directory sits in a root tree of 900 entries with
// 4,000-byte names (PushWide), on main.
func (s *Server) WideRepo(name string) *Repo {
	r := s.CreateRepo(name)
	r.WriteFiles(map[string]string{"x/SKILL.md": "---\nname: x\ndescription: A skill in a root tree too wide for a proof.\n---\n# x\n", "filler": "f\n"})
	r.Commit("skills")
	r.PushWide("main", "filler", 900, 4000, "x")
	return r
}

// Head returns the working clone's current commit id.
func (r *Repo) Head() string { return r.Git("rev-parse", "HEAD") }

// Branch switches the working clone to branch name, creating it at the
// current commit when it does not exist; later commits go there.
func (r *Repo) Branch(name string) {
	if _, err := r.git("-C", r.work, "rev-parse", "--verify", "--quiet", "refs/heads/"+name); err == nil {
		r.Git("checkout", "--quiet", name)
		return
	}
	r.Git("checkout", "--quiet", "-b", name)
}

// Reset moves the working clone's current branch to commit (git reset
// --hard), to rewrite history before a ForcePush.
func (r *Repo) Reset(commit string) { r.Git("reset", "--quiet", "--hard", commit) }

// Push pushes the working clone's current commit to branch on the server.
func (r *Repo) Push(branch string) { r.Git("push", "--quiet", r.bare, "HEAD:refs/heads/"+branch) }

// ForcePush pushes the current commit to branch, replacing its history.
func (r *Repo) ForcePush(branch string) {
	r.Git("push", "--quiet", "--force", r.bare, "HEAD:refs/heads/"+branch)
}

// Tag creates (or moves) tag name at the working clone's current commit,
// annotated or lightweight, and pushes it to the server with force.
func (r *Repo) Tag(name string, annotated bool) {
	if annotated {
		r.seq++
		r.Git("tag", "--force", "-a", "-m", "tag "+name, name)
	} else {
		r.Git("tag", "--force", name)
	}
	r.Git("push", "--quiet", "--force", r.bare, "refs/tags/"+name+":refs/tags/"+name)
}

// DeleteRef deletes a ref (refs/heads/x, refs/tags/y) on the server.
func (r *Repo) DeleteRef(ref string) { r.GitBare("update-ref", "-d", ref) }

// SetDefaultBranch points the server repository's HEAD at branch.
func (r *Repo) SetDefaultBranch(branch string) {
	r.GitBare("symbolic-ref", "HEAD", "refs/heads/"+branch)
}

// Delete removes the server-side repository: it vanishes, as when a
// repository is deleted or renamed on a hosted service.
func (r *Repo) Delete() {
	if err := os.RemoveAll(r.bare); err != nil {
		r.s.fail(err)
	}
}
