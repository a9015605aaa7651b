package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/tools"
)

// testHost is the name the Claude Code test serves under: not loopback by
// name (Claude Code refuses such archive URLs), mapped to 127.0.0.1 only
// inside the client's own mount namespace.
const testHost = "skillreg.test"

// claudeCLI runs the real Claude Code CLI in a private mount namespace
// whose /etc/hosts maps testHost to 127.0.0.1, with a scratch HOME that
// trusts the test CA.
type claudeCLI struct {
	bin, hosts, home, ca string
}

func newClaudeCLI(t *testing.T, ca *testCA) *claudeCLI {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real Claude Code CLI")
	}
	// Mapping a name needs a private mount namespace, so root.
	if err := exec.Command("unshare", "-m", "true").Run(); err != nil {
		msg := "the Claude Code test maps " + testHost + " to 127.0.0.1 with `unshare -m` and a bind-mounted hosts file, which needs root: " + err.Error()
		tools.Missing(t, msg)
	}
	// Pinned in scripts/npm-tools.txt; make npm-tools installs it.
	bin := tools.Find(t, "node_modules/@anthropic-ai/claude-code/bin/claude.exe")
	orig, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, append(orig, []byte("\n127.0.0.1 "+testHost+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	return &claudeCLI{bin: bin, hosts: hosts, home: t.TempDir(), ca: ca.pemFile}
}

// run runs `claude ARGS` and returns its output and whether it succeeded.
func (c *claudeCLI) run(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := `mount --bind "$0" /etc/hosts && exec "$@"`
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"-m", "sh", "-c", script, c.hosts, c.bin}, args...)...)
	cmd.Dir = c.home
	cmd.Env = []string{"HOME=" + c.home, "PATH=/usr/bin:/bin", "NODE_EXTRA_CA_CERTS=" + c.ca, "DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "NO_COLOR=1"}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func (c *claudeCLI) must(t *testing.T, args ...string) string {
	t.Helper()
	out, ok := c.run(t, args...)
	if !ok {
		t.Fatalf("claude %s failed:\n%s", strings.Join(args, " "), out)
	}
	return out
}

// pluginTree reads an installed plugin version's skill folder.
func pluginTree(t *testing.T, home, marketplace, plugin, version, skillName string) map[string]string {
	t.Helper()
	root := filepath.Join(home, ".claude", "plugins", "cache", marketplace, plugin, version, "skills", skillName)
	files, err := readFolder(root)
	if err != nil {
		t.Fatalf("installed plugin %s@%s %s: %v", plugin, marketplace, version, err)
	}
	return files
}

// readFolder reads every regular file under root, by slash path.
func readFolder(root string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return files, err
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestClaudeCode drives the real Claude Code CLI against the daemon on
// HTTPS: add the marketplace, install a skill's plugin byte for byte (the
// script keeps its mode), update it after a push, and refuse an archive a
// proxy has changed by one byte.
func TestClaudeCode(t *testing.T) {
	ca := newTestCA(t)
	cc := newClaudeCLI(t, ca)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, certFile, keyFile, 1, testHost)
	remote := scriptRemote(t)
	port := strconv.Itoa(freePort(t))
	origin := "https://" + testHost + ":" + port
	d := startDaemonTLS(t, "listen: 127.0.0.1:"+port+"\npublic_url: "+origin+"\ntls:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+
		"\nsources:\n  - name: team\n    url: "+remote.URL()+"\n    ref: {branch: main}\n    path: skills\n    poll: 0\n", ca, testHost)

	cc.must(t, "plugin", "marketplace", "add", origin+"/marketplace.json")
	cc.must(t, "plugin", "install", "deploy@skillreg")
	want := served(t, d, "team")["deploy"]
	version := pluginDigest(t, d, ca, "deploy")[:12]
	got := pluginTree(t, cc.home, "skillreg", "deploy", version, "deploy")
	if !mapsEqualStr(got, want) {
		t.Fatalf("installed %v, served %v", got, want)
	}
	info, err := os.Stat(filepath.Join(cc.home, ".claude", "plugins", "cache", "skillreg", "deploy", version, "skills", "deploy", "scripts", "run.sh"))
	if err != nil || info.Mode().Perm()&0o111 == 0 {
		t.Errorf("script mode after install: %v %v", info.Mode(), err)
	}

	// A push and a sync; the marketplace update and the plugin update
	// bring the new bytes as a new version.
	remote.WriteFiles(map[string]string{"skills/deploy/references/run.md": "step one, then two\n"})
	remote.Commit("change deploy")
	remote.Push("main")
	if err := d.Registry.SyncNow(context.Background(), "team"); err != nil {
		t.Fatal(err)
	}
	cc.must(t, "plugin", "marketplace", "update", "skillreg")
	cc.must(t, "plugin", "update", "deploy@skillreg")
	want = served(t, d, "team")["deploy"]
	newVersion := pluginDigest(t, d, ca, "deploy")[:12]
	if newVersion == version {
		t.Fatal("the plugin's digest did not move after the push")
	}
	if got := pluginTree(t, cc.home, "skillreg", "deploy", newVersion, "deploy"); !mapsEqualStr(got, want) || got["references/run.md"] != "step one, then two\n" {
		t.Fatalf("after update: installed %v", got)
	}

	// A proxy that flips one byte of every archive: the client refuses it
	// (sha256 mismatch) and installs nothing.
	proxy := flippingProxy(t, d, ca, certFile, keyFile, origin)
	flip := &claudeCLI{bin: cc.bin, hosts: cc.hosts, home: t.TempDir(), ca: cc.ca}
	flip.must(t, "plugin", "marketplace", "add", proxy+"/marketplace.json")
	out, ok := flip.run(t, "plugin", "install", "deploy@skillreg")
	if ok {
		t.Fatalf("an archive with a flipped byte was installed:\n%s", out)
	}
	if ents, _ := os.ReadDir(filepath.Join(flip.home, ".claude", "plugins", "cache", "skillreg", "deploy")); len(ents) > 0 {
		t.Fatalf("something was installed from a corrupted archive: %v\n%s", ents, out)
	}
	t.Logf("refused as expected: %s", strings.TrimSpace(out))
}

// pluginDigest is a plugin's sha256 in the daemon's marketplace.
func pluginDigest(t *testing.T, d *testDaemon, ca *testCA, name string) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: testHost}}}
	res, err := client.Get(d.URL + "/marketplace.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	i := bytes.Index(b, []byte(`"name":"`+name+`"`))
	if i < 0 {
		t.Fatalf("%s not in the marketplace: %s", name, b)
	}
	j := bytes.Index(b[i:], []byte(`"sha256":"`))
	return string(b[i+j+10 : i+j+10+64])
}

func mapsEqualStr(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// flippingProxy serves the daemon's marketplace under its own origin (same
// name, same certificate) and flips the last byte of every archive.
func flippingProxy(t *testing.T, d *testDaemon, ca *testCA, certFile, keyFile, origin string) string {
	t.Helper()
	target, _ := url.Parse(d.URL)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = origin[len("https://"):]
	}}
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: testHost}}
	// The listener first, so the proxy's own origin is known before any
	// request is served.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := "https://" + testHost + ":" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	rp.ModifyResponse = func(res *http.Response) error {
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(res.Request.URL.Path, ".zip") && len(b) > 0:
			b[len(b)/2] ^= 0x01
		case strings.HasSuffix(res.Request.URL.Path, "marketplace.json"):
			b = bytes.ReplaceAll(b, []byte(origin), []byte(self))
		}
		res.Body = io.NopCloser(bytes.NewReader(b))
		res.ContentLength = int64(len(b))
		res.Header.Set("Content-Length", strconv.Itoa(len(b)))
		res.Header.Del("ETag")
		return nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(rp)
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return self
}
