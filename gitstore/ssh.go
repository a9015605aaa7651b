package gitstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/net/proxy"

	"github.com/skillreg/skillreg/gitref"
)

// ErrHostKey means an SSH server's host key is not trusted: its host is not
// in the known_hosts file (unknown), or the file holds another key for it
// (changed, which is what a man in the middle looks like). Retrying cannot
// mend it: the known_hosts file (or the server) must change.
var ErrHostKey = errors.New("ssh host key not trusted")

// ErrSSHKey means the configured SSH private key cannot be used: the file
// is unreadable, it is not a private key, or its passphrase is missing or
// wrong. Its messages name the file, never the key or the passphrase.
var ErrSSHKey = errors.New("ssh private key unusable")

// maxSSHKeyFile bounds the private key file read at each call; an OpenSSH
// RSA-16384 key is about 13 KiB.
const maxSSHKeyFile = 64 << 10

// sshDialTimeout bounds the TCP connect of an SSH call; the call's context
// bounds the rest (see sshDialer).
const sshDialTimeout = 30 * time.Second

// sshMethod builds the go-git auth method of an SSH call: the private key
// and the known_hosts check. It never falls back to
// an agent or to ~/.ssh/known_hosts: what a source presents and trusts is
// what its configuration says.
func (a Auth) sshMethod(user string) (*sshAuth, error) {
	key := a.SSHKey
	if len(key) == 0 {
		if a.SSHKeyFile == "" {
			return nil, fmt.Errorf("%w: no ssh key configured (auth.ssh_key_file)", ErrSSHKey)
		}
		var err error
		if key, err = readBounded(a.SSHKeyFile, maxSSHKeyFile); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSSHKey, err)
		}
	}
	signer, err := parseSSHKey(key, a.SSHPassphrase)
	if err != nil {
		if a.SSHKeyFile != "" && len(a.SSHKey) == 0 {
			return nil, fmt.Errorf("%w: %s: %w", ErrSSHKey, a.SSHKeyFile, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrSSHKey, err)
	}
	m := &sshAuth{user: user, signer: signer}
	if user == "" {
		m.user = gitref.DefaultSSHUser
	}
	switch {
	case a.InsecureIgnoreHostKey:
		m.hostKey = ssh.InsecureIgnoreHostKey() //nolint:gosec // asked for by insecure_ignore_host_key, warned of at every sync
	case a.KnownHostsFile == "":
		return nil, fmt.Errorf("%w: no known_hosts file configured (auth.known_hosts_file)", ErrHostKey)
	default:
		db, err := knownhosts.NewDB(a.KnownHostsFile)
		if err != nil {
			return nil, fmt.Errorf("%w: known_hosts file: %w", ErrHostKey, err)
		}
		m.db, m.hostKey = db, db.HostKeyCallback()
	}
	return m, nil
}

func parseSSHKey(key []byte, passphrase string) (ssh.Signer, error) {
	signer, err := ssh.ParsePrivateKey(key)
	var missing *ssh.PassphraseMissingError
	switch {
	case err == nil && passphrase != "":
		return nil, errors.New("the key is not protected by a passphrase, but one is configured")
	case err == nil:
		return signer, nil
	case errors.As(err, &missing) && passphrase == "":
		return nil, errors.New("the key is protected by a passphrase, and none is configured (auth.ssh_passphrase_env)")
	case errors.As(err, &missing):
		signer, err = ssh.ParsePrivateKeyWithPassphrase(key, []byte(passphrase))
		if err != nil {
			// x509.IncorrectPasswordError and bcrypt_pbkdf's errors say
			// nothing secret, but a wrong passphrase deserves its name.
			return nil, errors.New("the passphrase does not decrypt the key")
		}
		return signer, nil
	}
	// ssh's parse errors describe the format ("ssh: no key found"), never
	// the bytes.
	return nil, fmt.Errorf("not a private key: %w", err)
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a private key", path, limit)
	}
	return b, nil
}

// sshAuth is go-git's SSH auth method for one call. It is built per call
// (ListRemote, Fetch), so the key and known_hosts files are read at each
// sync: a rotated key or an edited known_hosts file takes effect without a
// reload.
type sshAuth struct {
	user    string
	signer  ssh.Signer
	hostKey ssh.HostKeyCallback
	db      *knownhosts.HostKeyDB // nil with the insecure flag
	// algorithms are the host's known key algorithms, so that the server
	// offers a key the file can vouch for (not, say, its RSA key when the
	// file lists its ed25519 one).
	algorithms []string
}

var _ gitssh.AuthMethod = (*sshAuth)(nil)

func (m *sshAuth) Name() string { return gitssh.PublicKeysName }

// String names the user and the key's fingerprint (public), never the key.
func (m *sshAuth) String() string {
	return fmt.Sprintf("ssh public key %s for %s", ssh.FingerprintSHA256(m.signer.PublicKey()), m.user)
}

// ClientConfig is go-git's SSH client configuration for the call.
func (m *sshAuth) ClientConfig() (*ssh.ClientConfig, error) {
	return &ssh.ClientConfig{
		User:              m.user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(m.signer)},
		HostKeyCallback:   m.checkHostKey,
		HostKeyAlgorithms: m.algorithms,
		Timeout:           sshDialTimeout,
	}, nil
}

func (m *sshAuth) hostKeyAlgorithms(hostWithPort string) []string {
	if m.db == nil {
		return nil
	}
	return m.db.HostKeyAlgorithms(hostWithPort)
}

func (m *sshAuth) checkHostKey(hostname string, remote net.Addr, key ssh.PublicKey) error {
	err := m.hostKey(hostname, remote, key)
	if err == nil {
		return nil
	}
	he := &hostKeyError{host: hostname, offered: key.Type() + " " + ssh.FingerprintSHA256(key)}
	var ke *xknownhosts.KeyError
	switch {
	case errors.As(err, &ke) && len(ke.Want) > 0:
		he.changed = true
		for _, w := range ke.Want {
			he.known = append(he.known, fmt.Sprintf("%s:%d (%s %s)", w.Filename, w.Line, w.Key.Type(), ssh.FingerprintSHA256(w.Key)))
		}
	case errors.As(err, &ke):
	default:
		var re *xknownhosts.RevokedError
		if errors.As(err, &re) {
			he.revoked = true
		} else {
			he.other = err
		}
	}
	return he
}

// hostKeyError is a refused host key, told the way an operator fixes it.
type hostKeyError struct {
	host    string   // host:port as dialled
	offered string   // the server's key: type and SHA256 fingerprint
	changed bool     // the file holds other keys for the host
	known   []string // where, when changed
	revoked bool
	other   error
}

func (e *hostKeyError) Error() string {
	switch {
	case e.changed:
		return fmt.Sprintf("%v: host key of %s changed: the server offers %s, known_hosts has %s (a man in the middle looks like this: confirm the new key before replacing the line)",
			ErrHostKey, e.host, e.offered, strings.Join(e.known, ", "))
	case e.revoked:
		return fmt.Sprintf("%v: host key of %s (%s) is @revoked in known_hosts", ErrHostKey, e.host, e.offered)
	case e.other != nil:
		return fmt.Sprintf("%v: host key of %s (%s) not checked: %v", ErrHostKey, e.host, e.offered, e.other)
	}
	return fmt.Sprintf("%v: host key of %s is unknown: %s is not in known_hosts (add the server's key, checked against its published fingerprints)",
		ErrHostKey, e.host, e.offered)
}

func (e *hostKeyError) Unwrap() error { return ErrHostKey }

// sshSession opens an upload-pack session over SSH: the TCP connection is
// made by sshDialer, so it is closed when ctx ends (go-git's SSH transport
// takes no context: without it, a server that accepts the connection and
// never speaks would hold the call for ever).
func (r *Repo) sshSession(ctx context.Context, ep *transport.Endpoint, auth Auth) (transport.UploadPackSession, error) {
	m, err := auth.sshMethod(ep.User)
	if err != nil {
		return nil, err
	}
	id := registerDial(ctx)
	defer dials.Delete(id)
	ep.Proxy = transport.ProxyOptions{URL: dialScheme + "://" + id}
	port := ep.Port
	if port <= 0 {
		port = gitssh.DefaultPort
	}
	m.algorithms = m.hostKeyAlgorithms(net.JoinHostPort(ep.Host, strconv.Itoa(port)))
	return r.transport.NewUploadPackSession(ep, m)
}

// dialScheme is the proxy URL scheme under which go-git's SSH transport
// reaches sshDialer (x/net/proxy's registry of dialer types is the one
// hook it offers into how it connects).
const dialScheme = "skillreg-ssh-dial"

var (
	dials   sync.Map // id -> context.Context of the call
	dialSeq atomic.Uint64
)

// The registry of dialer types is a plain map: written here, before any
// goroutine can read it.
func init() {
	proxy.RegisterDialerType(dialScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		v, ok := dials.Load(u.Host)
		if !ok {
			return nil, errors.New("ssh dial: the call is over")
		}
		return sshDialer{call: v.(context.Context)}, nil
	})
}

func registerDial(ctx context.Context) string {
	id := "c" + strconv.FormatUint(dialSeq.Add(1), 10)
	dials.Store(id, ctx)
	return id
}

// sshDialer connects directly (no proxy from the environment), and closes
// the connection when the call's context ends.
type sshDialer struct{ call context.Context }

func (d sshDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d sshDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopEarly := context.AfterFunc(d.call, cancel)
	defer stopEarly()
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		if d.call.Err() != nil {
			return nil, d.call.Err()
		}
		return nil, err
	}
	stop := context.AfterFunc(d.call, func() { conn.Close() })
	return &callConn{Conn: conn, stop: stop}, nil
}

// callConn is a connection closed at the end of its call's context.
type callConn struct {
	net.Conn
	stop func() bool
}

func (c *callConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// The service account's ~/.ssh/config is not read: go-git would take a
// HostName and Port from it for the address it dials, which is not what
// the source's URL (and its known_hosts line) says. Set once, before any
// call: gitstore is go-git's only user in the process.
func init() { gitssh.DefaultSSHConfig = nil }

// sshTransport is go-git's SSH client. Its configuration is nil: go-git
// replaces every field of a call's configuration with a non-nil one's
// (overrideConfig), which would drop the key and the host key check.
var sshTransport = gitssh.DefaultClient

// sshError maps an SSH failure this package can name: the host key
// check's refusal, an unusable key (both told in our own words), or the
// server's refusal of the key; nil for any other.
func (r *Repo) sshError(op string, err error) error {
	var he *hostKeyError
	switch {
	case errors.As(err, &he):
		return fmt.Errorf("%s %s: %w", op, r.url, he)
	case errors.Is(err, ErrSSHKey), errors.Is(err, ErrHostKey):
		return fmt.Errorf("%s %s: %w", op, r.url, err)
	case strings.Contains(err.Error(), "ssh: unable to authenticate"):
		return fmt.Errorf("%s %s: %w: the server refused the ssh key (is its public key a deploy key of the repository?)", op, r.url, ErrAuth)
	}
	return nil
}

// repoScheme is the scheme of a canonical repository URL: "ssh" for the
// scp-like user@host:path.
func repoScheme(u string) string {
	scheme, _, ok := strings.Cut(u, "://")
	if !ok {
		return "ssh"
	}
	return scheme
}
