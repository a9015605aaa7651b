package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/gittest"
)

// manySkillsRemote is a git remote of n skills under skills/, pushed.
func manySkillsRemote(t *testing.T, n int) (*gittest.Server, *gittest.Repo) {
	t.Helper()
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("many")
	files := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("skill-%04d", i)
		files["skills/"+name+"/SKILL.md"] = "---\nname: " + name + "\ndescription: Skill number " + fmt.Sprint(i) + ".\n---\n# " + name + "\n"
		if i%7 == 0 {
			files["skills/"+name+"/references/notes.md"] = "notes of " + name + "\n"
		}
	}
	remote.WriteFiles(files)
	remote.Commit("initial")
	remote.Push("main")
	return srv, remote
}

// readyName is the generation_name /readyz shows.
func readyName(t *testing.T, d *testDaemon) string {
	t.Helper()
	resp, err := http.Get(d.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Name string `json:"generation_name"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.Name
}

// listPage asks d for one skills/list page (2026-07-28, stateless) and
// returns the raw body and the next cursor.
func listPage(t *testing.T, d *testDaemon, cursor string) (string, string) {
	t.Helper()
	params := ""
	if cursor != "" {
		params = `,"cursor":"` + cursor + `"`
	}
	status, body := rpc(t, d.URL, "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{`+meta2026+params+`}}`)
	if status != 200 {
		t.Fatalf("skills/list at %s (cursor %q): %d %.300s", d.URL, cursor, status, body)
	}
	var res struct {
		Result struct {
			NextCursor string `json:"nextCursor"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("skills/list: %v in %.300s", err, body)
	}
	return body, res.Result.NextCursor
}

// TestCursorsAcrossReplicas: two daemons with their own data directories
// (their own bbolt files) over one git source name their generation alike
// and render the same pages, byte for byte, so a listing whose pages
// alternate between them completes; a cursor of a generation a daemon
// does not hold answers "catalog changed", never a listing of another
// generation.
func TestCursorsAcrossReplicas(t *testing.T) {
	_, remote := manySkillsRemote(t, 450) // three pages of 200
	cfg := "sources:\n  - name: many\n    url: " + remote.URL() + "\n    ref: {branch: main}\n    path: skills\n    poll: 0\n"
	a := startDaemon(t, cfg, "")
	b := startDaemon(t, cfg, "")
	if a.Registry.Current().Name() != b.Registry.Current().Name() {
		t.Fatalf("same commit, same configuration, two generation names: %s %s", a.Registry.Current().Name(), b.Registry.Current().Name())
	}
	if got := readyName(t, b); got != a.Registry.Current().Name() {
		t.Fatalf("/readyz generation_name %q, want %q", got, a.Registry.Current().Name())
	}

	// The listing from a alone.
	var alone []string
	for cursor := ""; ; {
		body, next := listPage(t, a, cursor)
		alone = append(alone, body)
		if cursor = next; cursor == "" {
			break
		}
	}
	if len(alone) != 3 {
		t.Fatalf("%d pages, want 3", len(alone))
	}
	// The same listing with every page asked of the other replica, from
	// either end.
	for _, first := range []*testDaemon{a, b} {
		ds := []*testDaemon{first, a}
		if first == a {
			ds[1] = b
		}
		cursor := ""
		for i := range alone {
			body, next := listPage(t, ds[i%2], cursor)
			if body != alone[i] {
				t.Fatalf("page %d from %s differs:\n%.300s\nwant\n%.300s", i, ds[i%2].URL, body, alone[i])
			}
			cursor = next
		}
		if cursor != "" {
			t.Fatalf("listing did not end: %q", cursor)
		}
	}
	_, beforeSwap := listPage(t, b, "")

	// A push that only a syncs: a now holds a generation b does not.
	old := a.Registry.Current().Name()
	remote.WriteFiles(map[string]string{"skills/skill-0001/SKILL.md": "---\nname: skill-0001\ndescription: Changed.\n---\n# changed\n"})
	remote.Commit("change one")
	remote.Push("main")
	a.Registry.RequestSync("many", catalog.TriggerManual)
	waitUntil(t, func() bool { return a.Registry.Current().Name() != old })
	_, afterSwap := listPage(t, a, "")
	if afterSwap == beforeSwap {
		t.Fatal("new generation, same cursor")
	}
	status, body := rpc(t, b.URL, "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{`+meta2026+`,"cursor":"`+afterSwap+`"}}`)
	if status != 400 || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, catalog.ErrCatalogMoved.Error()) {
		t.Fatalf("cursor of a generation b does not hold: %d %.300s", status, body)
	}
	// a still holds the superseded generation (retained): the listing
	// made before the swap continues there as it began, page for page.
	if body, _ := listPage(t, a, beforeSwap); body != alone[1] {
		t.Fatalf("cursor from before the swap: a mixed listing:\n%.300s", body)
	}
	// A replica started after the swap never held the old generation.
	c := startDaemon(t, cfg, "")
	if c.Registry.Current().Name() != a.Registry.Current().Name() {
		t.Fatalf("a and c synced the same commit: %s %s", a.Registry.Current().Name(), c.Registry.Current().Name())
	}
	status, body = rpc(t, c.URL, "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{`+meta2026+`,"cursor":"`+beforeSwap+`"}}`)
	if status != 400 || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, catalog.ErrCatalogMoved.Error()) {
		t.Fatalf("cursor from before the swap at c: %d %.300s", status, body)
	}
	if body, _ := listPage(t, c, afterSwap); !strings.Contains(body, `"skill-0200"`) {
		t.Fatalf("c did not continue a's new listing: %.300s", body)
	}
}

// TestGenerationNameSurvivesRestart: a daemon restarted on its data
// directory, with the git host down so that it serves what it restored
// from its store (its bbolt file), names that generation as the sync of
// the same commit did, so a restarted replica continues the others'
// listings (and they its).
func TestGenerationNameSurvivesRestart(t *testing.T) {
	srv, srvRemote := manySkillsRemote(t, 30)
	cfg := "data_dir: " + t.TempDir() + "\nsources:\n  - name: many\n    url: " + srvRemote.URL() + "\n    ref: {branch: main}\n    path: skills\n    poll: 0\n"
	var name, first string
	t.Run("first", func(t *testing.T) {
		d := startDaemon(t, cfg, "")
		name = d.Registry.Current().Name()
		first, _ = listPage(t, d, "")
	})
	srv.SetFailure(gittest.Failure{Status: 503})
	d := startDaemon(t, cfg, "")
	if got := d.Registry.Current().Name(); got != name {
		t.Fatalf("restarted daemon names the generation %s, was %s", got, name)
	}
	if body, _ := listPage(t, d, ""); body != first {
		t.Fatalf("restarted daemon's first page differs:\n%.300s\nwant\n%.300s", body, first)
	}
}
