package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/gittest"
)

// TestReloadValidAndInvalid: a valid new configuration adds a source and
// clients without dropping an open session; an invalid one is refused and
// the running configuration stays.
func TestReloadValidAndInvalid(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "one", "a"), "a", nil)
	writeSkill(t, filepath.Join(root, "two", "b"), "b", nil)
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	write := func(s string) {
		if err := os.WriteFile(cfgFile, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := "sources:\n  - name: one\n    dir: " + root + "/one\n"
	write(base)
	d := startDaemon(t, base, "")
	cs := connect(t, d.URL, "2025-11-25")
	if entries, _ := listAll(t, cs); len(entries) != 1 {
		t.Fatalf("before reload: %d skills", len(entries))
	}

	write(base + "  - name: two\n    dir: " + root + "/two\n")
	if err := d.reloadFile(cfgFile); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return d.Registry.Current().Len(catalog.Filter{}) == 2 })
	// The session opened before the reload still works and sees the change.
	if entries, _ := listAll(t, cs); len(entries) != 2 {
		t.Fatalf("after reload: %d skills", len(entries))
	}

	for _, bad := range []string{
		base + "  - name: one\n    dir: " + root + "/two\n", // duplicate name
		base + "bogus_key: 1\n",
		base + "  - name: three\n    dir: /does/not/exist\n",
	} {
		write(bad)
		if err := d.reloadFile(cfgFile); err == nil {
			t.Fatalf("reload accepted %q", bad)
		}
	}
	if got := d.Registry.Current().Len(catalog.Filter{}); got != 2 {
		t.Fatalf("after refused reloads: %d skills", got)
	}
	if srcs := d.Registry.Sources(); len(srcs) != 2 {
		t.Fatalf("sources after refused reloads: %d", len(srcs))
	}

	// Removing a source drops its skills; adding clients turns access on.
	write("sources:\n  - name: two\n    dir: " + root + "/two\nclients:\n  - name: x\n    token_sha256: " + strings.Repeat("ab", 32) + "\n    sources: [two]\n")
	if err := d.reloadFile(cfgFile); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return d.Registry.Current().Len(catalog.Filter{}) == 1 })
	if status, _ := rpc(t, d.URL, "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{`+meta2026+`}}`); status != 401 {
		t.Fatalf("after adding clients, an anonymous request got %d", status)
	}
}

// TestShutdownDuringSync: stopping the daemon while a sync hangs in a
// fetch leaves a store that a new daemon serves at once, without a resync.
func TestShutdownDuringSync(t *testing.T) {
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("team")
	remote.WriteFiles(map[string]string{"skills/a/SKILL.md": "---\nname: a\ndescription: A.\n---\n"})
	first := remote.Commit("one")
	remote.Push("main")
	data := t.TempDir()
	yaml := "data_dir: " + data + "\nsources:\n  - name: team\n    url: " + remote.URL() + "\n    path: skills\n    poll: 0\n"
	d := startDaemonKeep(t, yaml)

	remote.WriteFiles(map[string]string{"skills/a/SKILL.md": "---\nname: a\ndescription: A, changed.\n---\n"})
	remote.Commit("two")
	remote.Push("main")
	srv.SetFailure(gittest.Failure{Hang: true, FetchOnly: true})
	d.Registry.RequestSync("team", catalog.TriggerManual)
	waitUntil(t, func() bool { return d.Registry.States()[0].Syncing })
	stopped := make(chan struct{})
	go func() { d.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown did not abort the hanging sync")
	}

	cfg, _ := config.Parse([]byte(yaml), "")
	d2, err := NewDaemon(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	snap, ok := d2.Registry.Current().Snapshot("team")
	if !ok || snap.Commit != first {
		t.Fatalf("restarted daemon serves %v (commit %s), want the stored commit %s", ok, snap.Commit, first)
	}
	f, _ := d2.Registry.Current().File(catalog.Filter{}, "skill://team/a/SKILL.md")
	if data, err := d2.Registry.ReadFile(context.Background(), f); err != nil || !strings.Contains(string(data), "description: A.") {
		t.Fatalf("restarted read: %q %v", data, err)
	}
}

// TestRefusedReloadChangesNothing: a reload that adds a client and names
// an unreadable github.webhook_secret_file fails while the webhook is
// built, after the clients were checked; it is refused whole: token auth
// stays off, the webhook endpoint stays unmounted and the running
// configuration is the old one (it used to turn the clients on and keep
// the new file on record while saying the running configuration stays).
func TestRefusedReloadChangesNothing(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "one", "a"), "a", nil)
	base := "sources:\n  - name: one\n    dir: " + root + "/one\n"
	d := startDaemon(t, base, "")
	anonymous := func() int {
		status, _ := rpc(t, d.URL, "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{`+meta2026+`}}`)
		return status
	}
	if s := anonymous(); s != 200 {
		t.Fatalf("before reload: anonymous skills/list got %d", s)
	}

	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	missing := filepath.Join(t.TempDir(), "no-such-secret")
	bad := base + "clients:\n  - name: x\n    token_sha256: " + strings.Repeat("ab", 32) + "\n    sources: [\"*\"]\n" +
		"github:\n  webhook_secret_file: " + missing + "\n"
	if err := os.WriteFile(cfgFile, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	err := d.reloadFile(cfgFile)
	if err == nil || !strings.Contains(err.Error(), "webhook_secret_file") {
		t.Fatalf("reload: %v, want a refusal naming github.webhook_secret_file", err)
	}
	if s := anonymous(); s != 200 {
		t.Errorf("after a refused reload, an anonymous request got %d: the new clients were applied", s)
	}
	cfg := d.running().cfg
	if len(cfg.Clients) != 0 || cfg.GitHub.WebhookSecretFile != "" {
		t.Errorf("after a refused reload the running configuration has clients %v and webhook_secret_file %q", cfg.Clients, cfg.GitHub.WebhookSecretFile)
	}
	resp, err := http.Post(d.URL+"/webhooks/github", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("webhook endpoint after a refused reload: %d, want 404", resp.StatusCode)
	}
}
