package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPeers(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(DefaultPeersSecretEnv, "")
	c, err := Parse([]byte("peers:\n  - http://10.0.0.1:8080\n  - https://Peer.example:8443/\n  - dns:skillreg-headless:8080\npeers_secret_file: "+secret+"\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []PeerAddr{{URL: "http://10.0.0.1:8080"}, {URL: "https://peer.example:8443"}, {DNSName: "skillreg-headless", Port: 8080}}
	if len(c.PeerAddrs) != len(want) {
		t.Fatalf("PeerAddrs = %+v", c.PeerAddrs)
	}
	for i := range want {
		if c.PeerAddrs[i] != want[i] {
			t.Errorf("peers[%d] = %+v, want %+v", i, c.PeerAddrs[i], want[i])
		}
	}
	if text, err := c.PeersSecretText(); err != nil || strings.TrimSpace(text) != "s1" {
		t.Errorf("PeersSecretText = %q, %v", text, err)
	}

	// The secret from the environment, under the default name.
	t.Setenv(DefaultPeersSecretEnv, "from-env")
	if _, err := Parse([]byte("peers: [\"http://10.0.0.1:8080\"]\n"), dir); err != nil {
		t.Fatal(err)
	}
	t.Setenv(DefaultPeersSecretEnv, "")

	for name, c := range map[string]struct{ yaml, want string }{
		"no secret":       {"peers: [\"http://10.0.0.1:8080\"]\n", "peers: set a peer secret in the environment variable SKILLREG_PEERS_SECRET (peers_secret_env) or in peers_secret_file"},
		"empty file":      {"peers: [\"http://10.0.0.1:8080\"]\npeers_secret_file: " + filepath.Join(dir, "empty") + "\n", "peers: set a peer secret"},
		"other env empty": {"peers: [\"http://10.0.0.1:8080\"]\npeers_secret_env: NO_SUCH_SKILLREG_VAR\n", "environment variable NO_SUCH_SKILLREG_VAR"},
		"path":            {"peers: [\"http://10.0.0.1:8080/skillreg\"]\npeers_secret_file: " + secret + "\n", "peers[0]:"},
		"no port":         {"peers: [\"http://10.0.0.1\"]\npeers_secret_file: " + secret + "\n", "name the port"},
		"credentials":     {"peers: [\"http://u:p@10.0.0.1:80\"]\npeers_secret_file: " + secret + "\n", "without credentials"},
		"scheme":          {"peers: [\"ftp://10.0.0.1:21\"]\npeers_secret_file: " + secret + "\n", "peers[0]:"},
		"dns no port":     {"peers: [\"dns:skillreg-headless\"]\npeers_secret_file: " + secret + "\n", "dns:NAME:PORT"},
		"dns bad port":    {"peers: [\"dns:skillreg-headless:0\"]\npeers_secret_file: " + secret + "\n", "port \"0\""},
		"dns bad name":    {"peers: [\"dns:-x:80\"]\npeers_secret_file: " + secret + "\n", "dns:NAME:PORT"},
		"twice":           {"peers: [\"http://a:1\", \"http://A:1/\"]\npeers_secret_file: " + secret + "\n", "peers[1]: \"http://A:1/\" is listed twice"},
		"no secret file":  {"peers_secret_file: " + filepath.Join(dir, "missing") + "\n", "peers_secret_file:"},
		"ca not pem":      {"peers_ca_file: " + secret + "\n", "peers_ca_file: " + secret + " holds no PEM certificate"},
	} {
		if name == "empty file" {
			if err := os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Parse([]byte(c.yaml), dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, c.want)
		}
	}
}
