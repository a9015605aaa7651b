// Package sshgit is a real SSH git server on loopback for tests: an
// in-process golang.org/x/crypto/ssh server that accepts the public keys
// it is given and runs the real git-upload-pack for "exec" requests over
// a folder of bare repositories, as a hosted service's deploy keys do.
package sshgit

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/skillreg/skillreg/internal/gittest"
)

// User is the only account the server knows, as on hosted services.
const User = "git"

// Server serves the bare repositories under Root at
// ssh://git@Addr/<name>.git.
type Server struct {
	root    string
	ln      net.Listener
	config  *ssh.ServerConfig
	hostKey ssh.Signer

	mu      sync.Mutex
	allowed map[string]bool // ssh.PublicKey.Marshal() of the accepted keys
	conns   map[net.Conn]bool
	closed  bool

	wg                     sync.WaitGroup
	accepted, refused, ran atomic.Int64
}

// Start serves root on 127.0.0.1 at an ephemeral port with a fresh ed25519
// host key, accepting the given public keys for User, and stops at the
// test's end.
func Start(tb testing.TB, root string, keys ...ssh.PublicKey) *Server {
	tb.Helper()
	if _, err := exec.LookPath("git-upload-pack"); err != nil {
		tb.Fatalf("sshgit: git-upload-pack not found: %v", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{root: root, ln: ln, hostKey: hostKey, allowed: map[string]bool{}, conns: map[net.Conn]bool{}}
	for _, k := range keys {
		s.Allow(k)
	}
	s.config = &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			s.mu.Lock()
			ok := s.allowed[string(key.Marshal())]
			s.mu.Unlock()
			if !ok || meta.User() != User {
				s.refused.Add(1)
				return nil, fmt.Errorf("sshgit: key %s for %q not accepted", ssh.FingerprintSHA256(key), meta.User())
			}
			s.accepted.Add(1)
			return &ssh.Permissions{}, nil
		},
	}
	s.config.AddHostKey(hostKey)
	s.wg.Add(1)
	go s.serve()
	tb.Cleanup(s.Close)
	return s
}

// Allow accepts another public key.
func (s *Server) Allow(key ssh.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowed[string(key.Marshal())] = true
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the ssh URL of the repository <name>.git under the root.
func (s *Server) URL(name string) string {
	return "ssh://" + User + "@" + s.Addr() + "/" + name + ".git"
}

// HostKey is the server's public host key.
func (s *Server) HostKey() ssh.PublicKey { return s.hostKey.PublicKey() }

// KnownHostsLine is the known_hosts line that trusts the server at its
// address ("[127.0.0.1]:PORT ssh-ed25519 AAAA...").
func (s *Server) KnownHostsLine() string {
	return knownhosts.Line([]string{knownhosts.Normalize(s.Addr())}, s.HostKey())
}

// Accepted, Refused and Ran count the keys accepted and refused, and the
// upload-pack processes run.
func (s *Server) Accepted() int64 { return s.accepted.Load() }

// Refused counts the public keys the server refused.
func (s *Server) Refused() int64 { return s.refused.Load() }

// Ran counts the git-upload-pack processes the server ran.
func (s *Server) Ran() int64 { return s.ran.Load() }

// Close stops accepting, drops every connection and waits for their
// handlers.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.handle(c)
		}()
	}
}

func (s *Server) handle(c net.Conn) {
	conn, chans, reqs, err := ssh.NewServerConn(c, s.config)
	if err != nil {
		return // a refused key, a refused host key, a dropped client
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.session(ch, creqs)
		}()
	}
}

// session answers a session's requests: "env" is acknowledged (the
// protocol version is what upload-pack advertises by itself), one "exec"
// of git-upload-pack runs; anything else is refused.
func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "env":
			_ = req.Reply(true, nil)
		case "exec":
			var cmd struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &cmd); err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			dir, err := s.repoDir(cmd.Command)
			if err != nil {
				_ = req.Reply(true, nil)
				fmt.Fprintf(ch.Stderr(), "fatal: %v\n", err)
				exit(ch, 128)
				return
			}
			_ = req.Reply(true, nil)
			exit(ch, s.uploadPack(ch, dir))
			return
		default:
			_ = req.Reply(false, nil)
		}
	}
}

// repoDir reads "git-upload-pack '<path>'" as go-git and git send it and
// returns the repository's directory under the root.
func (s *Server) repoDir(command string) (string, error) {
	prog, arg, ok := strings.Cut(command, " ")
	if !ok || prog != "git-upload-pack" {
		return "", fmt.Errorf("only git-upload-pack is served, not %q", prog)
	}
	p, err := shellUnquote(arg)
	if err != nil {
		return "", err
	}
	clean := path.Clean("/" + strings.TrimPrefix(p, "~/"))
	if clean == "/" {
		return "", errors.New("no repository path")
	}
	dir := filepath.Join(s.root, filepath.FromSlash(clean))
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return "", fmt.Errorf("'%s' does not appear to be a git repository", p)
	}
	return dir, nil
}

// shellUnquote undoes the single quoting git and go-git apply to the path
// ('a'\”b' for a'b).
func shellUnquote(s string) (string, error) {
	var b strings.Builder
	for len(s) > 0 {
		switch {
		case s[0] == '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return "", errors.New("unterminated quote")
			}
			b.WriteString(s[1 : 1+end])
			s = s[2+end:]
		case s[0] == '\\' && len(s) > 1:
			b.WriteByte(s[1])
			s = s[2:]
		default:
			return "", fmt.Errorf("unquoted character %q in the path", s[0])
		}
	}
	return b.String(), nil
}

// uploadPack runs the real git-upload-pack over the channel and returns
// its exit status. Stdin is copied by hand (not waited for): the client
// may keep its side open after upload-pack is done.
func (s *Server) uploadPack(ch ssh.Channel, dir string) int {
	s.ran.Add(1)
	cmd := exec.Command("git-upload-pack", "--strict", dir)
	cmd.Env = append(os.Environ(), gittest.Env()...)
	cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 128
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(ch.Stderr(), "fatal: %v\n", err)
		return 128
	}
	go func() {
		_, _ = io.Copy(stdin, ch)
		stdin.Close()
	}()
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		return 128
	}
	return 0
}

func exit(ch ssh.Channel, status int) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(status))
	_, _ = ch.SendRequest("exit-status", false, b[:])
}

// NewKey makes an ed25519 key pair with the real ssh-keygen: the private
// key file in OpenSSH form (protected by passphrase unless it is empty),
// its bytes and its public key. The passphrase's KDF runs 2 rounds, not
// ssh-keygen's 16: the format is the same, and a decryption under -race
// takes milliseconds instead of seconds.
func NewKey(tb testing.TB, passphrase string) (file string, private []byte, public ssh.PublicKey) {
	tb.Helper()
	file = filepath.Join(tb.TempDir(), "id_ed25519")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-a", "2", "-N", passphrase, "-C", "sshgit", "-f", file).CombinedOutput()
	if err != nil {
		tb.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	if private, err = os.ReadFile(file); err != nil {
		tb.Fatal(err)
	}
	pub, err := os.ReadFile(file + ".pub")
	if err != nil {
		tb.Fatal(err)
	}
	if public, _, _, _, err = ssh.ParseAuthorizedKey(pub); err != nil {
		tb.Fatal(err)
	}
	return file, private, public
}

// WriteKnownHosts writes a known_hosts file of lines and returns its path.
func WriteKnownHosts(tb testing.TB, lines ...string) string {
	tb.Helper()
	file := filepath.Join(tb.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return file
}

// OtherHostKeyLine is a known_hosts line for addr with a fresh key that is
// not the server's: the file of a client that knew another server there.
func OtherHostKeyLine(tb testing.TB, addr string) string {
	tb.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		tb.Fatal(err)
	}
	return knownhosts.Line([]string{knownhosts.Normalize(addr)}, k)
}
