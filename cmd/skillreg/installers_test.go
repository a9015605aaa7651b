package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/tools"
	"github.com/skillreg/skillreg/mcp"
)

// skillsCLI runs the real skills CLI under the pinned Node, in a scratch
// HOME, without telemetry.
type skillsCLI struct {
	node, cli, home string
}

func newSkillsCLI(t *testing.T) *skillsCLI {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real skills CLI")
	}
	// Pinned in scripts/npm-tools.txt; make npm-tools installs them.
	node := tools.Node(t)
	cli := tools.Find(t, "node_modules/skills/bin/cli.mjs")
	return &skillsCLI{node: node, cli: cli, home: t.TempDir()}
}

// run runs `skills ARGS` in dir and returns its output; a failure fails
// the test with the output.
func (s *skillsCLI) run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.node, append([]string{s.cli}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + s.home, "PATH=" + filepath.Dir(s.node) + ":/usr/bin:/bin", "DISABLE_TELEMETRY=1", "DO_NOT_TRACK=1", "NO_COLOR=1", "CI=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("skills %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// served is what the daemon serves of a skill: its name and files' bytes.
func served(t *testing.T, d *testDaemon, source string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, r := range d.Registry.Current().All(catalog.Filter{}) {
		if source != "" && r.Snap.Source != source {
			continue
		}
		files := map[string]string{}
		for i := range r.Skill.Files {
			f := &r.Skill.Files[i]
			b, err := d.Registry.ReadFile(context.Background(), catalog.FileRef{Ref: r, File: f, URI: r.Snap.FileURI(r.Skill, f)})
			if err != nil {
				t.Fatal(err)
			}
			files[f.Path] = string(b)
		}
		out[r.Skill.Name()] = files
	}
	return out
}

// installed reads what the CLI put into a project's Claude Code folder.
func installed(t *testing.T, project string) map[string]map[string]string {
	t.Helper()
	root := filepath.Join(project, ".claude", "skills")
	out := map[string]map[string]string{}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		// The CLI copies, or links to its canonical copy in .agents/skills.
		dir, err := filepath.EvalSymlinks(filepath.Join(root, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files, err := readFolder(dir)
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = files
	}
	return out
}

func sameTrees(t *testing.T, what string, got, want map[string]map[string]string) {
	t.Helper()
	var gn, wn []string
	for n := range got {
		gn = append(gn, n)
	}
	for n := range want {
		wn = append(wn, n)
	}
	slices.Sort(gn)
	slices.Sort(wn)
	if !slices.Equal(gn, wn) {
		t.Fatalf("%s: installed %v, served %v", what, gn, wn)
	}
	for name, files := range want {
		for p, data := range files {
			if g, ok := got[name][p]; !ok || g != data {
				t.Errorf("%s: %s/%s installed %d bytes (present %v), served %d", what, name, p, len(g), ok, len(data))
			}
		}
		if len(got[name]) != len(files) {
			t.Errorf("%s: %s has %d files installed, %d served", what, name, len(got[name]), len(files))
		}
	}
}

// TestSkillsCLI drives the real skills CLI against a daemon serving the
// example skills and a git source: list, install byte for byte, the
// source- and skill-scoped URLs, an update after a push, and the v0.1
// index through a proxy that hides v0.2.
func TestSkillsCLI(t *testing.T) {
	cli := newSkillsCLI(t)
	remote := scriptRemote(t)
	examples, err := filepath.Abs("../../examples/skills")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "sources:\n  - name: examples\n    dir: "+examples+"\n  - name: team\n    url: "+remote.URL()+"\n    ref: {branch: main}\n    path: skills\n    poll: 0\n", "")
	all := served(t, d, "")
	if len(all) < 10 {
		t.Fatalf("serving only %d skills", len(all))
	}

	list := cli.run(t, t.TempDir(), "add", d.URL, "--list")
	for name := range all {
		if !strings.Contains(list, name) {
			t.Errorf("--list does not show %s:\n%s", name, list)
		}
	}

	project := t.TempDir()
	cli.run(t, project, "add", d.URL, "-a", "claude-code", "-y")
	sameTrees(t, "whole catalog", installed(t, project), all)

	team := t.TempDir()
	cli.run(t, team, "add", d.URL+"/sources/team", "-a", "claude-code", "-y")
	sameTrees(t, "source-scoped", installed(t, team), served(t, d, "team"))

	one := t.TempDir()
	cli.run(t, one, "add", d.URL+"/skills/examples/commit-message", "-a", "claude-code", "-y")
	sameTrees(t, "skill-scoped", installed(t, one), map[string]map[string]string{"commit-message": all["commit-message"]})

	// A push and a sync; `skills check` (which updates in 1.7.4) brings the
	// new bytes into the source-scoped project.
	before := indexDigest(t, d.URL+"/sources/team", "deploy")
	remote.WriteFiles(map[string]string{"skills/deploy/references/run.md": "step one, then two\n"})
	remote.Commit("change deploy")
	remote.Push("main")
	if err := d.Registry.SyncNow(context.Background(), "team"); err != nil {
		t.Fatal(err)
	}
	if indexDigest(t, d.URL+"/sources/team", "deploy") == before {
		t.Fatal("the index digest did not move after the push")
	}
	cli.run(t, team, "check")
	sameTrees(t, "after check", installed(t, team), served(t, d, "team"))
	if got := installed(t, team)["deploy"]["references/run.md"]; got != "step one, then two\n" {
		t.Fatalf("after check: run.md = %q", got)
	}

	// The v0.1 index, through a proxy that answers 404 for the v0.2 paths
	// (the CLI tries v0.2 first).
	target, _ := url.Parse(d.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var v2Asked, v1Asked atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/.well-known/agent-skills/"):
			v2Asked.Add(1)
			http.NotFound(w, r)
			return
		case strings.Contains(r.URL.Path, "/.well-known/skills/"):
			v1Asked.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	legacy := t.TempDir()
	cli.run(t, legacy, "add", proxy.URL, "-a", "claude-code", "-y")
	sameTrees(t, "v0.1", installed(t, legacy), served(t, d, ""))
	if v2Asked.Load() == 0 || v1Asked.Load() == 0 {
		t.Errorf("proxy saw %d v0.2 and %d v0.1 requests", v2Asked.Load(), v1Asked.Load())
	}
}

// indexDigest is one entry's digest in a v0.2 index under base.
func indexDigest(t *testing.T, base, name string) string {
	t.Helper()
	res, err := http.Get(base + "/.well-known/agent-skills/index.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var idx struct {
		Skills []struct{ Name, Digest string }
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&idx); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	for _, e := range idx.Skills {
		if e.Name == name {
			return e.Digest
		}
	}
	t.Fatalf("%s not in the index: %s", name, b)
	return ""
}

// TestPublicSourceDaemon: with access control on, a public: true source
// is visible without a token on the indexes, the artifacts and the web
// pages, while /mcp without a credential still answers 401; a private
// source needs its token; diagnose says what the indexes leave out.
func TestPublicSourceDaemon(t *testing.T) {
	tok, hash, _ := access.NewToken()
	pub, priv := t.TempDir(), t.TempDir()
	writeSkill(t, filepath.Join(pub, "open-skill"), "open-skill", nil)
	writeSkill(t, filepath.Join(priv, "closed-skill"), "closed-skill", map[string]string{"notes..md": "two dots\n"})
	d := startDaemon(t, "clients:\n  - name: a\n    token_sha256: "+hash+"\n    sources: [\"*\"]\n"+
		"sources:\n  - name: pub\n    dir: "+pub+"\n    public: true\n  - name: priv\n    dir: "+priv+"\n", "")
	get := func(path, token string) (int, http.Header, string) {
		req, _ := http.NewRequest("GET", d.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}
	code, _, body := get("/.well-known/agent-skills/index.json", "")
	if code != 200 || !strings.Contains(body, "open-skill") || strings.Contains(body, "closed-skill") {
		t.Fatalf("anonymous index: %d %s", code, body)
	}
	code, _, body = get("/.well-known/agent-skills/index.json", tok)
	if code != 200 || !strings.Contains(body, "open-skill") || !strings.Contains(body, "closed-skill") {
		t.Fatalf("token index: %d %s", code, body)
	}
	if code, _, _ := get("/sources/priv/.well-known/agent-skills/index.json", ""); code != 401 {
		t.Errorf("private source index without a token: %d", code)
	}
	if code, _, _ := get("/.well-known/agent-skills/index.json", "skr_wrong"); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	if code, _, body := get("/skills/pub/open-skill", ""); code != 200 || !strings.Contains(body, "npx skills add") {
		t.Errorf("public web page: %d", code)
	}
	if code, _, _ := get("/skills/priv/closed-skill", ""); code != http.StatusSeeOther && code != 404 {
		t.Errorf("private web page without a session: %d", code)
	}
	req, _ := http.NewRequest("POST", d.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Fatalf("/mcp without a credential: %d, want 401", res.StatusCode)
	}
	cs := connectAs(t, d.URL, "2025-11-25", tok)
	var diag mcp.DiagnoseOutput
	callTool(t, cs, "diagnose", map[string]any{}, &diag)
	if !slices.ContainsFunc(diag.Unpublished, func(u mcp.Unpublished) bool {
		return u.Source == "priv" && u.Name == "closed-skill" && u.Channel == "skills-v0.1" && strings.Contains(u.Reason, "..")
	}) {
		t.Errorf("diagnose unpublished = %+v", diag.Unpublished)
	}
}

// TestArchivesSameAcrossDaemons: two daemons over the same commit (two
// replicas) serve the same indexes, marketplace and archive bytes.
func TestArchivesSameAcrossDaemons(t *testing.T) {
	remote := scriptRemote(t)
	yaml := "public_url: https://skills.example.com\nsources:\n  - name: team\n    url: " + remote.URL() + "\n    ref: {branch: main}\n    path: skills\n    poll: 0\n"
	a, b := startDaemon(t, yaml, ""), startDaemon(t, yaml, "")
	body := func(d *testDaemon, path string) string {
		res, err := http.Get(d.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, data)
		}
		return string(data)
	}
	for _, p := range []string{"/.well-known/agent-skills/index.json", "/.well-known/skills/index.json", "/marketplace.json"} {
		if x, y := body(a, p), body(b, p); x != y {
			t.Fatalf("%s differs between replicas:\n%s\n%s", p, x, y)
		}
	}
	var mp struct {
		Plugins []struct {
			Source struct{ URL, SHA256 string } `json:"source"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(body(a, "/marketplace.json")), &mp); err != nil {
		t.Fatal(err)
	}
	for _, p := range mp.Plugins {
		path := strings.TrimPrefix(p.Source.URL, "https://skills.example.com")
		if x, y := body(a, path), body(b, path); x != y || digestHex(x) != p.Source.SHA256 {
			t.Fatalf("%s: bytes differ between replicas or from the sha256", path)
		}
	}
}

func digestHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
