package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGitHubApp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "app.pem")
	if err := os.WriteFile(key, []byte("-----BEGIN RSA PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte("github:\n  app:\n    app_id: 123\n    private_key_file: "+key+"\n    installation_id: 456\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if a := c.GitHub.App; a == nil || a.AppID != 123 || a.PrivateKeyFile != key || a.InstallationID != 456 {
		t.Fatalf("github.app = %+v", c.GitHub.App)
	}
	if c, err := Parse([]byte("github:\n  token_env: T\n"), dir); err != nil || c.GitHub.App != nil {
		t.Fatalf("without github.app: %v, %+v", err, c.GitHub.App)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"github:\n  app:\n    private_key_file: " + key + "\n", "github.app.app_id: required"},
		{"github:\n  app:\n    app_id: -1\n    private_key_file: " + key + "\n", "github.app.app_id: required"},
		{"github:\n  app:\n    app_id: 1\n", "github.app.private_key_file: required"},
		{"github:\n  app:\n    app_id: 1\n    private_key_file: " + filepath.Join(dir, "missing.pem") + "\n", "github.app.private_key_file: stat"},
		{"github:\n  app:\n    app_id: 1\n    private_key_file: " + dir + "\n", "is not a regular file"},
		{"github:\n  app:\n    app_id: 1\n    private_key_file: " + key + "\n    installation_id: -5\n", "github.app.installation_id"},
		{"github:\n  app:\n    app_id: 1\n    private_key_file: " + key + "\n    client_secret: x\n", `unknown key "client_secret"`},
		{"github:\n  app:\n    app_id: one\n    private_key_file: " + key + "\n", "line 3: cannot unmarshal"},
	} {
		_, err := Parse([]byte(tc.yaml), dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
