package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/fulldisk"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
)

// readySource is a source as /readyz shows it.
type readySource struct {
	catalog.State
	Serving bool `json:"serving"`
}

func readyzOf(t *testing.T, h http.Handler) map[string]readySource {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var out struct {
		Sources []readySource `json:"sources"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("readyz: %v: %s", err, rec.Body)
	}
	m := map[string]readySource{}
	for _, s := range out.Sources {
		m[s.Source] = s
	}
	return m
}

func pageOf(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, rec.Code)
	}
	return rec.Body.String()
}

// TestDaemonOnFullDisk runs the daemon with its data directory on a real
// file system that fills up. A persist that fails is shown by /readyz and
// the metrics; a restart while the disk is full keeps serving the git
// source from its object store and shows the directory source's stored
// catalog as stale; once space returns everything is stored and the
// store checks out.
func TestDaemonOnFullDisk(t *testing.T) {
	mnt, ok := fulldisk.Mount(t, 64<<20)
	if !ok {
		return
	}
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("team")
	remote.WriteFiles(map[string]string{"skills/deploy/SKILL.md": "---\nname: deploy\ndescription: Deploy.\n---\n"})
	remote.Commit("one")
	remote.Push("main")
	root := t.TempDir()
	for i := range 5 {
		writeSkill(t, filepath.Join(root, fmt.Sprintf("s%03d", i)), fmt.Sprintf("s%03d", i), nil)
	}
	data := filepath.Join(mnt, "data")
	yaml := "data_dir: " + data + "\nsources:\n  - name: team\n    url: " + remote.URL() + "\n    path: skills\n    poll: 0\n  - name: local\n    dir: " + root + "\n    poll: 0\n"

	first := startDaemonKeep(t, yaml)
	// A directory source's first catalog is served before it is stored
	// (saving): the disk fills once it is.
	waitUntil(t, func() bool {
		return first.Registry.Current().Len(catalog.Filter{}) == 6 && !readyzOf(t, first.echo)["local"].Saving
	})
	free := fulldisk.Fill(t, mnt)
	big := strings.Repeat("Text that takes room in the store. ", 400)
	// Written beside the source, then moved in by one rename: the watcher
	// would otherwise sync (and store, while room lasts) the first few
	// alone, and the stored catalog would be 5 skills or a few more.
	staging := t.TempDir()
	for i := 5; i < 305; i++ {
		name := fmt.Sprintf("s%03d", i)
		// A long metadata value: the store keeps frontmatter (not bodies),
		// so 300 of them need room.
		writeSkill(t, filepath.Join(staging, "more", name), name, map[string]string{"SKILL.md": "---\nname: " + name + "\ndescription: Skill " + name + ".\nmetadata:\n  notes: " + big + "\n---\n# " + name + "\n"})
	}
	if err := os.Rename(filepath.Join(staging, "more"), filepath.Join(root, "more")); err != nil {
		t.Fatal(err)
	}
	first.Registry.RequestSync("local", catalog.TriggerManual)
	waitUntil(t, func() bool {
		return first.Registry.Current().Len(catalog.Filter{}) == 306 && readyzOf(t, first.echo)["local"].PersistError != ""
	})
	local := readyzOf(t, first.echo)["local"]
	if !strings.Contains(local.PersistError, "no space left on device") || local.PersistFailures == 0 || local.NextPersist.IsZero() {
		t.Fatalf("/readyz after a failed persist: %+v", local)
	}
	resp, err := http.Get(first.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`skillreg_persist_failures_total{source="local"}`, `skillreg_catalog_unsaved{source="local"} 1`, `skillreg_catalog_unsaved{source="team"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if page := pageOf(t, first.echo, "/sources"); !strings.Contains(page, "Not stored") || !strings.Contains(page, "no space left on device") {
		t.Errorf("/sources does not show the failed persist")
	}
	first.stop()

	// A restart while the disk is still full, before any sync.
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDaemon(cfg, testkit.Logger(t, slog.LevelWarn))
	if err != nil {
		t.Fatalf("restart on a full disk: %v", err)
	}
	ready := readyzOf(t, d.echo)
	if team := ready["team"]; !team.Serving || team.Skills != 1 {
		t.Errorf("git source after a restart on a full disk: %+v, want it served from its object store", team)
	}
	if local := ready["local"]; !local.Serving || !local.Stale || local.Skills != 5 || local.PersistError == "" {
		t.Errorf("directory source after a restart on a full disk: %+v, want its 5 stored skills served, marked stale", local)
	}
	if page := pageOf(t, d.echo, "/sources"); !strings.Contains(page, "Stale") {
		t.Errorf("/sources does not show the stale catalog")
	}
	if _, err := d.Registry.Current().Skill(catalog.Filter{}, "skill://team/deploy/SKILL.md"); err != nil {
		t.Errorf("git skill after the restart: %v", err)
	}
	d.Close()

	free()
	third := startDaemonKeep(t, yaml)
	waitUntil(t, func() bool {
		l := readyzOf(t, third.echo)["local"]
		return l.Skills == 305 && !l.Stale && l.PersistError == "" && third.Registry.Current().Len(catalog.Filter{}) == 306
	})
	if err := third.Registry.SyncNow(context.Background(), "team"); err != nil {
		t.Fatalf("git sync once space returns: %v", err)
	}
	third.stop()
	if code, out, stderr := runCLI(t, "store", "check", "--data", data); code != exitOK {
		t.Fatalf("store check after the full disk: %d %q %q", code, out, stderr)
	}
}
