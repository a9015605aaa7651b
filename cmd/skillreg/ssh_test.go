package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/sshgit"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/mcp"
	"github.com/skillreg/skillreg/redact"
)

// TestSSHSourceEndToEnd: a running daemon serves a source over
// ssh://git@127.0.0.1:PORT/... from a real SSH server (the real
// git-upload-pack) with a passphrase-protected deploy key and a
// known_hosts file; a signed push delivery that names the repository only
// by its full_name on the GitHub host moves it; neither the key nor its
// passphrase reaches the log, /readyz, /sources, diagnose or /metrics.
// Then the server's host key changes: the source stalls
// (host_key_rejected) and keeps serving what it had.
func TestSSHSourceEndToEnd(t *testing.T) {
	const pass = "daemon deploy key passphrase"
	t.Setenv("SKILLREG_TEST_SSH_PASS", pass)
	t.Setenv("SKILLREG_WEBHOOK_SECRET", testSecret)
	t.Setenv("SKILLREG_TEST_GH_TOKEN", "ghp_notforssh")
	git := gittest.NewServer(t)
	remote := git.CreateRepo("acme/skills")
	remote.WriteFiles(map[string]string{
		"skills/deploy/SKILL.md":          "---\nname: deploy\ndescription: Deploy the service.\n---\n# Deploy\n",
		"skills/deploy/references/run.md": "step one\n",
		"skills/lint/SKILL.md":            "---\nname: lint\ndescription: Lint the code.\n---\n# Lint\n",
	})
	remote.Commit("initial")
	remote.Push("main")
	keyFile, key, pub := sshgit.NewKey(t, pass)
	srv := sshgit.Start(t, filepath.Dir(filepath.Dir(remote.BareDir())), pub)
	known := sshgit.WriteKnownHosts(t, srv.KnownHostsLine())
	url := srv.URL("acme/skills")
	canonical := "ssh://" + srv.Addr() + "/acme/skills.git" // the default user "git" left out

	// The GitHub host is the SSH server's, so a delivery's full_name
	// "acme/skills" names the source (and github.token_env would apply
	// to it, were it not an ssh URL).
	yaml := "github:\n  api_url: http://127.0.0.1:1\n  token_env: SKILLREG_TEST_GH_TOKEN\n" +
		"sources:\n  - name: team\n    url: " + url + "\n    ref: {branch: main}\n    path: skills\n    poll: 0\n" +
		"    auth:\n      ssh_key_file: " + keyFile + "\n      ssh_passphrase_env: SKILLREG_TEST_SSH_PASS\n      known_hosts_file: " + known + "\n"
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	var logs testkit.Buffer
	d, err := NewDaemon(cfg, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	td := serveDaemon(t, d)
	waitUntil(t, func() bool { sts := d.Registry.States(); return len(sts) == 1 && sts[0].Attempted })
	if st := d.Registry.States()[0]; st.LastResult != "updated" {
		t.Fatalf("first sync: %+v", st)
	}

	cs := connect(t, td.URL, "2025-11-25")
	entries, _ := listAll(t, cs)
	if len(entries) != 2 {
		t.Fatalf("listed %d skills", len(entries))
	}
	for _, e := range entries {
		verifyEntry(t, cs, e)
		if p := e.Meta.Provenance; p.Repository != canonical || p.Commit != remote.Head() {
			t.Errorf("provenance %+v; want %s at %s", p, canonical, remote.Head())
		}
	}

	const uri, file = "skill://team/deploy/SKILL.md", "skill://team/deploy/references/run.md"
	before := gitEntryDigest(t, cs, uri, file)
	remote.WriteFiles(map[string]string{"skills/deploy/references/run.md": "changed by a push\n"})
	remote.Commit("change")
	remote.Push("main")
	body := payload(t, "push.json", "acme/skills", "https://elsewhere.example/acme/skills.git", func(m map[string]any) {
		m["ref"] = "refs/heads/main"
		repo := m["repository"].(map[string]any)
		repo["default_branch"], repo["master_branch"] = "main", "main"
		repo["ssh_url"], repo["git_url"], repo["svn_url"], repo["url"] = "", "", "", ""
	})
	if status, reply := deliver(t, td.URL, "push", "ssh-1", body); status != http.StatusAccepted || !strings.Contains(reply, "team") {
		t.Fatalf("push delivery: %d %s", status, reply)
	}
	waitUntil(t, func() bool { return gitEntryDigest(t, cs, uri, file) != before })

	get := func(path string) string {
		resp, err := http.Get(td.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	shown := func() map[string]string {
		st, _ := json.Marshal(d.Registry.States())
		var diag mcp.DiagnoseOutput
		if msg := callTool(t, cs, "diagnose", map[string]any{}, &diag); msg != "" {
			t.Fatalf("diagnose: %s", msg)
		}
		dj, _ := json.Marshal(diag)
		return map[string]string{"registry state": string(st), "/readyz": get("/readyz"), "/sources": get("/sources"),
			"diagnose": string(dj), "/metrics": get("/metrics"), "log": logs.String()}
	}

	// The server's host key changes (a new server at the address):
	// stalled, the last snapshot still served.
	if err := os.WriteFile(known, []byte(sshgit.OtherHostKeyLine(t, srv.Addr())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	served := remote.Head()
	remote.WriteFiles(map[string]string{"skills/lint/SKILL.md": "---\nname: lint\ndescription: Changed.\n---\n"})
	remote.Commit("after the key change")
	remote.Push("main")
	if err := d.Registry.SyncNow(context.Background(), "team"); err == nil {
		t.Fatal("a sync with a changed host key succeeded")
	}
	st := d.Registry.States()[0]
	if st.LastResult != "stalled" || st.Stalled != "host_key_rejected" || !strings.Contains(st.LastError, "changed") || !strings.Contains(st.LastError, canonical+": ") {
		t.Fatalf("state %+v; want stalled host_key_rejected", st)
	}
	entries, _ = listAll(t, cs)
	if len(entries) != 2 || entries[0].Meta.Provenance.Commit != served {
		t.Fatalf("after the refusal: %d skills at %s; want 2 at %s", len(entries), entries[0].Meta.Provenance.Commit, served)
	}

	texts := shown()
	if !strings.Contains(texts["/readyz"], "host_key_rejected") || !strings.Contains(texts["/metrics"], `skillreg_source_stalled{reason="host_key_rejected",source="team"} 1`) {
		t.Errorf("the stall is not shown:\n/readyz %s", texts["/readyz"])
	}
	if strings.Contains(texts["log"]+texts["registry state"], "ssh://"+redact.Placeholder) {
		t.Errorf("the repository's URL is shown scrubbed, as if it held a credential:\n%s", texts["log"])
	}
	keyBody := strings.Split(string(key), "\n")[2]
	for where, text := range texts {
		for _, leak := range []string{pass, keyBody, "PRIVATE KEY", "ghp_notforssh"} {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds %q", where, leak)
			}
		}
	}
}

// TestSSHPassphraseScrubbedFromStart: the configured passphrase is known
// to the scrubber once the daemon is built, before any sync read it.
func TestSSHPassphraseScrubbedFromStart(t *testing.T) {
	const pass = "start passphrase 3"
	t.Setenv("SKILLREG_TEST_SSH_PASS", pass)
	keyFile, _, _ := sshgit.NewKey(t, pass)
	known := sshgit.WriteKnownHosts(t, sshgit.OtherHostKeyLine(t, "git.example.com:22"))
	cfg, err := config.Parse([]byte("sources:\n  - name: team\n    url: git@git.example.com:acme/skills.git\n    poll: 0\n"+
		"    auth: {ssh_key_file: "+keyFile+", ssh_passphrase_env: SKILLREG_TEST_SSH_PASS, known_hosts_file: "+known+"}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	d, err := NewDaemon(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.secrets.String("said " + pass); strings.Contains(got, pass) {
		t.Fatalf("the scrubber does not know the passphrase: %q", got)
	}
}
