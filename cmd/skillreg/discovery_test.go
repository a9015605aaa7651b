package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/internal/gittest"
)

// orgPayload loads a real GitHub example payload of the App's organisation
// events and points its repository at one of ours, id included.
func orgPayload(t *testing.T, name string, id int64, fullName, cloneURL string, edit func(map[string]any)) []byte {
	t.Helper()
	return payload(t, name, fullName, cloneURL, func(m map[string]any) {
		m["repository"].(map[string]any)["id"] = id
		if edit != nil {
			edit(m)
		}
	})
}

// installationReposPayload is the installation_repositories example of
// action (added or removed) listing one repository of ours.
func installationReposPayload(t *testing.T, action, account string, id int64, fullName string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../webhook/testdata/installation_repositories-" + action + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["installation"].(map[string]any)["account"].(map[string]any)["login"] = account
	key := "repositories_" + action
	repo := m[key].([]any)[0].(map[string]any)
	_, name, _ := strings.Cut(fullName, "/")
	repo["id"], repo["full_name"], repo["name"] = id, fullName, name
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// skillFile is a SKILL.md whose description tells the versions apart.
func skillFile(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n# " + name + "\n"
}

// TestDiscoveryWebhooksEndToEnd runs the daemon against the fake GitHub
// API and a loopback git server with one github: template, listed once at
// start and then only every hour: every change after the first listing is
// GitHub's deliveries, signed as GitHub signs them and built from its own
// example payloads. A new repository appears at its first push of skills,
// a rename keeps the source's name and URIs while its remote moves, an
// archived one disappears, and the installation_repositories events add
// and remove one.
func TestDiscoveryWebhooksEndToEnd(t *testing.T) {
	t.Setenv("SKILLREG_WEBHOOK_SECRET", testSecret)
	git := gittest.NewServer(t)
	gh := fakegithub.New(fakegithub.Options{})
	defer gh.Close()

	alpha := git.CreateRepo("acme/alpha")
	alpha.WriteFiles(map[string]string{"skills/review/SKILL.md": skillFile("review", "Review a change.")})
	alpha.Commit("review")
	alpha.Push("main")
	alphaID := gh.AddRepo(fakegithub.Repo{FullName: "acme/alpha", CloneURL: alpha.URL(), Files: []string{"skills/review/SKILL.md"}})

	d := startDaemon(t, fmt.Sprintf(`github:
  api_url: %s/
  discovery_poll: 1h
sources:
  - name: acme
    github: {owner: acme}
    ref: {branch: main}
    path: skills
    poll: 0
`, gh.URL), "")
	cs := connect(t, d.URL, "2025-11-25")
	uris := func() []string {
		entries, _ := listAll(t, cs)
		var out []string
		for _, e := range entries {
			out = append(out, e.URI)
		}
		slices.Sort(out)
		return out
	}
	has := func(uri string) func() bool {
		return func() bool { return slices.Contains(uris(), uri) }
	}
	const (
		alphaURI = "skill://acme-alpha/review/SKILL.md"
		gammaURI = "skill://acme-gamma/deploy/SKILL.md"
		deltaURI = "skill://acme-delta/lint/SKILL.md"
	)
	waitUntil(t, has(alphaURI))
	send := func(event, id string, body []byte) {
		t.Helper()
		status, reply := deliver(t, d.URL, event, id, body)
		if status != http.StatusAccepted || !strings.Contains(reply, `"outcome":"discovery"`) {
			t.Fatalf("%s delivery %s: %d %s", event, id, status, reply)
		}
	}

	// A repository is created empty: it is listed, without skills.
	gamma := git.CreateRepo("acme/gamma")
	gammaID := gh.AddRepo(fakegithub.Repo{FullName: "acme/gamma", CloneURL: gamma.URL()})
	send("repository", "created-gamma", orgPayload(t, "repository-created.json", gammaID, "acme/gamma", gamma.URL(), func(m map[string]any) {
		m["repository"].(map[string]any)["fork"] = false
	}))
	waitUntil(t, func() bool { return discovered(d, "acme/gamma") == "not included" })

	// Its first push of skills: no source follows it, so the push is
	// passed on, and the repository appears.
	gamma.WriteFiles(map[string]string{"skills/deploy/SKILL.md": skillFile("deploy", "Deploy, first version.")})
	gamma.Commit("deploy")
	gamma.Push("main")
	if err := gh.EditRepo(gammaID, func(r *fakegithub.Repo) { r.Files = []string{"skills/deploy/SKILL.md"} }); err != nil {
		t.Fatal(err)
	}
	pushed := time.Now()
	send("push", "push-gamma", orgPayload(t, "push.json", gammaID, "acme/gamma", gamma.URL(), onMain))
	waitUntil(t, has(gammaURI))
	t.Logf("a new repository's skills served %v after its first push was delivered", time.Since(pushed))

	// Renamed: GitHub serves it under the new name only (the old path is
	// gone from the git server), the source keeps its name and URIs, and
	// its remote and provenance follow the rename.
	nextBare := filepath.Join(filepath.Dir(gamma.BareDir()), "gamma-next.git")
	if err := os.Rename(gamma.BareDir(), nextBare); err != nil {
		t.Fatal(err)
	}
	nextURL := git.URL() + "/acme/gamma-next.git"
	if err := gh.EditRepo(gammaID, func(r *fakegithub.Repo) { r.FullName, r.CloneURL = "acme/gamma-next", nextURL }); err != nil {
		t.Fatal(err)
	}
	send("repository", "renamed-gamma", orgPayload(t, "repository-renamed.json", gammaID, "acme/gamma-next", nextURL, func(m map[string]any) {
		m["changes"].(map[string]any)["repository"].(map[string]any)["name"].(map[string]any)["from"] = "gamma"
	}))
	waitUntil(t, func() bool { return sourceURL(d, "acme-gamma") == nextURL })
	gamma.WriteFiles(map[string]string{"skills/deploy/SKILL.md": skillFile("deploy", "Deploy, after the rename.")})
	gamma.Commit("deploy v2")
	gamma.Git("push", "--quiet", nextBare, "HEAD:refs/heads/main")
	status, reply := deliver(t, d.URL, "push", "push-gamma-next", orgPayload(t, "push.json", gammaID, "acme/gamma-next", nextURL, onMain))
	if status != http.StatusAccepted || !strings.Contains(reply, `"acme-gamma"`) {
		t.Fatalf("push to the renamed repository: %d %s", status, reply)
	}
	waitUntil(t, func() bool { return strings.Contains(skillText(t, cs, gammaURI), "after the rename") })
	if snap, ok := d.Registry.Current().Snapshot("acme-gamma"); !ok || snap.Commit != gamma.Head() {
		t.Fatalf("acme-gamma serves %+v, want commit %s", snap, gamma.Head())
	}

	// Archived: it disappears (the template leaves archived ones out).
	if err := gh.EditRepo(alphaID, func(r *fakegithub.Repo) { r.Archived = true }); err != nil {
		t.Fatal(err)
	}
	send("repository", "archived-alpha", orgPayload(t, "repository-archived.json", alphaID, "acme/alpha", alpha.URL(), nil))
	waitUntil(t, func() bool { return !slices.Contains(uris(), alphaURI) })
	if !slices.Contains(uris(), gammaURI) {
		t.Fatalf("archiving alpha took gamma with it: %v", uris())
	}

	// Added to the App's installation, a private repository the daemon
	// can now read appears; removed, it disappears (the daemon's
	// credential no longer lists it).
	delta := git.CreateRepo("acme/delta")
	delta.WriteFiles(map[string]string{"skills/lint/SKILL.md": skillFile("lint", "Lint the code.")})
	delta.Commit("lint")
	delta.Push("main")
	deltaID := gh.AddRepo(fakegithub.Repo{FullName: "acme/delta", CloneURL: delta.URL(), Files: []string{"skills/lint/SKILL.md"}})
	send("installation_repositories", "added-delta", installationReposPayload(t, "added", "acme", deltaID, "acme/delta"))
	waitUntil(t, has(deltaURI))
	if err := gh.EditRepo(deltaID, func(r *fakegithub.Repo) { r.Private = true }); err != nil {
		t.Fatal(err)
	}
	send("installation_repositories", "removed-delta", installationReposPayload(t, "removed", "acme", deltaID, "acme/delta"))
	waitUntil(t, func() bool { return !slices.Contains(uris(), deltaURI) })

	// Deleted: the last discovered source goes; the name stays given to
	// its id.
	gh.DeleteRepo(gammaID)
	send("repository", "deleted-gamma", orgPayload(t, "repository-deleted.json", gammaID, "acme/gamma-next", nextURL, nil))
	waitUntil(t, func() bool { return !slices.Contains(uris(), gammaURI) })
}

// discovered says what discovery made of a listed repository: "included",
// "not included", or "" while it is not listed.
func discovered(d *testDaemon, fullName string) string {
	for _, g := range d.disc.Status() {
		for _, f := range g.Repositories {
			if strings.EqualFold(f.Repo.FullName, fullName) {
				if f.Included {
					return "included"
				}
				return "not included"
			}
		}
	}
	return ""
}

// sourceURL is the remote the registry syncs source name from now.
func sourceURL(d *testDaemon, name string) string {
	for _, s := range d.Registry.Sources() {
		if s.Name == name && s.Git != nil {
			return s.Git.Repo.URL()
		}
	}
	return ""
}

// skillText reads a skill file's text over MCP ("" while it cannot be
// read).
func skillText(t *testing.T, cs *sdk.ClientSession, uri string) string {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
	if err != nil || len(res.Contents) == 0 {
		return ""
	}
	return res.Contents[0].Text
}
