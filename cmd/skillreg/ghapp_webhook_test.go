package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/ghapp"
	"github.com/skillreg/skillreg/internal/fakegithub"
)

// installationPayload is the installation example of action (created,
// deleted, ...) for account's installation id.
func installationPayload(t *testing.T, action, account string, id int64) []byte {
	t.Helper()
	b, err := os.ReadFile("../../webhook/testdata/installation-" + action + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	inst := m["installation"].(map[string]any)
	inst["id"] = id
	inst["account"].(map[string]any)["login"] = account
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGitHubAppForgetsOnInstallationEvents: the App's "not installed"
// answer for an owner is kept for 10 minutes, and its token for an hour,
// but a signed installation delivery for that owner makes the daemon's App
// ask GitHub again at once, with no github: source configured: installed,
// the owner's token is minted at the next Token; uninstalled, the token
// held is dropped and the owner is not installed again. A repository event
// is still answered 204 ignored, since no discovery takes it.
func TestGitHubAppForgetsOnInstallationEvents(t *testing.T) {
	const appID = 4242
	t.Setenv("SKILLREG_WEBHOOK_SECRET", testSecret)
	dir := t.TempDir()
	gh, _, keyFile := appFixture(t, dir, appID, 0o600)
	remote := gitRemote(t)
	d := startDaemon(t, fmt.Sprintf(`data_dir: %s
github:
  api_url: %s/
  app: {app_id: %d, private_key_file: %s}
%s`, filepath.Join(dir, "data"), gh.URL, appID, keyFile, teamSource(remote)), dir)
	if d.app == nil {
		t.Fatal("the daemon has no GitHub App")
	}
	ctx := context.Background()
	token := func() (string, error) {
		ctx, cancel := context.WithTimeout(ctx, appTokenTimeout)
		defer cancel()
		return d.app.Token(ctx, "newco")
	}

	// Not installed: the answer is remembered, so installing the App alone
	// changes nothing for 10 minutes.
	if _, err := token(); !errors.Is(err, ghapp.ErrNotInstalled) {
		t.Fatalf("Token before the App is installed: %v, want ErrNotInstalled", err)
	}
	id := gh.Install(appID, "newco", fakegithub.Organization)
	if _, err := token(); !errors.Is(err, ghapp.ErrNotInstalled) {
		t.Fatalf("Token once installed, before the delivery: %v, want the remembered ErrNotInstalled", err)
	}

	// GitHub's installation created delivery: the App asks again.
	status, reply := deliver(t, d.URL, "installation", "inst-created", installationPayload(t, "created", "newco", id))
	tok, err := token()
	if err != nil {
		t.Fatalf("Token after the installation created delivery (answered %d %s): %v", status, reply, err)
	}
	if status != http.StatusAccepted || !strings.Contains(reply, `"outcome":"accepted"`) {
		t.Fatalf("installation created: %d %s", status, reply)
	}
	if !gh.ValidToken(tok) {
		t.Fatal("the token minted after the delivery is not one GitHub issued")
	}
	if account, _ := gh.InstallationAccount(tok); account != "newco" {
		t.Fatalf("the token is newco's installation's? account %q", account)
	}

	// Uninstalled: the token held is dropped with the installation.
	gh.Uninstall(id)
	status, reply = deliver(t, d.URL, "installation", "inst-deleted", installationPayload(t, "deleted", "newco", id))
	if status != http.StatusAccepted || !strings.Contains(reply, `"outcome":"accepted"`) {
		t.Fatalf("installation deleted: %d %s", status, reply)
	}
	if tok, err := token(); !errors.Is(err, ghapp.ErrNotInstalled) {
		t.Fatalf("Token after the installation deleted delivery: %q, %v, want ErrNotInstalled", tok, err)
	}

	// No discovery: a repository event is ignored, as without the App.
	body := payload(t, "repository-created.json", "newco/skills", "https://github.com/newco/skills.git", nil)
	if status, reply := deliver(t, d.URL, "repository", "repo-created", body); status != http.StatusNoContent {
		t.Fatalf("repository created without discovery: %d %s, want 204", status, reply)
	}
}
