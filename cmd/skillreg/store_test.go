package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/store"
)

// TestRestartServesStoredCatalogBeforeNetwork: after a restart the daemon
// serves the catalog it persisted, before any network call (the git server
// hangs every request), with the same commit and digests.
func TestRestartServesStoredCatalogBeforeNetwork(t *testing.T) {
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("team")
	remote.WriteFiles(map[string]string{"skills/deploy/SKILL.md": "---\nname: deploy\ndescription: Deploy.\n---\n", "skills/deploy/run.sh": "echo\n"})
	remote.Commit("one")
	remote.Push("main")
	data := t.TempDir()
	yaml := "data_dir: " + data + "\nsources:\n  - name: team\n    url: " + remote.URL() + "\n    path: skills\n    poll: 0\n"

	first := startDaemonKeep(t, yaml)
	cs := connect(t, first.URL, "2025-11-25")
	before, _ := listAll(t, cs)
	cs.Close()
	first.stop()

	srv.SetFailure(gittest.Failure{Hang: true})
	srv.ResetRequests()
	d := startDaemon(t, yaml, "")
	cs = connect(t, d.URL, "2025-11-25")
	after, _ := listAll(t, cs)
	if len(after) != 1 || !jsonEqual(mustJSON(before), mustJSON(after)) {
		t.Fatalf("after restart served %s, want %s", mustJSON(after), mustJSON(before))
	}
	verifyEntry(t, cs, after[0])
	if c := srv.Requests(); c.Fetches != 0 {
		t.Fatalf("restart fetched: %+v", c)
	}
}

// startDaemonKeep starts a daemon that the test stops itself (to restart
// on the same data directory).
type keptDaemon struct {
	*testDaemon
	stop func()
}

func startDaemonKeep(t *testing.T, yaml string) keptDaemon {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	d, err := NewDaemon(cfg, testkit.Logger(t, slog.LevelWarn))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	td := &testDaemon{d, "http://" + d.Addr()}
	waitUntil(t, func() bool { return d.Registry.Ready() && d.Registry.Current().Len(catalog.Filter{}) > 0 })
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return keptDaemon{td, stop}
}

func mustJSON(v any) []byte {
	b, err := jsonMarshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestSecondDaemonOnSameDataDir(t *testing.T) {
	data := t.TempDir()
	startDaemon(t, "data_dir: "+data+"\n", "")
	cfg, _ := config.Parse([]byte("data_dir: "+data+"\n"), "")
	_, err := NewDaemon(cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "data directory in use") {
		t.Fatalf("second daemon: %v", err)
	}
	// The command says so and exits 1.
	code, _, stderr := runCLI(t, "serve", "--data", data, "--listen", "127.0.0.1:0")
	if code != exitProblems || !strings.Contains(stderr, "data directory in use") {
		t.Fatalf("serve on a used data directory: %d %q", code, stderr)
	}
}

func TestCorruptStoreAndRecovery(t *testing.T) {
	data := t.TempDir()
	db := filepath.Join(data, store.FileName)
	if err := os.WriteFile(db, []byte(strings.Repeat("not a bbolt file ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "serve", "--data", data, "--listen", "127.0.0.1:0")
	if code != exitProblems || !strings.Contains(stderr, db) || !strings.Contains(stderr, "skillreg store rebuild") {
		t.Fatalf("corrupt store: %d %q", code, stderr)
	}
	if code, _, _ := runCLI(t, "store", "check", "--data", data); code != exitProblems {
		t.Fatalf("store check of a corrupt file: exit %d", code)
	}
	code, out, stderr := runCLI(t, "store", "rebuild", "--data", data)
	if code != exitOK || !strings.Contains(out, "corrupt") {
		t.Fatalf("rebuild: %d %q %q", code, out, stderr)
	}
	d := startDaemon(t, "data_dir: "+data+"\n", "")
	if d.Registry.Current().Len(catalog.Filter{}) == 0 {
		t.Fatal("rebuilt daemon serves nothing")
	}
}

// TestBackupWhileRunning: a backup taken through the running daemon's
// admin socket opens and holds its catalog.
func TestBackupWhileRunning(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "a"), "a", nil)
	data := t.TempDir()
	startDaemon(t, "data_dir: "+data+"\nsources:\n  - name: local\n    dir: "+root+"\n", "")
	dst := filepath.Join(t.TempDir(), "backup.db")
	if code, out, stderr := runCLI(t, "store", "backup", dst, "--data", data); code != exitOK {
		t.Fatalf("backup: %d %q %q", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "store", "check", "--data", data); code != exitOK {
		t.Fatalf("check while running: %d %q %q", code, out, stderr)
	}
	s, err := store.Open(dst, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ps, err := s.Load()
	if err != nil || len(ps) != 1 || ps[0].Snapshot == nil || len(ps[0].Snapshot.Skills) != 1 {
		t.Fatalf("backup holds %+v, %v", ps, err)
	}
}

// TestChangedDirectoryNotServedFromStore: a file that changed size while
// the daemon was stopped: the stored catalog is served at once (its
// directory is there), a read of the changed file never returns the new
// bytes as the old file's, and the source's first sync (the check of the
// stored catalog) serves the new content.
func TestChangedDirectoryNotServedFromStore(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "a"), "a", map[string]string{"ref.md": "short"})
	data := t.TempDir()
	yaml := "data_dir: " + data + "\nsources:\n  - name: local\n    dir: " + root + "\n    poll: 0\n"
	first := startDaemonKeep(t, yaml)
	first.stop()
	writeSkill(t, filepath.Join(root, "a"), "a", map[string]string{"ref.md": "much longer than before"})

	cfg, _ := config.Parse([]byte(yaml), "")
	d, err := NewDaemon(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	old, err := d.Registry.Current().File(catalog.Filter{}, "skill://local/a/ref.md")
	if err != nil || old.File.Size != int64(len("short")) {
		t.Fatalf("restored: %+v %v; want the stored catalog served at once", old.File, err)
	}
	if b, err := d.Registry.ReadFile(context.Background(), old); err == nil {
		t.Fatalf("read the changed file as the stored one: %q", b)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	waitUntil(t, func() bool {
		f, err := d.Registry.Current().File(catalog.Filter{}, "skill://local/a/ref.md")
		return err == nil && f.File.Size == int64(len("much longer than before"))
	})
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// TestDamagedRecordNotServed flips six bytes inside a skill record of the
// store file the daemon wrote (as a bad disk would, leaving bbolt's pages
// consistent): `store check` fails naming the record, and the restarted
// daemon does not serve that source from the store but resyncs it, and
// then serves the description the repository holds.
func TestDamagedRecordNotServed(t *testing.T) {
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("team")
	remote.WriteFiles(map[string]string{
		"skills/alpha/SKILL.md": "---\nname: alpha\ndescription: alphaword2 is what this skill knows.\n---\nBody.\n",
		"skills/beta/SKILL.md":  "---\nname: beta\ndescription: Beta.\n---\n",
	})
	remote.Commit("one")
	remote.Push("main")
	data := t.TempDir()
	yaml := "data_dir: " + data + "\nsources:\n  - name: team\n    url: " + remote.URL() + "\n    path: skills\n    poll: 0\n"
	first := startDaemonKeep(t, yaml)
	first.stop()

	db := filepath.Join(data, store.FileName)
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	word := []byte("alphaword2")
	n := 0
	for i := bytes.Index(b, word); i >= 0; i = bytes.Index(b, word) {
		copy(b[i+3:], "I@VNSE") // what the issue saw served: alpI@VNSE2
		n++
	}
	if n == 0 {
		t.Fatal("the description is not in the store file")
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "store", "check", "--data", data)
	if code != exitProblems || !strings.Contains(stderr, `source team: skill record "alpha": checksum mismatch`) {
		t.Fatalf("store check of a damaged record: exit %d %q", code, stderr)
	}

	srv.SetFailure(gittest.Failure{Hang: true})
	cfg, _ := config.Parse([]byte(yaml), "")
	d, err := NewDaemon(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("a damaged record must not stop the daemon: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			d.Close()
		}
	}()
	if n := d.Registry.Current().Len(catalog.Filter{}); n != 0 {
		t.Fatalf("served %d skills from a damaged stored catalog", n)
	}
	srv.SetFailure(gittest.Failure{})
	if err := d.Registry.SyncNow(context.Background(), "team"); err != nil {
		t.Fatal(err)
	}
	sk, err := d.Registry.Current().Skill(catalog.Filter{}, "skill://team/alpha/SKILL.md")
	if err != nil || sk.Skill.Frontmatter.Description != "alphaword2 is what this skill knows." {
		t.Fatalf("after the resync: %+v %v", sk, err)
	}
	d.Close()
	closed = true
	if code, out, stderr := runCLI(t, "store", "check", "--data", data); code != exitOK {
		t.Fatalf("store check after the resync replaced the record: %d %q %q", code, out, stderr)
	}
}
