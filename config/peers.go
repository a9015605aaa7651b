package config

import (
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// DefaultPeersSecretEnv is peers_secret_env's default.
const DefaultPeersSecretEnv = "SKILLREG_PEERS_SECRET"

// maxPeersFileBytes bounds peers_secret_file and peers_ca_file.
const maxPeersFileBytes = 1 << 20

// MaxPeers bounds the peers list (each delivery is sent to every one).
const MaxPeers = 64

// PeerAddr is one entry of peers, as Validate parsed it: a static base
// URL, or a DNS name whose addresses are the peers (re-resolved while the
// daemon runs).
type PeerAddr struct {
	// URL is a static peer's base URL, scheme://host:port, without a
	// trailing slash; "" for a dns: peer.
	URL string
	// DNSName and Port are a dns:NAME:PORT peer's.
	DNSName string
	Port    int
}

// String is the entry as configured (normalised).
func (p PeerAddr) String() string {
	if p.URL != "" {
		return p.URL
	}
	return "dns:" + p.DNSName + ":" + strconv.Itoa(p.Port)
}

// validatePeers checks peers, peers_secret_env, peers_secret_file and
// peers_ca_file, and parses peers into PeerAddrs. peers without a secret
// is an error naming the keys: a relay is only accepted signed.
func (c *Config) validatePeers(bad func(format string, args ...any)) {
	if c.PeersSecretEnv == "" {
		c.PeersSecretEnv = DefaultPeersSecretEnv
	}
	if len(c.Peers) > MaxPeers {
		bad("peers: %d entries, more than %d", len(c.Peers), MaxPeers)
	}
	c.PeerAddrs = nil
	seen := map[string]bool{}
	for i, raw := range c.Peers {
		p, err := parsePeer(raw)
		if err != nil {
			bad("peers[%d]: %v", i, err)
			continue
		}
		if seen[p.String()] {
			bad("peers[%d]: %q is listed twice", i, raw)
			continue
		}
		seen[p.String()] = true
		c.PeerAddrs = append(c.PeerAddrs, p)
	}
	if c.PeersSecretFile != "" {
		if _, err := readPeersFile(c.PeersSecretFile); err != nil {
			bad("peers_secret_file: %v", err)
		}
	}
	if len(c.Peers) > 0 {
		text, err := c.PeersSecretText()
		if err == nil && strings.Trim(text, " \t\r\n,") == "" {
			bad("peers: set a peer secret in the environment variable %s (peers_secret_env) or in peers_secret_file; relays between replicas are signed with it", c.PeersSecretEnv)
		}
	}
	if c.PeersCAFile != "" {
		b, err := readPeersFile(c.PeersCAFile)
		switch {
		case err != nil:
			bad("peers_ca_file: %v", err)
		case !x509.NewCertPool().AppendCertsFromPEM(b):
			bad("peers_ca_file: %s holds no PEM certificate", c.PeersCAFile)
		}
	}
}

// PeersSecretText is the raw text of the peer secrets: peers_secret_file's
// content, then the variable peers_secret_env names; one secret per line
// or comma-separated (the first signs; all are accepted). Read at load and
// at every reload.
func (c *Config) PeersSecretText() (string, error) {
	var text string
	if c.PeersSecretFile != "" {
		b, err := readPeersFile(c.PeersSecretFile)
		if err != nil {
			return "", fmt.Errorf("peers_secret_file: %w", err)
		}
		text = string(b)
	}
	if c.PeersSecretEnv != "" {
		if v := os.Getenv(c.PeersSecretEnv); v != "" {
			text += "\n" + v
		}
	}
	return text, nil
}

// PeersCA reads peers_ca_file (nil, nil when unset): the certificates https
// peers are verified against.
func (c *Config) PeersCA() (*x509.CertPool, error) {
	if c.PeersCAFile == "" {
		return nil, nil
	}
	b, err := readPeersFile(c.PeersCAFile)
	if err != nil {
		return nil, fmt.Errorf("peers_ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("peers_ca_file: %s holds no PEM certificate", c.PeersCAFile)
	}
	return pool, nil
}

func readPeersFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPeersFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPeersFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxPeersFileBytes)
	}
	return b, nil
}

// parsePeer reads one peers entry: http(s)://host:port (a base URL, no
// path, query or credentials) or dns:NAME:PORT.
func parsePeer(raw string) (PeerAddr, error) {
	if rest, ok := strings.CutPrefix(raw, "dns:"); ok {
		name, portText, ok := strings.Cut(rest, ":")
		if !ok || !validDNSName(name) {
			return PeerAddr{}, fmt.Errorf("%q: want dns:NAME:PORT, NAME a DNS name (a headless Service's, say)", raw)
		}
		port, err := parsePort(portText)
		if err != nil {
			return PeerAddr{}, fmt.Errorf("%q: %v", raw, err)
		}
		return PeerAddr{DNSName: strings.ToLower(name), Port: port}, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return PeerAddr{}, fmt.Errorf("%q: want a base URL http(s)://host:port or dns:NAME:PORT", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Trim(u.Path, "/") != "" {
		return PeerAddr{}, fmt.Errorf("%q: a peer is a base URL http(s)://host:port, without credentials, path or query", raw)
	}
	host, portText, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return PeerAddr{}, fmt.Errorf("%q: name the port: http(s)://host:port", raw)
	}
	if _, err := parsePort(portText); err != nil {
		return PeerAddr{}, fmt.Errorf("%q: %v", raw, err)
	}
	return PeerAddr{URL: u.Scheme + "://" + strings.ToLower(u.Host)}, nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != s {
		return 0, fmt.Errorf("port %q is not 1-65535", s)
	}
	return p, nil
}

// validDNSName reports whether name is a host name: dot-separated labels
// of letters, digits and inner hyphens, each at most 63, 253 in all.
func validDNSName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
