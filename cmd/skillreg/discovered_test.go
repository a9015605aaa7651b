package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/discovery"
	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/mcp"
)

// discoveredFixture is an owner on the fake GitHub API whose
// repositories' clone URLs are a loopback git server's.
type discoveredFixture struct {
	gh    *fakegithub.Server
	git   *gittest.Server
	repos map[string]*gittest.Repo // by GitHub full name
	ids   map[string]int64
}

func newDiscoveredFixture(t *testing.T) *discoveredFixture {
	t.Helper()
	f := &discoveredFixture{gh: fakegithub.New(fakegithub.Options{}), git: gittest.NewServer(t), repos: map[string]*gittest.Repo{}, ids: map[string]int64{}}
	t.Cleanup(f.gh.Close)
	for _, r := range []struct {
		name, skill string
		topics      []string
		archived    bool
	}{
		{"acme/skills", "deploy", []string{"agent-skills"}, false},
		{"acme/tools", "lint", []string{"agent-skills"}, false},
		{"acme/old", "legacy", []string{"agent-skills"}, true},
		{"acme/website", "", []string{"agent-skills"}, false},
		{"acme/untagged", "other", nil, false},
	} {
		files := map[string]string{"README.md": "# " + r.name + "\n"}
		if r.skill != "" {
			files["skills/"+r.skill+"/SKILL.md"] = testkit.SkillMD(r.skill)
		}
		f.add(t, r.name, files, r.topics, r.archived)
	}
	return f
}

func (f *discoveredFixture) add(t *testing.T, fullName string, files map[string]string, topics []string, archived bool) {
	t.Helper()
	remote := f.git.CreateRepo(strings.ReplaceAll(fullName, "/", "-"))
	remote.WriteFiles(files)
	remote.Commit("initial")
	remote.Push("main")
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	f.repos[fullName] = remote
	f.ids[fullName] = f.gh.AddRepo(fakegithub.Repo{FullName: fullName, Topics: topics, Archived: archived, CloneURL: remote.URL(), Files: paths})
}

// discoveredConfig is a daemon configuration with the acme template, a
// directory source, and a client that names the template.
func discoveredConfig(t *testing.T, f *discoveredFixture, dataDir string) (yaml, teamToken, otherToken string) {
	t.Helper()
	dir := t.TempDir()
	writeSkill(t, dir+"/local/notes", "notes", nil)
	team, teamHash, _ := access.NewToken()
	other, otherHash, _ := access.NewToken()
	return "data_dir: " + dataDir + "\n" +
		"github:\n  api_url: " + f.gh.URL + "/\n" +
		"sources:\n" +
		"  - name: acme\n    github: {owner: acme, topic: agent-skills}\n    path: skills\n    poll: 0\n" +
		"  - name: local\n    dir: " + dir + "/local\n" +
		"clients:\n" +
		"  - name: team\n    token_sha256: " + teamHash + "\n    sources: [acme]\n" +
		"  - name: other\n    token_sha256: " + otherHash + "\n    sources: [local]\n", team, other
}

func listURIs(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	entries, _ := listAll(t, cs)
	var out []string
	for _, e := range entries {
		out = append(out, e.URI)
	}
	slices.Sort(out)
	return out
}

// TestDiscoveredSources: a github: template becomes one git source per
// repository with skills, named <owner>-<repo>, synced from its clone URL;
// a client naming the template sees exactly them; diagnose says why each
// other repository is left out; a restart serves them before any request
// to GitHub.
func TestDiscoveredSources(t *testing.T) {
	f := newDiscoveredFixture(t)
	data := t.TempDir()
	yaml, team, other := discoveredConfig(t, f, data)
	d := startDaemon(t, yaml, "")
	want := []string{"skill://acme-skills/deploy/SKILL.md", "skill://acme-tools/lint/SKILL.md"}
	teamCS := connectAs(t, d.URL, "2025-11-25", team)
	waitUntil(t, func() bool { return slices.Equal(listURIs(t, teamCS), want) })
	entries, _ := listAll(t, teamCS)
	for _, e := range entries {
		verifyEntry(t, teamCS, e)
		p := e.Meta.Provenance
		name := "acme/skills"
		if strings.Contains(e.URI, "acme-tools") {
			name = "acme/tools"
		}
		if p.Repository != f.repos[name].URL() || p.Commit != f.repos[name].Head() {
			t.Errorf("%s provenance %+v", e.URI, p)
		}
	}
	if got := listURIs(t, connectAs(t, d.URL, "2025-11-25", other)); !slices.Equal(got, []string{"skill://local/notes/SKILL.md"}) {
		t.Errorf("the other client sees %q", got)
	}
	var diag mcp.DiagnoseOutput
	callTool(t, teamCS, "diagnose", map[string]any{}, &diag)
	reasons := map[string]string{}
	for _, r := range diag.Discovered {
		reasons[r.Repository] = r.Reason
		if r.Included != (r.Reason == "") || r.Group != "acme" {
			t.Errorf("diagnose: %+v", r)
		}
	}
	wantReasons := map[string]string{
		"acme/skills": "", "acme/tools": "",
		"acme/old":      "archived (set archived: true to include archived repositories)",
		"acme/website":  `no SKILL.md under path "skills"`,
		"acme/untagged": `topic "agent-skills" missing`,
	}
	for repo, want := range wantReasons {
		if got, ok := reasons[repo]; !ok || got != want {
			t.Errorf("diagnose %s: %q, want %q", repo, got, want)
		}
	}
	// /sources shows them too, to the team.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	login, _ := http.NewRequest(http.MethodPost, d.URL+"/login", strings.NewReader(url.Values{"token": {team}, "next": {"/sources"}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	login.Header.Set("Origin", d.URL)
	resp, err := hc.Do(login)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, s := range []string{`<code>acme/old</code>`, `<a href="/sources/acme-skills">acme-skills</a>`, "topic &#34;agent-skills&#34; missing"} {
		if !strings.Contains(string(page), s) {
			t.Errorf("/sources lacks %s", s)
		}
	}
	var otherDiag mcp.DiagnoseOutput
	callTool(t, connectAs(t, d.URL, "2025-11-25", other), "diagnose", map[string]any{}, &otherDiag)
	if len(otherDiag.Discovered) != 0 {
		t.Errorf("a client that does not see the template is shown %d discovered repositories", len(otherDiag.Discovered))
	}
}

// TestDiscoveredSourcesServedAfterRestartWithoutGitHub: the store keeps
// the discovered set, so a restart serves it while GitHub's API is down.
func TestDiscoveredSourcesServedAfterRestartWithoutGitHub(t *testing.T) {
	f := newDiscoveredFixture(t)
	data := t.TempDir()
	yaml, team, _ := discoveredConfig(t, f, data)
	want := []string{"skill://acme-skills/deploy/SKILL.md", "skill://acme-tools/lint/SKILL.md"}
	func() {
		cfg, err := config.Parse([]byte(yaml), "")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listen = "127.0.0.1:0"
		d, err := NewDaemon(cfg, testkit.Logger(t, slog.LevelWarn))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := d.Listen(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- d.Serve(ctx) }()
		cs := connectAs(t, "http://"+d.Addr(), "2025-11-25", team)
		waitUntil(t, func() bool { return slices.Equal(listURIs(t, cs), want) })
		cs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	f.gh.FailNext(502, -1) // every listing fails from now on
	d := startDaemon(t, yaml, "")
	if got := listURIs(t, connectAs(t, d.URL, "2025-11-25", team)); !slices.Equal(got, want) {
		t.Errorf("after the restart: %q, want %q", got, want)
	}
}

// TestDiscoveredSourcesFollowEvents: events the webhook passes on change
// the served sources while the daemon runs: a new repository's first
// push adds it, a rename keeps its name, URIs and skills and updates
// provenance, a deletion removes it.
func TestDiscoveredSourcesFollowEvents(t *testing.T) {
	f := newDiscoveredFixture(t)
	yaml, team, _ := discoveredConfig(t, f, t.TempDir())
	d := startDaemon(t, yaml, "")
	cs := connectAs(t, d.URL, "2025-11-25", team)
	waitUntil(t, func() bool { return len(listURIs(t, cs)) == 2 })

	f.add(t, "acme/fresh", map[string]string{"skills/fresh/SKILL.md": testkit.SkillMD("fresh")}, []string{"agent-skills"}, false)
	d.disc.Repository(discoveryEvent(f, "pushed", "acme/fresh", ""))
	waitUntil(t, func() bool { return slices.Contains(listURIs(t, cs), "skill://acme-fresh/fresh/SKILL.md") })

	// GitHub renames acme/tools to acme/linters: the clone URL moves.
	moved := f.git.CreateRepo("acme-linters")
	f.repos["acme/tools"].Git("push", moved.BareDir(), "main")
	id := f.ids["acme/tools"]
	if err := f.gh.EditRepo(id, func(r *fakegithub.Repo) { r.FullName, r.CloneURL = "acme/linters", moved.URL() }); err != nil {
		t.Fatal(err)
	}
	f.repos["acme/linters"], f.ids["acme/linters"] = moved, id
	d.disc.Repository(discoveryEvent(f, "renamed", "acme/linters", "acme/tools"))
	const lint = "skill://acme-tools/lint/SKILL.md"
	waitUntil(t, func() bool {
		entries, _ := listAll(t, cs)
		for _, e := range entries {
			if e.URI == lint {
				return e.Meta.Provenance.Repository == moved.URL()
			}
		}
		t.Fatalf("%s not served during the rename", lint)
		return false
	})

	f.gh.DeleteRepo(f.ids["acme/skills"])
	d.disc.Repository(discovery.RepoEvent{Action: "deleted", ID: f.ids["acme/skills"], FullName: "acme/skills"})
	waitUntil(t, func() bool {
		return slices.Equal(listURIs(t, cs), []string{"skill://acme-fresh/fresh/SKILL.md", lint})
	})
}

func discoveryEvent(f *discoveredFixture, action, fullName, old string) discovery.RepoEvent {
	return discovery.RepoEvent{Action: action, ID: f.ids[fullName], FullName: fullName, OldFullName: old, DefaultBranch: "main",
		CloneURL: f.repos[fullName].URL(), Topics: []string{"agent-skills"}}
}

// TestDiscoveredSourcesReload: a reload that adds a template serves its
// repositories; one that removes it drops them; the configured sources
// stay as they are.
func TestDiscoveredSourcesReload(t *testing.T) {
	f := newDiscoveredFixture(t)
	yaml, team, other := discoveredConfig(t, f, t.TempDir())
	without := strings.Replace(yaml, "  - name: acme\n    github: {owner: acme, topic: agent-skills}\n    path: skills\n    poll: 0\n", "", 1)
	without = strings.Replace(without, "sources: [acme]", "sources: [local]", 1)
	d := startDaemon(t, without, "")
	if got := listURIs(t, connectAs(t, d.URL, "2025-11-25", other)); !slices.Equal(got, []string{"skill://local/notes/SKILL.md"}) {
		t.Fatalf("before: %q", got)
	}
	reload := func(y string) {
		t.Helper()
		cfg, err := config.Parse([]byte(y), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	reload(yaml)
	cs := connectAs(t, d.URL, "2025-11-25", team)
	waitUntil(t, func() bool { return len(listURIs(t, cs)) == 2 })
	reload(without)
	waitUntil(t, func() bool {
		return slices.Equal(listURIs(t, connectAs(t, d.URL, "2025-11-25", other)), []string{"skill://local/notes/SKILL.md"}) &&
			len(d.Registry.Sources()) == 1
	})
}
