// Package sigtest makes throwaway signing keys and signed git history with
// the real tools, for tests: GnuPG (gpg --batch --quick-gen-key, no
// passphrase, in a GnuPG home of its own) and ssh-keygen (-t ed25519 -N ""),
// and the git configuration that makes `git commit -S` and `git tag -s`
// sign with them (gpg.format=openpgp or ssh), in internal/gittest
// repositories.
//
// Nothing here touches the developer's keys or agents: each GPGKey has its
// own home (a short path under /tmp, because gpg-agent's socket path is
// limited), whose agent is stopped and whose files are removed at the
// test's cleanup. When gpg, ssh-keygen or git is missing the test skips
// (fails in CI) through tools.Missing; `make test` installs them
// (scripts/install-debian-tools.sh).
package sigtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/tools"
)

// Signer is a key git can sign with: GPGKey or SSHKey.
type Signer interface {
	// GitConfig returns the "-c name=value" arguments, to put before the
	// git subcommand, that make git sign with this key.
	GitConfig() []string
}

// need finds a tool or skips (fails in CI) tb.
func need(tb testing.TB, name, pkg string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tools.Missing(tb, fmt.Sprintf("%s not found: install Debian's %s (scripts/install-debian-tools.sh, run by make test)", name, pkg))
	}
	return p
}

// run runs a command and returns its standard output, failing tb with its
// standard error when it fails.
func run(tb testing.TB, stdin []byte, env []string, name string, args ...string) []byte {
	tb.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("sigtest: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes()
}

// GPGKey is an OpenPGP key in a GnuPG home of its own.
type GPGKey struct {
	// Home is the GnuPG home (GNUPGHOME), a short folder under /tmp.
	Home string
	// UserID is the key's primary user id ("Alice <alice@example.com>").
	UserID string
	// Fingerprint is the primary key's upper-case hex fingerprint: what
	// sigverify.Signature.Key says for a signature by this key or its
	// signing subkey.
	Fingerprint string
	// Public is the armored public key (gpg --export --armor), as a
	// keyring file holds it; re-read by Export after a change.
	Public []byte
	// program is a gpg wrapper that always uses Home: git's gpg.program.
	program string
	gpg     string
}

// GPGOptions are the key's details; the zero value makes an ed25519 key
// that signs, created now, that never expires.
type GPGOptions struct {
	// SigningSubkey makes the primary key certify only and adds an
	// ed25519 signing subkey, which then makes every signature.
	SigningSubkey bool
	// Created, when set, is the key's creation time (gpg
	// --faked-system-time).
	Created time.Time
	// Expire is gpg's expiry for the key ("1d", "2y", an ISO date);
	// "" is never.
	Expire string
}

// NewGPGKey makes an OpenPGP key for userID in a new GnuPG home, with no
// passphrase. Cleanup stops the home's agent and removes it.
func NewGPGKey(tb testing.TB, userID string, opts GPGOptions) *GPGKey {
	tb.Helper()
	gpg := need(tb, "gpg", "gnupg")
	home, err := os.MkdirTemp("/tmp", "g")
	if err != nil {
		tb.Fatalf("sigtest: %v", err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		tb.Fatalf("sigtest: %v", err)
	}
	tb.Cleanup(func() {
		// Stop the agent gpg started for this home (and only it), then
		// remove the home.
		if gpgconf, err := exec.LookPath("gpgconf"); err == nil {
			cmd := exec.Command(gpgconf, "--homedir", home, "--kill", "gpg-agent")
			_ = cmd.Run()
		}
		os.RemoveAll(home)
	})
	k := &GPGKey{Home: home, UserID: userID, gpg: gpg, program: filepath.Join(home, "gpg.sh")}
	script := fmt.Sprintf("#!/bin/sh\nexec %q --homedir %q --batch --no-tty \"$@\"\n", gpg, home)
	if err := os.WriteFile(k.program, []byte(script), 0o700); err != nil {
		tb.Fatalf("sigtest: %v", err)
	}
	expire := opts.Expire
	if expire == "" {
		expire = "never"
	}
	usage := "sign,cert"
	if opts.SigningSubkey {
		usage = "cert"
	}
	k.Run(tb, opts.Created, "--passphrase", "", "--quick-gen-key", userID, "ed25519", usage, expire)
	k.Fingerprint = k.primaryFingerprint(tb)
	if opts.SigningSubkey {
		k.Run(tb, opts.Created, "--passphrase", "", "--quick-add-key", k.Fingerprint, "ed25519", "sign", expire)
	}
	k.Export(tb)
	return k
}

// Run runs gpg with args in the key's home, at the faked time at when it
// is set, and returns its standard output.
func (k *GPGKey) Run(tb testing.TB, at time.Time, args ...string) []byte {
	tb.Helper()
	base := []string{"--homedir", k.Home, "--batch", "--no-tty", "--pinentry-mode", "loopback"}
	if !at.IsZero() {
		base = append(base, "--faked-system-time", at.UTC().Format("20060102T150405")+"!")
	}
	return run(tb, nil, nil, k.gpg, append(base, args...)...)
}

func (k *GPGKey) primaryFingerprint(tb testing.TB) string {
	tb.Helper()
	out := k.Run(tb, time.Time{}, "--with-colons", "--list-keys", k.UserID)
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "pub:") {
			for _, f := range lines[i+1:] {
				if strings.HasPrefix(f, "fpr:") {
					parts := strings.Split(f, ":")
					if len(parts) > 9 {
						return parts[9]
					}
				}
			}
		}
	}
	tb.Fatalf("sigtest: no fingerprint in gpg --list-keys output: %s", out)
	return ""
}

// Export re-reads the armored public key (after a change: a new expiry, a
// revocation) into Public and returns it.
func (k *GPGKey) Export(tb testing.TB) []byte {
	tb.Helper()
	k.Public = k.Run(tb, time.Time{}, "--armor", "--export", k.Fingerprint)
	if !bytes.Contains(k.Public, []byte("BEGIN PGP PUBLIC KEY BLOCK")) {
		tb.Fatalf("sigtest: gpg --export gave no public key: %q", k.Public)
	}
	return k.Public
}

// WritePublic writes the armored public key to a file in dir and returns
// its path: an openpgp_keys file.
func (k *GPGKey) WritePublic(tb testing.TB, dir string) string {
	tb.Helper()
	p := filepath.Join(dir, strings.ReplaceAll(k.Fingerprint[len(k.Fingerprint)-8:], "/", "")+".asc")
	if err := os.WriteFile(p, k.Public, 0o644); err != nil {
		tb.Fatalf("sigtest: %v", err)
	}
	return p
}

// SignDetached signs payload the way git has gpg sign an object (gpg
// -bsau KEY: binary detached, armored), at the faked time at when it is
// set, with gpgArgs added (such as "--default-sig-expire", "1d"), and
// returns the armored signature.
func (k *GPGKey) SignDetached(tb testing.TB, payload []byte, at time.Time, gpgArgs ...string) []byte {
	tb.Helper()
	base := []string{"--homedir", k.Home, "--batch", "--no-tty", "--pinentry-mode", "loopback"}
	if !at.IsZero() {
		base = append(base, "--faked-system-time", at.UTC().Format("20060102T150405")+"!")
	}
	base = append(base, gpgArgs...)
	return run(tb, payload, nil, k.gpg, append(base, "-bsau", k.Fingerprint)...)
}

// GitConfig makes git sign with this key through gpg in the key's home.
func (k *GPGKey) GitConfig() []string {
	return []string{
		"-c", "gpg.format=openpgp",
		"-c", "gpg.program=" + k.program,
		"-c", "user.signingkey=" + k.Fingerprint,
	}
}

// SSHKey is an ed25519 SSH key pair without a passphrase.
type SSHKey struct {
	// Private is the private key file's path.
	Private string
	// Public is the public key line ("ssh-ed25519 AAAA... comment").
	Public string
	// Fingerprint is "SHA256:...", what sigverify.Signature.Key says.
	Fingerprint string
	keygen      string
}

// NewSSHKey makes an ed25519 key pair (ssh-keygen -t ed25519 -N "") in a
// test folder.
func NewSSHKey(tb testing.TB, comment string) *SSHKey {
	tb.Helper()
	keygen := need(tb, "ssh-keygen", "openssh-client")
	path := filepath.Join(tb.TempDir(), "id_ed25519")
	run(tb, nil, nil, keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path)
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		tb.Fatalf("sigtest: %v", err)
	}
	fp := strings.Fields(string(run(tb, nil, nil, keygen, "-l", "-E", "sha256", "-f", path+".pub")))
	if len(fp) < 2 {
		tb.Fatalf("sigtest: ssh-keygen -l gave no fingerprint")
	}
	return &SSHKey{Private: path, Public: strings.TrimSpace(string(pub)), Fingerprint: fp[1], keygen: keygen}
}

// AllowedSigner returns an allowed_signers line for the key: principals
// (comma-separated), then the options as given (`valid-after="20240101"`,
// `namespaces="git"`), then the key.
func (k *SSHKey) AllowedSigner(principals string, options ...string) string {
	line := principals
	if len(options) > 0 {
		line += " " + strings.Join(options, ",")
	}
	return line + " " + k.Public + "\n"
}

// SignDetached signs payload with ssh-keygen -Y sign in namespace (git
// uses "git") and returns the armored signature.
func (k *SSHKey) SignDetached(tb testing.TB, payload []byte, namespace string) []byte {
	tb.Helper()
	dir := tb.TempDir()
	msg := filepath.Join(dir, "payload")
	if err := os.WriteFile(msg, payload, 0o600); err != nil {
		tb.Fatalf("sigtest: %v", err)
	}
	run(tb, nil, nil, k.keygen, "-Y", "sign", "-n", namespace, "-f", k.Private, msg)
	sig, err := os.ReadFile(msg + ".sig")
	if err != nil {
		tb.Fatalf("sigtest: %v", err)
	}
	return sig
}

// GitConfig makes git sign with this key through ssh-keygen.
func (k *SSHKey) GitConfig() []string {
	return []string{
		"-c", "gpg.format=ssh",
		"-c", "gpg.ssh.program=" + k.keygen,
		"-c", "user.signingkey=" + k.Private,
	}
}

// WriteAllowedSigners writes lines (from AllowedSigner) to an
// allowed_signers file in dir and returns its path.
func WriteAllowedSigners(tb testing.TB, dir string, lines ...string) string {
	tb.Helper()
	p := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644); err != nil {
		tb.Fatalf("sigtest: %v", err)
	}
	return p
}

// Commit stages everything in r's working clone and commits it signed by
// s (git commit -S), even when nothing changed, and returns the commit id.
// The commit is not pushed (r.Push does).
func Commit(r *gittest.Repo, s Signer, msg string) string {
	r.Git("add", "-A")
	r.Git(append(s.GitConfig(), "commit", "--quiet", "--allow-empty", "--no-verify", "-S", "-m", msg)...)
	return r.Head()
}

// Tag makes (or moves) name a signed annotated tag (git tag -s) at r's
// current commit, pushes it with force, and returns the tag object's id.
func Tag(r *gittest.Repo, s Signer, name string) string {
	r.Git(append(s.GitConfig(), "tag", "--force", "-s", "-m", "tag "+name, name)...)
	r.Git("push", "--quiet", "--force", r.BareDir(), "refs/tags/"+name+":refs/tags/"+name)
	return r.Git("rev-parse", "refs/tags/"+name)
}

// Object returns the raw content of object id in r's working clone (git
// cat-file TYPE ID: the bytes after git's "type size\0" header) and its
// type: what sigverify.Keys.Verify reads.
func Object(tb testing.TB, r *gittest.Repo, id string) (kind string, raw []byte) {
	tb.Helper()
	env := gittest.Env()
	kind = strings.TrimSpace(string(run(tb, nil, env, "git", "-C", r.WorkDir(), "cat-file", "-t", id)))
	return kind, run(tb, nil, env, "git", "-C", r.WorkDir(), "cat-file", kind, id)
}

// WithSignature returns a commit's content (unsigned, or with its gpgsig
// header replaced) carrying sig as its gpgsig header, the way git writes
// it: for tests that pair an object with a signature made apart (at a
// faked time, or over other bytes).
func WithSignature(commit, sig []byte) []byte {
	headers, body, _ := bytes.Cut(commit, []byte("\n\n"))
	var out []byte
	skipping := false
	for _, l := range bytes.Split(headers, []byte("\n")) {
		if skipping && len(l) > 0 && l[0] == ' ' {
			continue
		}
		skipping = bytes.HasPrefix(l, []byte("gpgsig "))
		if skipping {
			continue
		}
		out = append(out, l...)
		out = append(out, '\n')
	}
	lines := bytes.Split(bytes.TrimRight(sig, "\n"), []byte("\n"))
	out = append(out, "gpgsig "...)
	out = append(out, bytes.Join(lines, []byte("\n "))...)
	out = append(out, '\n', '\n')
	return append(out, body...)
}
