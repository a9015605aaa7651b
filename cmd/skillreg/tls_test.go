package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/testkit"
)

// testCA is testkit's CA with its certificate in a file (for
// NODE_EXTRA_CA_CERTS).
type testCA struct {
	*testkit.CA
	pemFile string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca := &testCA{CA: testkit.NewCA(t), pemFile: filepath.Join(t.TempDir(), "ca.pem")}
	if err := os.WriteFile(ca.pemFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return ca
}

// issue writes a server certificate for hosts (names or IPs) to
// certFile and keyFile, with the given serial number.
func (ca *testCA) issue(t *testing.T, certFile, keyFile string, serial int64, hosts ...string) {
	t.Helper()
	der, key := ca.Issue(t, serial, hosts...)
	kb, _ := x509.MarshalECPrivateKey(key)
	// Written aside and renamed in, as a renewal does.
	for path, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kb}} {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTLS: HTTPS on the listen address with HTTP/2, TLS 1.2 at least, and
// the certificate reloaded when its files change and on SIGHUP's reload.
func TestTLS(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, certFile, keyFile, 100, "127.0.0.1")
	yaml := "tls:\n  cert_file: " + certFile + "\n  key_file: " + keyFile + "\n"
	d := startDaemonTLS(t, yaml, ca, "")
	serial := func() int64 {
		// A new connection each time: a kept one shows the old certificate.
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, ForceAttemptHTTP2: true}}
		defer client.CloseIdleConnections()
		res, err := client.Get(d.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.ProtoMajor != 2 {
			t.Errorf("protocol %s, want HTTP/2", res.Proto)
		}
		return res.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if s := serial(); s != 100 {
		t.Fatalf("serial %d", s)
	}
	// TLS 1.1 is refused.
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, MaxVersion: tls.VersionTLS11}}}
	if _, err := old.Get(d.URL + "/healthz"); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
	// Plain HTTP on the TLS port gets no catalog.
	if res, err := http.Get(strings.Replace(d.URL, "https://", "http://", 1) + "/.well-known/agent-skills/index.json"); err == nil {
		res.Body.Close()
		if res.StatusCode == 200 {
			t.Error("plain HTTP served the index on the TLS port")
		}
	}
	// Other files in the directory do not reload it.
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(dir, "other.log"), []byte(strings.Repeat("x", i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A renewal replaces the files: the new certificate is served.
	ca.issue(t, certFile, keyFile, 101, "127.0.0.1")
	waitUntil(t, func() bool { return serial() == 101 })
	// A broken pair is refused and the running certificate stays.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.certs.reload()
	if s := serial(); s != 101 {
		t.Fatalf("after a broken renewal: serial %d", s)
	}
	// SIGHUP's reload loads the pair too.
	ca.issue(t, certFile, keyFile, 102, "127.0.0.1")
	cfg := *d.running().cfg
	if err := d.Reload(&cfg); err != nil {
		t.Fatal(err)
	}
	if s := serial(); s != 102 {
		t.Fatalf("after reload: serial %d", s)
	}
}

// startDaemonTLS is startDaemon for an HTTPS daemon: the URL is https and
// readiness is polled through a client that trusts ca (and expects
// serverName's certificate, when set).
func startDaemonTLS(t *testing.T, yaml string, ca *testCA, serverName string) *testDaemon {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen == config.DefaultListen {
		cfg.Listen = "127.0.0.1:0"
	}
	cfg.DataDir = t.TempDir()
	log := testkit.Logger(t, slog.LevelWarn)
	d, err := NewDaemon(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	td := serveDaemon(t, d)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: serverName}}}
	waitUntil(t, func() bool {
		resp, err := client.Get(td.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return td
}

// TestCertWatchRelevant: only the pair and a Kubernetes secret's swap
// reload the certificate, not other files in the directory.
func TestCertWatchRelevant(t *testing.T) {
	r := &certReloader{certFile: "/etc/tls/tls.crt", keyFile: "/etc/tls/tls.key"}
	for name, want := range map[fsnotify.Event]bool{
		{Name: "/etc/tls/tls.crt", Op: fsnotify.Write}:      true,
		{Name: "/etc/tls/tls.key", Op: fsnotify.Create}:     true,
		{Name: "/etc/tls/..data", Op: fsnotify.Create}:      true,
		{Name: "/etc/tls/tls.crt", Op: fsnotify.Chmod}:      false,
		{Name: "/etc/tls/skillreg.log", Op: fsnotify.Write}: false,
		{Name: "/etc/tls/tls.crt.tmp", Op: fsnotify.Create}: false,
	} {
		if got := r.relevant(name); got != want {
			t.Errorf("relevant(%v) = %v, want %v", name, got, want)
		}
	}
}

// TestTLSProbesUnderFlood: with HTTPS on and the connection cap full, a
// probe over TLS is still served from the reserved pool (the listener
// terminates TLS, so it can read the request line), while anything else
// over the cap is closed.
func TestTLSProbesUnderFlood(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, certFile, keyFile, 100, "127.0.0.1")
	yaml := "tls:\n  cert_file: " + certFile + "\n  key_file: " + keyFile + "\n" +
		"http:\n  max_connections: 5\n  max_connections_per_ip: 0\n"
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	log := testkit.Logger(t, slog.LevelError)
	d, err := openDaemon(context.Background(), cfg, log, serveSurfaces, false, func(d *Daemon) { d.tuning.peekTimeout = 2 * time.Second })
	if err != nil {
		t.Fatal(err)
	}
	addr := serveDaemon(t, d).Addr()
	dialTLS := func() (*tls.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
	}
	get := func(c *tls.Conn, path string) (*http.Response, error) {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
		return http.ReadResponse(bufio.NewReader(c), nil)
	}
	// Fill the cap with kept-alive HTTPS connections.
	var held []*tls.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for len(held) < 5 {
		c, err := dialTLS()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		res, err := get(c, "/healthz")
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("filling the cap: %v %v", res, err)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		c, err := dialTLS()
		if err != nil {
			t.Fatalf("probe %s over the cap: TLS handshake: %v", path, err)
		}
		res, err := get(c, path)
		c.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("probe %s over the cap: %v %v", path, res, err)
		}
	}
	c, err := dialTLS()
	if err == nil {
		res, err := get(c, "/")
		c.Close()
		if err == nil {
			t.Fatalf("/ over the cap was served: %d", res.StatusCode)
		}
	}
	if st := d.ln.Stats(); st.Refused == 0 || st.Open > 5 {
		t.Errorf("listener %+v: want refusals and at most 5 open", st)
	}
}

// TestRefusedReloadKeepsTLSCertificate: a reload refused for its
// configuration leaves the certificate as it was too (it used to load the
// renewed pair before building, and so changed while saying the running
// configuration stays); an accepted one loads it.
func TestRefusedReloadKeepsTLSCertificate(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, certFile, keyFile, 100, "127.0.0.1")
	cfg, err := config.Parse([]byte("tls:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	// Not served: no file watch reloads the pair behind the test's back.
	d, err := NewDaemon(cfg, testkit.Logger(t, slog.LevelError))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	serial := func() int64 {
		c := d.certs.cert.Load()
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x.SerialNumber.Int64()
	}
	ca.issue(t, certFile, keyFile, 101, "127.0.0.1")
	bad := *d.running().cfg
	bad.GitHub.WebhookSecretFile = filepath.Join(t.TempDir(), "no-such-secret")
	if err := d.Reload(&bad); err == nil {
		t.Fatal("a reload naming a missing webhook_secret_file was accepted")
	}
	if s := serial(); s != 100 {
		t.Fatalf("after a refused reload: serial %d, want 100", s)
	}
	good := *d.running().cfg
	if err := d.Reload(&good); err != nil {
		t.Fatal(err)
	}
	if s := serial(); s != 101 {
		t.Fatalf("after an accepted reload: serial %d, want 101", s)
	}
}
