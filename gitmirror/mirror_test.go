package gitmirror

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/store"
)

// daemon is a registry over one git source and the mirror on real HTTP.
type daemon struct {
	pool *gitstore.Pool
	reg  *registry.Registry
	m    *Mirror
	srv  *httptest.Server
}

func newDaemon(t *testing.T, url string, so ServeOptions) *daemon {
	t.Helper()
	pool, err := gitstore.NewPool(t.TempDir(), gitstore.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	repo, err := gitref.ParseRepo(url)
	if err != nil {
		t.Fatal(err)
	}
	main := gitref.Pin{Kind: gitref.Branch, Value: "main"}
	reg := registry.New(registry.Options{Git: pool, ContentCacheBytes: -1})
	reg.SetSources([]catalog.Source{
		{Name: "team", Kind: catalog.KindGit, Git: &catalog.GitSource{Repo: repo, Pin: main, Path: "skills"}},
		{Name: "secret", Kind: catalog.KindGit, Git: &catalog.GitSource{Repo: repo, Pin: main, Path: "private"}},
	})
	m, err := New(Options{Catalog: reg})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{pool: pool, reg: reg, m: m}
	d.sync(t)
	mux := http.NewServeMux()
	mux.Handle(Prefix, m.Handler(so))
	d.srv = httptest.NewServer(mux)
	t.Cleanup(d.srv.Close)
	return d
}

func (d *daemon) sync(t *testing.T) {
	t.Helper()
	for _, s := range []string{"team", "secret"} {
		if err := d.reg.SyncNow(context.Background(), s); err != nil {
			t.Fatalf("sync %s: %v", s, err)
		}
	}
	d.m.Update(context.Background())
}

func (d *daemon) head(t *testing.T, source string) string {
	t.Helper()
	snap, _ := d.reg.Current().Snapshot(source)
	g, err := d.m.head(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	return g.commit
}

func upstream(t *testing.T) (*gittest.Server, *gittest.Repo) {
	srv := gittest.NewServer(t)
	r := srv.CreateRepo("skills")
	r.WriteFiles(map[string]string{
		"README.md":                  "not served",
		"skills/lint/SKILL.md":       testkit.SkillMD("lint"),
		"skills/deploy/SKILL.md":     testkit.SkillMD("deploy"),
		"skills/deploy/scripts/x.sh": "#!/bin/sh\necho deploy\n",
		"skills/deploy/ref/run.md":   "# runbook\n",
		"skills/broken/SKILL.md":     "---\nname: Not A Valid Name!\n---\n",
		"skills/broken/extra.txt":    "never served",
		"private/hidden/SKILL.md":    testkit.SkillMD("hidden"),
	})
	r.Chmod("skills/deploy/scripts/x.sh", 0o755)
	r.Commit("initial")
	r.Push("main")
	return srv, r
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := execGit(dir, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func execGit(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gittest.Env()...)
	return cmd
}

// servedFiles is what the registry serves for a source: path -> sha256 and exec bit.
func servedFiles(t *testing.T, reg *registry.Registry, source, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	snap, _ := reg.Current().Snapshot(source)
	for _, sk := range snap.Skills {
		for i := range sk.Files {
			f := &sk.Files[i]
			b, err := reg.ReadFile(context.Background(), catalog.FileRef{Ref: catalog.Ref{Snap: snap, Skill: sk}, File: f, URI: snap.FileURI(sk, f)})
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			mode := "644"
			if f.Exec {
				mode = "755"
			}
			out[filepath.ToSlash(filepath.Join(prefix, sk.Path, f.Path))] = hex.EncodeToString(sum[:]) + " " + mode
		}
	}
	return out
}

// checkedOut is what a clone holds, the marketplace set apart.
func checkedOut(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if e.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if strings.HasSuffix(rel, MarketplacePath) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := e.Info()
		mode := "644"
		if info.Mode()&0o100 != 0 {
			mode = "755"
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:]) + " " + mode
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, got, want map[string]string) {
	t.Helper()
	keys := func(m map[string]string) []string {
		var k []string
		for p, v := range m {
			k = append(k, p+" "+v)
		}
		sort.Strings(k)
		return k
	}
	g, w := strings.Join(keys(got), "\n"), strings.Join(keys(want), "\n")
	if g != w {
		t.Fatalf("checked-out files differ from the served ones\ngot:\n%s\nwant:\n%s", g, w)
	}
}

func TestGitCloneFetchAll(t *testing.T) {
	t.Parallel()
	_, up := upstream(t)
	d := newDaemon(t, up.URL(), ServeOptions{})
	work := t.TempDir()
	url := d.srv.URL + "/git/team.git"

	git(t, work, "clone", "--depth", "1", url, "c")
	clone := filepath.Join(work, "c")
	want := servedFiles(t, d.reg, "team", "")
	if _, ok := want["deploy/scripts/x.sh"]; !ok || !strings.HasSuffix(want["deploy/scripts/x.sh"], " 755") {
		t.Fatalf("fixture: the script is not served as executable: %v", want)
	}
	for p := range want {
		if strings.HasPrefix(p, "broken/") {
			t.Fatalf("an excluded skill is served: %s", p)
		}
	}
	sameFiles(t, checkedOut(t, clone), want)
	mp, err := os.ReadFile(filepath.Join(clone, MarketplacePath))
	if err != nil || !strings.Contains(string(mp), `"source": "./deploy"`) || !strings.Contains(string(mp), `"strict": false`) {
		t.Fatalf("marketplace: %v\n%s", err, mp)
	}
	if got := git(t, clone, "rev-parse", "HEAD"); got != d.head(t, "team") {
		t.Fatalf("clone HEAD %s, mirror head %s", got, d.head(t, "team"))
	}
	msg := git(t, clone, "log", "-1", "--format=%an|%cn|%B")
	if !strings.Contains(msg, "skillreg|skillreg|") || !strings.Contains(msg, up.Git("rev-parse", "HEAD")) || !strings.Contains(msg, "ref: ") {
		t.Fatalf("commit does not name the upstream: %s", msg)
	}
	old := git(t, clone, "rev-parse", "HEAD")

	// A push upstream and a sync: the fetch fast-forwards by one commit.
	up.WriteFiles(map[string]string{"skills/lint/SKILL.md": testkit.SkillMD("lint") + "More.\n", "skills/new/SKILL.md": testkit.SkillMD("new")})
	up.Commit("second")
	up.Push("main")
	d.sync(t)
	git(t, clone, "fetch")
	if n := git(t, clone, "rev-list", "--count", old+"..origin/main"); n != "1" {
		t.Fatalf("fetch brought %s commits, want 1", n)
	}
	if p := git(t, clone, "rev-parse", "origin/main^"); p != old {
		t.Fatalf("new commit's parent %s, want %s", p, old)
	}
	git(t, clone, "merge", "--ff-only", "origin/main")
	sameFiles(t, checkedOut(t, clone), servedFiles(t, d.reg, "team", ""))

	// all.git: one folder per source.
	git(t, work, "clone", "--depth", "1", d.srv.URL+"/git/all.git", "all")
	want = servedFiles(t, d.reg, "team", "team")
	for p, v := range servedFiles(t, d.reg, "secret", "secret") {
		want[p] = v
	}
	sameFiles(t, checkedOut(t, filepath.Join(work, "all")), want)
}

func TestCommitIDsAgreeAcrossReplicas(t *testing.T) {
	t.Parallel()
	_, up := upstream(t)
	a := newDaemon(t, up.URL(), ServeOptions{})
	b := newDaemon(t, up.URL(), ServeOptions{})
	if x, y := a.head(t, "team"), b.head(t, "team"); x != y {
		t.Fatalf("first commit differs: %s vs %s", x, y)
	}
	up.WriteFiles(map[string]string{"skills/new/SKILL.md": testkit.SkillMD("new")})
	up.Commit("second")
	up.Push("main")
	a.sync(t)
	b.sync(t)
	if x, y := a.head(t, "team"), b.head(t, "team"); x != y {
		t.Fatalf("second commit differs: %s vs %s", x, y)
	}
}

func TestAccess(t *testing.T) {
	t.Parallel()
	_, up := upstream(t)
	tok := "skr_teamtoken"
	sum := sha256.Sum256([]byte(tok))
	gate := access.NewGate(access.GateOptions{Clients: access.New([]access.Client{{Name: "team", Hash: sum, Sources: []string{"team"}}})})
	d := newDaemon(t, up.URL(), ServeOptions{Gate: func() *access.Gate { return gate }})
	work := t.TempDir()
	basic := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+tok))
	git(t, work, "-c", "http.extraHeader="+basic, "clone", "--depth", "1", d.srv.URL+"/git/team.git", "c")

	get := func(repo, auth string) (int, string, string) {
		req, _ := http.NewRequest("GET", d.srv.URL+"/git/"+repo+".git/info/refs?service=git-upload-pack", nil)
		req.Header.Set("Git-Protocol", "version=2")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b.String()
	}
	auth := strings.TrimPrefix(basic, "Authorization: ")
	c1, _, b1 := get("secret", auth)
	c2, _, b2 := get("nosuch", auth)
	if c1 != http.StatusNotFound || c1 != c2 || b1 != b2 {
		t.Fatalf("forbidden answers %d %q, missing %d %q", c1, b1, c2, b2)
	}
	if c, h, _ := get("team", ""); c != http.StatusUnauthorized || h != `Basic realm="skillreg"` {
		t.Fatalf("no credential: %d %q", c, h)
	}
	if c, _, _ := get("team", "Bearer "+tok); c != http.StatusOK {
		t.Fatalf("bearer: %d", c)
	}
	if c, _, _ := get("team", "Bearer wrong"); c != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", c)
	}
	if c, _, _ := get("team", ""); c == http.StatusOK {
		t.Fatal("anonymous read of a private source")
	}
	// Read-only.
	resp, err := http.Post(d.srv.URL+"/git/team.git/git-receive-pack", "application/x-git-receive-pack-request", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("receive-pack: %d", resp.StatusCode)
	}
}

// TestHistoryInTheStore: a mirror over a real bbolt store, closed and
// reopened, serves the same commit for the same content (no new commit)
// and puts the next one on top of it.
func TestHistoryInTheStore(t *testing.T) {
	t.Parallel()
	_, up := upstream(t)
	d := newDaemon(t, up.URL(), ServeOptions{})
	path := filepath.Join(t.TempDir(), "skillreg.db")
	st, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := New(Options{Catalog: d.reg, History: st})
	snap, _ := d.reg.Current().Snapshot("team")
	g1, err := m1.head(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	st, err = store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m2, _ := New(Options{Catalog: d.reg, History: st})
	g2, err := m2.head(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if g2.commit != g1.commit {
		t.Fatalf("after a restart the same content is commit %s, was %s", g2.commit, g1.commit)
	}
	up.WriteFiles(map[string]string{"skills/new/SKILL.md": testkit.SkillMD("new")})
	up.Commit("second")
	up.Push("main")
	d.sync(t)
	snap, _ = d.reg.Current().Snapshot("team")
	g3, err := m2.head(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if g3.parent != g1.commit || g3.commit == g1.commit {
		t.Fatalf("next commit %s has parent %q, want %s", g3.commit, g3.parent, g1.commit)
	}
	var hist []histEntry
	data, _ := st.LoadMirror("team")
	if err := json.Unmarshal(data, &hist); err != nil || len(hist) != 2 {
		t.Fatalf("stored history: %s %v", data, err)
	}
}

// TestHistoryBounded: the recorded history keeps MaxHistory commits, the
// held trees Held generations.
func TestHistoryBounded(t *testing.T) {
	t.Parallel()
	_, up := upstream(t)
	d := newDaemon(t, up.URL(), ServeOptions{})
	m, _ := New(Options{Catalog: d.reg, MaxHistory: 3, Held: 2})
	for i := range 5 {
		up.WriteFiles(map[string]string{"skills/lint/n.md": strings.Repeat("x", i+1)})
		up.Commit("change")
		up.Push("main")
		d.sync(t)
		snap, _ := d.reg.Current().Snapshot("team")
		if _, err := m.head(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	}
	st := m.sources["team"]
	if len(st.history) != 3 || len(st.held) != 2 {
		t.Fatalf("history %d, held %d; want 3 and 2", len(st.history), len(st.held))
	}
}

// TestFullCloneAndBehindFetch: a clone without --depth gets every held
// commit and passes git fsck; a clone two generations behind fetches
// fast-forward.
func TestFullCloneAndBehindFetch(t *testing.T) {
	t.Parallel()
	_, up := upstream(t)
	d := newDaemon(t, up.URL(), ServeOptions{})
	work := t.TempDir()
	url := d.srv.URL + "/git/team.git"
	git(t, work, "clone", url, "behind")
	for i := range 2 {
		up.WriteFiles(map[string]string{"skills/lint/n.md": strings.Repeat("y", i+1)})
		up.Commit("change")
		up.Push("main")
		d.sync(t)
	}
	git(t, work, "clone", url, "full")
	full := filepath.Join(work, "full")
	if n := git(t, full, "rev-list", "--count", "HEAD"); n != "3" {
		t.Fatalf("full clone has %s commits, want 3", n)
	}
	git(t, full, "fsck", "--strict")
	behind := filepath.Join(work, "behind")
	git(t, behind, "pull", "--ff-only")
	if a, b := git(t, behind, "rev-parse", "HEAD"), git(t, full, "rev-parse", "HEAD"); a != b {
		t.Fatalf("pulled to %s, want %s", a, b)
	}
	git(t, behind, "fsck", "--strict")
	sameFiles(t, checkedOut(t, behind), servedFiles(t, d.reg, "team", ""))
}

// TestDirectorySourceAfterAChange: a directory source's mirror, after its
// files changed, still clones in full (only the newest generation is
// served: the old bytes are gone) and a clone from before fast-forwards.
func TestDirectorySourceAfterAChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testkit.WriteFiles(t, dir, map[string]string{"tool/SKILL.md": testkit.SkillMD("tool"), "tool/run.sh": "#!/bin/sh\necho one\n"})
	if err := os.Chmod(filepath.Join(dir, "tool/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := registry.New(registry.Options{ContentCacheBytes: -1})
	reg.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: dir}})
	sync := func() {
		if err := reg.SyncNow(context.Background(), "local"); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	m, _ := New(Options{Catalog: reg})
	mux := http.NewServeMux()
	mux.Handle(Prefix, m.Handler(ServeOptions{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	work := t.TempDir()
	git(t, work, "clone", srv.URL+"/git/local.git", "before")
	sameFiles(t, checkedOut(t, filepath.Join(work, "before")), servedFiles(t, reg, "local", ""))
	testkit.WriteFiles(t, dir, map[string]string{"tool/run.sh": "#!/bin/sh\necho two\n"})
	sync()
	git(t, work, "clone", srv.URL+"/git/local.git", "after")
	after := filepath.Join(work, "after")
	git(t, after, "fsck")
	sameFiles(t, checkedOut(t, after), servedFiles(t, reg, "local", ""))
	before := filepath.Join(work, "before")
	git(t, before, "pull", "--ff-only")
	sameFiles(t, checkedOut(t, before), servedFiles(t, reg, "local", ""))
}

// TestOlderGenerationPruned: once the object store's prune removed an
// older generation's blobs, a full clone stops its history before that
// generation (a shallow clone that fsck accepts) instead of failing.
func TestOlderGenerationPruned(t *testing.T) {
	t.Parallel()
	_, up := upstream(t)
	d := newDaemon(t, up.URL(), ServeOptions{})
	up.WriteFiles(map[string]string{"skills/lint/SKILL.md": testkit.SkillMD("lint") + "Changed.\n"})
	up.Commit("second")
	up.Push("main")
	d.sync(t)
	repo, err := d.pool.Repo(up.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Prune(context.Background(), []string{up.Git("rev-parse", "HEAD")}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	git(t, work, "clone", d.srv.URL+"/git/team.git", "c")
	c := filepath.Join(work, "c")
	git(t, c, "fsck")
	if n := git(t, c, "rev-list", "--count", "HEAD"); n != "1" {
		t.Fatalf("%s commits after the prune, want 1 (the held history stops)", n)
	}
	sameFiles(t, checkedOut(t, c), servedFiles(t, d.reg, "team", ""))
}
