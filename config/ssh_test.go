package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/sshgit"
)

// TestSSHAuth: an ssh URL (either form) takes a key file and a
// known_hosts file (or the insecure flag), checked at load with errors
// that name the key; an https URL takes only tokens; no message holds
// the key or the passphrase.
func TestSSHAuth(t *testing.T) {
	const pass = "config passphrase 1"
	t.Setenv("SKR_TEST_SSH_PASS", pass)
	t.Setenv("SKR_TEST_SSH_WRONG", "not "+pass)
	plainKey, plainBytes, _ := sshgit.NewKey(t, "")
	protKey, _, _ := sshgit.NewKey(t, pass)
	known := sshgit.WriteKnownHosts(t, sshgit.OtherHostKeyLine(t, "git.example.com:22"))
	badKnown := sshgit.WriteKnownHosts(t, "git.example.com ssh-ed25519 !!!notbase64")
	dir := t.TempDir()
	notKey := filepath.Join(dir, "notkey")
	os.WriteFile(notKey, []byte("hello\n"), 0o600)

	src := func(url, auth string) string {
		return "sources:\n  - name: a\n    url: " + url + "\n" + auth
	}
	auth := func(lines ...string) string {
		return "    auth:\n      " + strings.Join(lines, "\n      ") + "\n"
	}
	for _, ok := range []string{
		src("ssh://git@git.example.com/org/skills.git", auth("ssh_key_file: "+plainKey, "known_hosts_file: "+known)),
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+plainKey, "known_hosts_file: "+known)),
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+protKey, "ssh_passphrase_env: SKR_TEST_SSH_PASS", "known_hosts_file: "+known)),
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+protKey, "ssh_passphrase_env: SKR_TEST_SSH_UNSET", "known_hosts_file: "+known)),
		src("ssh://git@127.0.0.1:2222/skills.git", auth("ssh_key_file: "+plainKey, "insecure_ignore_host_key: true")),
		src("https://example.com/org/skills.git", auth("token_env: X")),
	} {
		c, err := Parse([]byte(ok), "")
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		if s := c.Sources[0]; s.Repo.IsSSH() != strings.Contains(ok, "ssh_key_file") {
			t.Errorf("%s: IsSSH %v", ok, s.Repo.IsSSH())
		}
	}
	for cfg, want := range map[string]string{
		src("ssh://git@git.example.com/org/skills.git", ""):                                                                                             "line 2: sources[0].auth.ssh_key_file: required for an ssh URL",
		src("git@git.example.com:org/skills.git", auth("token_env: X")):                                                                                 "sources[0].auth.ssh_key_file: required",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+plainKey)):                                                                      "sources[0].auth.known_hosts_file: required for an ssh URL",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+plainKey, "token_file: /t", "known_hosts_file: "+known)):                        "token_env and token_file apply to https URLs",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+plainKey, "known_hosts_file: "+known, "insecure_ignore_host_key: true")):        "set known_hosts_file or insecure_ignore_host_key, not both",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: /nonexistent/id", "known_hosts_file: "+known)):                                    "sources[0].auth.ssh_key_file: open /nonexistent/id",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+plainKey+".pub", "known_hosts_file: "+known)):                                   "is a public key: give the private key",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+notKey, "known_hosts_file: "+known)):                                            "is not an SSH private key",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+protKey, "known_hosts_file: "+known)):                                           "is protected by a passphrase: set auth.ssh_passphrase_env",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+plainKey, "ssh_passphrase_env: SKR_TEST_SSH_PASS", "known_hosts_file: "+known)): "is not protected by a passphrase",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+protKey, "ssh_passphrase_env: SKR_TEST_SSH_WRONG", "known_hosts_file: "+known)): "the passphrase in SKR_TEST_SSH_WRONG does not decrypt",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+plainKey, "known_hosts_file: "+badKnown)):                                       "sources[0].auth.known_hosts_file: knownhosts: " + badKnown + ":1",
		src("git@git.example.com:org/skills.git", auth("ssh_key_file: "+plainKey, "known_hosts_file: /nonexistent/kh")):                                 "sources[0].auth.known_hosts_file: open /nonexistent/kh",
		src("https://example.com/org/skills.git", auth("ssh_key_file: "+plainKey)):                                                                      "apply to ssh URLs (ssh://user@host/path or user@host:path) only",
		src("https://example.com/org/skills.git", auth("token_env: X", "insecure_ignore_host_key: true")):                                               "apply to ssh URLs",
		src("git@git.example.com:2222:org/skills.git", auth("ssh_key_file: "+plainKey, "known_hosts_file: "+known)):                                     "the scp-like form carries no port; write ssh://git@git.example.com:PORT/path",
		src("ssh://git:s3cret@git.example.com/org/skills.git", auth("ssh_key_file: "+plainKey, "known_hosts_file: "+known)):                             "a password in an ssh URL is not accepted",
	} {
		_, err := Parse([]byte(cfg), "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v\nwant an error containing %q", cfg, err, want)
			continue
		}
		key := string(plainBytes[40:80])
		if strings.Contains(err.Error(), pass) || strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows a secret: %v", cfg, err)
		}
	}
}
