package gitstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/sshgit"
)

// sshFixture is a repository served over real SSH by an in-process
// server that accepts one key, and a pool to fetch it with.
type sshFixture struct {
	srv     *sshgit.Server
	remote  *gittest.Repo
	commit  string
	repo    *Repo
	keyFile string
	key     []byte
	known   string // a known_hosts file trusting the server
	logs    *bytes.Buffer
}

func newSSHFixture(t *testing.T, passphrase string) *sshFixture {
	t.Helper()
	git := gittest.NewServer(t)
	remote := git.CreateRepo("skills")
	remote.WriteFiles(map[string]string{"skills/a/SKILL.md": "---\nname: a\n---\n"})
	commit := remote.Commit("first")
	remote.Push("main")
	keyFile, key, pub := sshgit.NewKey(t, passphrase)
	srv := sshgit.Start(t, filepath.Dir(remote.BareDir()), pub)
	logs := &bytes.Buffer{}
	pool, err := NewPool(t.TempDir(), PoolOptions{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	repo, err := pool.Repo(srv.URL("skills"))
	if err != nil {
		t.Fatal(err)
	}
	return &sshFixture{srv: srv, remote: remote, commit: commit, repo: repo, keyFile: keyFile, key: key,
		known: sshgit.WriteKnownHosts(t, srv.KnownHostsLine()), logs: logs}
}

func (f *sshFixture) sync(auth Auth) (Resolved, error) {
	ctx := context.Background()
	refs, err := f.repo.ListRemote(ctx, auth)
	if err != nil {
		return Resolved{}, err
	}
	res, err := refs.Resolve(gitref.Pin{Kind: gitref.Default})
	if err != nil {
		return res, err
	}
	return res, f.repo.Fetch(ctx, res, auth)
}

// TestSSHFetchWithKey: a deploy key accepted by the server lists and
// fetches over real SSH (the real git-upload-pack behind an x/crypto/ssh
// server), with the host key checked against known_hosts; from the key
// file (read at each call) and from the key's bytes alike.
func TestSSHFetchWithKey(t *testing.T) {
	t.Parallel()
	f := newSSHFixture(t, "")
	res, err := f.sync(Auth{SSHKeyFile: f.keyFile, KnownHostsFile: f.known})
	if err != nil {
		t.Fatalf("sync over ssh: %v", err)
	}
	if res.Commit != f.commit || !f.repo.HasCommit(f.commit) {
		t.Fatalf("resolved %+v, want %s held", res, f.commit)
	}
	if got := snapshot(t, f.repo, f.commit, ""); got["skills/a/SKILL.md"] != "---\nname: a\n---\n" {
		t.Fatalf("snapshot = %v", got)
	}
	next := f.remote.Commit("second")
	f.remote.Push("main")
	if res, err = f.sync(Auth{SSHKey: f.key, KnownHostsFile: f.known}); err != nil || res.Commit != next {
		t.Fatalf("second sync = %+v, %v; want %s", res, err, next)
	}
	if f.srv.Accepted() == 0 || f.srv.Ran() < 3 {
		t.Fatalf("server accepted %d keys and ran %d upload-packs", f.srv.Accepted(), f.srv.Ran())
	}
}

// TestSSHWrongKey: a key the server does not accept is an authentication
// failure (stalled as auth_refused by the registry), not a network error.
func TestSSHWrongKey(t *testing.T) {
	t.Parallel()
	f := newSSHFixture(t, "")
	other, _, _ := sshgit.NewKey(t, "")
	_, err := f.sync(Auth{SSHKeyFile: other, KnownHostsFile: f.known})
	if !errors.Is(err, ErrAuth) || errors.Is(err, ErrNetwork) || errors.Is(err, ErrHostKey) {
		t.Fatalf("err = %v; want ErrAuth", err)
	}
	if !strings.Contains(err.Error(), "list refs "+f.repo.URL()+": ") || !strings.Contains(err.Error(), "refused the ssh key") {
		t.Fatalf("err = %q; want the operation, the URL and the refusal", err)
	}
	if f.srv.Refused() == 0 || f.srv.Ran() != 0 {
		t.Fatalf("server refused %d keys, ran %d upload-packs", f.srv.Refused(), f.srv.Ran())
	}
}

// TestSSHUnknownHostKey: a server whose host is not in known_hosts is
// refused before the key is offered, with an error that says so and
// shows the key it offered, so an operator can check it.
func TestSSHUnknownHostKey(t *testing.T) {
	t.Parallel()
	f := newSSHFixture(t, "")
	known := sshgit.WriteKnownHosts(t, sshgit.OtherHostKeyLine(t, "other.example:22"))
	_, err := f.sync(Auth{SSHKeyFile: f.keyFile, KnownHostsFile: known})
	if !errors.Is(err, ErrHostKey) || errors.Is(err, ErrAuth) || errors.Is(err, ErrNetwork) {
		t.Fatalf("err = %v; want ErrHostKey only", err)
	}
	fp := strings.TrimPrefix(fingerprint(f.srv), "SHA256:")
	if !strings.Contains(err.Error(), "is unknown") || !strings.Contains(err.Error(), fp) || !strings.Contains(err.Error(), f.srv.Addr()) {
		t.Fatalf("err = %q; want unknown, the address and the offered key's fingerprint %s", err, fp)
	}
	if f.srv.Accepted()+f.srv.Refused() != 0 {
		t.Fatal("the key was offered to a server whose host key is not trusted")
	}
	// No known_hosts file at all is no trust on first use either.
	if _, err := f.sync(Auth{SSHKeyFile: f.keyFile}); !errors.Is(err, ErrHostKey) || !strings.Contains(err.Error(), "known_hosts_file") {
		t.Fatalf("without known_hosts: err = %v; want ErrHostKey naming auth.known_hosts_file", err)
	}
}

// TestSSHChangedHostKey: known_hosts holds another key for the server's
// address: refused as changed, naming the line that holds the old key.
func TestSSHChangedHostKey(t *testing.T) {
	t.Parallel()
	f := newSSHFixture(t, "")
	known := sshgit.WriteKnownHosts(t, "# other servers", sshgit.OtherHostKeyLine(t, f.srv.Addr()))
	_, err := f.sync(Auth{SSHKeyFile: f.keyFile, KnownHostsFile: known})
	if !errors.Is(err, ErrHostKey) || errors.Is(err, ErrNetwork) {
		t.Fatalf("err = %v; want ErrHostKey", err)
	}
	if !strings.Contains(err.Error(), "changed") || !strings.Contains(err.Error(), known+":2") {
		t.Fatalf("err = %q; want changed, and the file and line of the known key", err)
	}
	if f.srv.Accepted()+f.srv.Refused() != 0 || f.repo.HasCommit(f.commit) {
		t.Fatal("a server whose host key changed was given the key or served a commit")
	}
}

// TestSSHPassphraseKey: a passphrase-protected key (ssh-keygen's bcrypt
// KDF) is used with its passphrase; without it, or with a wrong one, the
// call fails with ErrSSHKey before connecting, and the passphrase is in
// no error.
func TestSSHPassphraseKey(t *testing.T) {
	t.Parallel()
	const pass = "correct horse battery staple"
	f := newSSHFixture(t, pass)
	if _, err := f.sync(Auth{SSHKeyFile: f.keyFile, SSHPassphrase: pass, KnownHostsFile: f.known}); err != nil {
		t.Fatalf("with the passphrase: %v", err)
	}
	for _, tc := range []struct{ pass, want string }{
		{"", "none is configured"},
		{"wrong " + pass, "does not decrypt"},
	} {
		_, err := f.sync(Auth{SSHKeyFile: f.keyFile, SSHPassphrase: tc.pass, KnownHostsFile: f.known})
		if !errors.Is(err, ErrSSHKey) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), f.keyFile) {
			t.Fatalf("passphrase %q: err = %v; want ErrSSHKey, %q and the file", tc.pass, err, tc.want)
		}
		if strings.Contains(err.Error(), pass) {
			t.Fatalf("the error shows the passphrase: %v", err)
		}
	}
	if n := f.srv.Accepted(); n != 2 { // ListRemote and Fetch of the first sync
		t.Fatalf("server accepted %d keys; a key that did not decrypt reached it", n)
	}
}

// TestSSHInsecureIgnoreHostKey: with the flag, a server no known_hosts
// file vouches for is used.
func TestSSHInsecureIgnoreHostKey(t *testing.T) {
	t.Parallel()
	f := newSSHFixture(t, "")
	known := sshgit.WriteKnownHosts(t, sshgit.OtherHostKeyLine(t, f.srv.Addr()))
	if _, err := f.sync(Auth{SSHKeyFile: f.keyFile, KnownHostsFile: known}); !errors.Is(err, ErrHostKey) {
		t.Fatalf("without the flag: %v; want ErrHostKey", err)
	}
	res, err := f.sync(Auth{SSHKeyFile: f.keyFile, InsecureIgnoreHostKey: true})
	if err != nil || res.Commit != f.commit {
		t.Fatalf("with the flag: %+v, %v", res, err)
	}
}

// TestSSHKeyNeverShown: the key, its passphrase and the key file's bytes
// reach no error, no log line and no formatting of Auth.
func TestSSHKeyNeverShown(t *testing.T) {
	t.Parallel()
	const pass = "s3cret-passphrase"
	f := newSSHFixture(t, pass)
	auth := Auth{SSHKey: f.key, SSHPassphrase: pass, KnownHostsFile: f.known}
	var texts []string
	if _, err := f.sync(auth); err != nil {
		t.Fatal(err)
	}
	for _, a := range []Auth{
		{SSHKey: f.key, SSHPassphrase: "wrong", KnownHostsFile: f.known},
		{SSHKey: f.key, SSHPassphrase: pass, KnownHostsFile: sshgit.WriteKnownHosts(t, sshgit.OtherHostKeyLine(t, f.srv.Addr()))},
		{SSHKey: []byte(pass), SSHPassphrase: pass, KnownHostsFile: f.known},
	} {
		if _, err := f.sync(a); err == nil {
			t.Fatalf("%v: no error", a)
		} else {
			texts = append(texts, err.Error())
		}
	}
	texts = append(texts, fmt.Sprint(auth), fmt.Sprintf("%+v", auth), fmt.Sprintf("%#v", auth), f.logs.String())
	body := string(bytes.Join(bytes.Split(f.key, []byte("\n"))[1:3], nil)) // the key's base64, past its header line
	for _, s := range texts {
		if strings.Contains(s, pass) || strings.Contains(s, body) || strings.Contains(s, "PRIVATE KEY") {
			t.Fatalf("a secret is shown: %q", s)
		}
	}
}

// TestSSHCallEndsWithContext: a server that accepts the TCP connection
// and never speaks SSH holds a call only until its context ends (go-git's
// SSH transport takes no context; the dialer closes the connection).
func TestSSHCallEndsWithContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case c := <-accepted:
			c.Close()
		default:
		}
	})
	keyFile, _, _ := sshgit.NewKey(t, "")
	pool := newPool(t, t.TempDir())
	repo, err := pool.Repo("ssh://git@" + ln.Addr().String() + "/hung.git")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := repo.ListRemote(ctx, Auth{SSHKeyFile: keyFile, InsecureIgnoreHostKey: true})
		done <- err
	}()
	var c net.Conn
	select {
	case c = <-accepted:
		accepted <- c // for the cleanup
	case err := <-done:
		t.Fatalf("ListRemote returned before connecting: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ListRemote still hangs a minute after its context ended")
	}
}

func fingerprint(s *sshgit.Server) string { return ssh.FingerprintSHA256(s.HostKey()) }

// BenchmarkPollListing is what a poll of an unchanged source costs: one
// ref listing, over SSH (a TCP connection, the key exchange, the host key
// check, public key auth, an upload-pack process) and over smart HTTP to
// the same repository.
func BenchmarkPollListing(b *testing.B) {
	git := gittest.NewServer(b)
	remote := git.CreateRepo("skills")
	remote.WriteFiles(map[string]string{"skills/a/SKILL.md": "---\nname: a\n---\n"})
	remote.Commit("first")
	remote.Push("main")
	keyFile, _, pub := sshgit.NewKey(b, "")
	srv := sshgit.Start(b, filepath.Dir(remote.BareDir()), pub)
	known := sshgit.WriteKnownHosts(b, srv.KnownHostsLine())
	pool, err := NewPool(b.TempDir(), PoolOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	for _, c := range []struct {
		name, url string
		auth      Auth
	}{
		{"ssh", srv.URL("skills"), Auth{SSHKeyFile: keyFile, KnownHostsFile: known}},
		{"http", remote.URL(), Auth{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			repo, err := pool.Repo(c.url)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := repo.ListRemote(context.Background(), c.auth); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSSHErrorClasses: over SSH as over HTTP, a repository the server does
// not have is ErrRepoNotFound (stalled), a server that is not there is
// ErrNetwork (retried).
func TestSSHErrorClasses(t *testing.T) {
	t.Parallel()
	f := newSSHFixture(t, "")
	pool := newPool(t, t.TempDir())
	missing, err := pool.Repo(f.srv.URL("nope"))
	if err != nil {
		t.Fatal(err)
	}
	auth := Auth{SSHKeyFile: f.keyFile, KnownHostsFile: f.known}
	if _, err := missing.ListRemote(context.Background(), auth); !errors.Is(err, ErrRepoNotFound) {
		t.Fatalf("missing repository: %v; want ErrRepoNotFound", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	gone, err := pool.Repo("ssh://git@" + addr + "/skills.git")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.ListRemote(context.Background(), Auth{SSHKeyFile: f.keyFile, InsecureIgnoreHostKey: true}); !errors.Is(err, ErrNetwork) || errors.Is(err, ErrAuth) {
		t.Fatalf("no server: %v; want ErrNetwork", err)
	}
}
