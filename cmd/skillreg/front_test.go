package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/testkit"
)

// fastFront sets the front door's deadlines far below their defaults, as
// the configuration allows, so the tests need not wait.
const fastFront = `http:
  header_timeout: 300ms
  body_grace: 300ms
  body_min_rate: 1024
  idle_timeout: 500ms
`

// startTuned is startDaemon with tune run before the daemon is built.
func startTuned(t testing.TB, yaml string, tune func(*Daemon)) *testDaemon {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	log := testkit.Logger(t, slog.LevelError)
	var tunes []func(*Daemon)
	if tune != nil {
		tunes = append(tunes, tune)
	}
	d, err := openDaemon(context.Background(), cfg, log, serveSurfaces, false, tunes...)
	if err != nil {
		t.Fatal(err)
	}
	td := serveDaemon(t, d)
	waitUntil(t, func() bool {
		code, _, err := fresh("127.0.0.1", td.Addr(), "GET", "/readyz", nil, "")
		return err == nil && code == http.StatusOK
	})
	return td
}

// fresh sends one request on a new connection from a chosen loopback
// address, so a kept-alive connection admitted earlier cannot answer it.
func fresh(from, addr, method, path string, header map[string]string, body string) (int, string, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nConnection: close\r\n", method, path)
	if _, ok := header["Host"]; !ok {
		fmt.Fprintf(&b, "Host: %s\r\n", addr)
	}
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	if body != "" {
		fmt.Fprintf(&b, "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), err
}

const skillsList2026 = `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta2026 + `}}`

var mcpHeaders = map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "skills/list"}

// probe checks that /healthz and /mcp answer from 127.0.0.1.
func probe(t *testing.T, addr string, what string) {
	t.Helper()
	if code, body, err := fresh("127.0.0.1", addr, "GET", "/healthz", nil, ""); err != nil || code != http.StatusOK {
		t.Fatalf("%s: /healthz %d %q %v", what, code, body, err)
	}
	code, body, err := fresh("127.0.0.1", addr, "POST", "/mcp", mcpHeaders, skillsList2026)
	if err != nil || code != http.StatusOK || !strings.Contains(body, `"skills"`) {
		t.Fatalf("%s: /mcp %d %.200q %v", what, code, body, err)
	}
}

// slowConn is a connection that trickles a request: its headers, or the
// body of a webhook delivery or an MCP request, a byte at a time.
func slowConn(from, addr string, kind int) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 30 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	switch kind % 3 {
	case 0: // headers that never end
		_, err = fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n", addr)
	case 1: // an MCP body that never comes
		_, err = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n{", addr)
	case 2: // a webhook body that never comes
		_, err = fmt.Fprintf(c, "POST /webhooks/github HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"+
			"X-Hub-Signature-256: sha256=%s\r\nContent-Length: 26214400\r\n\r\n{", addr, strings.Repeat("0", 64))
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// TestSlowConnectionsDoNotStarve holds 5,000 connections that trickle
// headers and bodies, spread over 127.0.0.2-127.0.0.41, while /healthz
// and /mcp answer from 127.0.0.1; the daemon then cuts every one of them
// by its deadlines (issue 15, item 3: they stayed open indefinitely).
func TestSlowConnectionsDoNotStarve(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 connections")
	}
	t.Setenv("SKILLREG_WEBHOOK_SECRET", "s3cret")
	d := startTuned(t, fastFront, nil)
	addr := d.Addr()
	const n, addrs = 5000, 40
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := slowConn(fmt.Sprintf("127.0.0.%d", 2+i%addrs), addr, i)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("dial: %v", err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	probe(t, addr, "with 5,000 slow connections open")
	// Every slow connection is cut by the server: the read sees the close
	// (or an answer: 408 for a stalled body), never our own timeout.
	var cut sync.WaitGroup
	stuck := make(chan int, n)
	for i, c := range conns {
		cut.Add(1)
		go func() {
			defer cut.Done()
			_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, err := io.Copy(io.Discard, c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				stuck <- i
			}
		}()
	}
	probe(t, addr, "while the slow connections are cut")
	cut.Wait()
	close(stuck)
	for i := range stuck {
		t.Errorf("slow connection %d (kind %d) was never cut", i, i%3)
	}
	probe(t, addr, "after")
}

// TestFloodOverMaxConnections: with every connection in use and a flood
// of new ones, /healthz and /readyz answer from the reserved pool, other
// paths are closed at once, and the daemon serves again once the flood
// goes (issue 15, item 3: ~20,000 connections exhausted file descriptors).
func TestFloodOverMaxConnections(t *testing.T) {
	d := startTuned(t, "http:\n  max_connections: 50\n  max_connections_per_ip: 0\n", func(d *Daemon) {
		d.tuning.peekTimeout = 200 * time.Millisecond
	})
	addr := d.Addr()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// Fill the cap with idle kept-alive connections.
	for len(held) < 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var flood sync.WaitGroup
	for w := range 4 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.0.%d", 50+w))}}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c, err := dl.Dial("tcp", addr); err == nil {
					fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: %s\r\n", addr) // and never finish
					go func() { time.Sleep(time.Second); c.Close() }()
				}
			}
		}()
	}
	for i := range 20 {
		for _, path := range []string{"/healthz", "/readyz"} {
			code, body, err := fresh("127.0.0.1", addr, "GET", path, nil, "")
			if err != nil || code != http.StatusOK {
				t.Fatalf("probe %d %s under the flood: %d %q %v (listener %+v)", i, path, code, body, err, d.ln.Stats())
			}
		}
		if code, _, err := fresh("127.0.0.1", addr, "POST", "/mcp", mcpHeaders, skillsList2026); err == nil {
			t.Fatalf("/mcp over max_connections was served (%d)", code)
		}
	}
	close(stop)
	flood.Wait()
	st := d.ln.Stats()
	t.Logf("listener after the flood: %+v", st)
	if st.Open > 50 {
		t.Errorf("open connections %d over max_connections 50", st.Open)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	waitUntil(t, func() bool {
		code, _, err := fresh("127.0.0.1", addr, "POST", "/mcp", mcpHeaders, skillsList2026)
		return err == nil && code == http.StatusOK
	})
	// The refusals are counted where an operator looks.
	code, body, err := fresh("127.0.0.1", addr, "GET", "/metrics", nil, "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	var refused float64
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "skillreg_http_connections_refused_total "); ok {
			refused, _ = strconv.ParseFloat(v, 64)
		}
	}
	if refused < float64(st.Refused) || refused == 0 {
		t.Errorf("skillreg_http_connections_refused_total = %v, listener refused %d", refused, st.Refused)
	}
	for _, name := range []string{"skillreg_http_connections ", "skillreg_http_body_bytes ", "skillreg_http_body_budget_bytes "} {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func rss() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestWebhookBodiesBounded: 1,000 connections that send a webhook's
// headers with Content-Length 26214400 and one body byte (issue 15, item
// 2: 24 MiB to 1,043 MiB) leave the heap within the body budget.
func TestWebhookBodiesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections")
	}
	t.Setenv("SKILLREG_WEBHOOK_SECRET", "s3cret")
	d := startTuned(t, "", nil)
	addr := d.Addr()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	rssBefore := rss()
	const n = 1000
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, err := slowConn(fmt.Sprintf("127.0.0.%d", 2+i%10), addr, 2)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Every handler has its first buffer once the budget holds n of them.
	waitUntil(t, func() bool { return d.budget.InUse() >= n*512 })
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	rssAfter := rss()
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("1,000 webhook connections, 1 byte of 26214400 each: heap in use %.1f -> %.1f MiB, RSS %.1f -> %.1f MiB",
		float64(before.HeapInuse)/(1<<20), float64(after.HeapInuse)/(1<<20), float64(rssBefore)/(1<<20), float64(rssAfter)/(1<<20))
	if grown > 64<<20 {
		t.Errorf("heap grew %d MiB: more than the 64 MiB body budget", grown>>20)
	}
	if used := d.budget.InUse(); used > d.budget.Size() {
		t.Errorf("bodies hold %d bytes, over the budget", used)
	}
	probe(t, addr, "with 1,000 webhook bodies in flight")
}

// TestHostAndOrigin: a DNS-rebinding page (its own name in Host, its own
// origin in Origin) is refused on every endpoint; IP literals, loopback
// names and configured names pass; /mcp refuses foreign origins unless
// listed (issue 15, item 11).
func TestHostAndOrigin(t *testing.T) {
	d := startTuned(t, "http:\n  allowed_hosts: [skills.example.com]\n  allowed_origins: [\"https://app.example.com\"]\n", nil)
	addr := d.Addr()
	_, port, _ := net.SplitHostPort(addr)
	paths := []struct{ method, path, body string }{
		{"GET", "/", ""}, {"GET", "/sources", ""}, {"GET", "/readyz", ""}, {"GET", "/metrics", ""},
		{"GET", "/healthz", ""}, {"POST", "/mcp", skillsList2026}, {"GET", "/skills/examples/commit-message/SKILL.md", ""},
		// An unknown member: the fast path declines, the SDK answers.
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{"x":1,` + meta2026 + `}}`},
	}
	hosts := []struct {
		host string
		ok   bool
	}{
		{"evil.example.com:" + port, false},
		{"evil.example.com", false},
		{"skills.example.com.evil.net", false},
		{"127.0.0.1:" + port, true},
		{"localhost:" + port, true},
		{"10.1.2.3:" + port, true}, // a Kubernetes probe's pod IP
		{"skills.example.com", true},
	}
	for _, p := range paths {
		for _, h := range hosts {
			// /mcp follows http.allowed_hosts like every endpoint: the
			// SDK's fixed loopback rule is off behind the front door, so
			// a proxy on the same machine may pass an allowed name.
			hdr := map[string]string{"Host": h.host}
			if p.body != "" {
				copyHeaders(hdr, mcpHeaders)
			}
			code, body, err := fresh("127.0.0.1", addr, p.method, p.path, hdr, p.body)
			if err != nil {
				t.Fatal(err)
			}
			if h.ok == (code == http.StatusForbidden) {
				t.Errorf("%s %s with Host %s: %d %.100q", p.method, p.path, h.host, code, body)
			}
		}
	}
	origins := []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"http://127.0.0.1:" + port, true}, // same origin
		{"https://app.example.com", true},
		{"http://evil.example.com", false},
		{"http://localhost:" + port, false}, // another origin than Host 127.0.0.1
		{"null", false},
	}
	for _, o := range origins {
		for _, method := range []string{"POST", "GET", "DELETE"} {
			hdr := map[string]string{}
			copyHeaders(hdr, mcpHeaders)
			if o.origin != "" {
				hdr["Origin"] = o.origin
			}
			body := ""
			if method == "POST" {
				body = skillsList2026
			}
			code, resp, err := fresh("127.0.0.1", addr, method, "/mcp", hdr, body)
			if err != nil {
				t.Fatal(err)
			}
			if o.ok == (code == http.StatusForbidden) {
				t.Errorf("%s /mcp with Origin %q: %d %.100q", method, o.origin, code, resp)
			}
		}
	}
}

func copyHeaders(dst, src map[string]string) {
	for k, v := range src {
		dst[k] = v
	}
}

// TestReadyzAndMetricsWithoutToken: with clients configured, callers with
// neither a token nor an address in metrics_networks see only the
// readiness bit and counts on /readyz and get 403 on /metrics (issue 15,
// item 15).
func TestReadyzAndMetricsWithoutToken(t *testing.T) {
	tok, hash := "skr_front-test-token", sha256Hex("skr_front-test-token")
	clients := "clients:\n  - name: ops\n    token_sha256: " + hash + "\n    sources: [\"*\"]\n"
	for _, tc := range []struct {
		name    string
		yaml    string
		header  map[string]string
		private bool // sees everything
	}{
		{"no clients: open", "", nil, true},
		{"loopback is in the default metrics_networks", clients, nil, true},
		{"outside metrics_networks", clients + "http:\n  metrics_networks: [10.0.0.0/8]\n", nil, false},
		{"outside, with a token", clients + "http:\n  metrics_networks: [10.0.0.0/8]\n", map[string]string{"Authorization": "Bearer " + tok}, true},
		{"outside, with a wrong token", clients + "http:\n  metrics_networks: [10.0.0.0/8]\n", map[string]string{"Authorization": "Bearer nope"}, false},
		{"behind a trusted proxy: the forwarded client counts", clients + "http:\n  trusted_proxies: [127.0.0.0/8]\n",
			map[string]string{"X-Forwarded-For": "203.0.113.9"}, false},
		{"forwarding headers are not trusted from others", clients + "http:\n  metrics_networks: [10.0.0.0/8]\n",
			map[string]string{"X-Forwarded-For": "10.0.0.5"}, false},
		{"a forwarded client inside metrics_networks", clients + "http:\n  trusted_proxies: [127.0.0.0/8]\n  metrics_networks: [10.0.0.0/8]\n",
			map[string]string{"X-Forwarded-For": "10.0.0.5"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startTuned(t, tc.yaml, nil)
			code, body, err := fresh("127.0.0.1", d.Addr(), "GET", "/readyz", tc.header, "")
			if err != nil || code != http.StatusOK {
				t.Fatalf("/readyz: %d %v", code, err)
			}
			var out map[string]any
			if err := json.Unmarshal([]byte(body), &out); err != nil {
				t.Fatal(err)
			}
			if out["ready"] != true || out["skills"] == nil || out["sources"] == nil {
				t.Errorf("/readyz lacks the readiness bit or counts: %s", body)
			}
			detailed := strings.Contains(body, `"source"`) || strings.Contains(body, "examples")
			if detailed != tc.private {
				t.Errorf("/readyz detail %v, want %v: %s", detailed, tc.private, body)
			}
			if !tc.private && out["sources"] != float64(1) {
				t.Errorf("/readyz sources count: %s", body)
			}
			code, body, err = fresh("127.0.0.1", d.Addr(), "GET", "/metrics", tc.header, "")
			if err != nil {
				t.Fatal(err)
			}
			if tc.private != (code == http.StatusOK) || (!tc.private && code != http.StatusForbidden) {
				t.Errorf("/metrics: %d %.100q", code, body)
			}
		})
	}
}

// TestFailedTokensKeyOnForwardedClient: behind trusted proxies the failed
// token limiter counts each forwarded client on its own; without them,
// forwarding headers change nothing.
func TestFailedTokensKeyOnForwardedClient(t *testing.T) {
	clients := "clients:\n  - name: ops\n    token_sha256: " + sha256Hex("skr_x") + "\n    sources: [\"*\"]\n"
	for _, trusted := range []bool{true, false} {
		t.Run(fmt.Sprint("trusted=", trusted), func(t *testing.T) {
			yaml := clients
			if trusted {
				yaml += "http:\n  trusted_proxies: [127.0.0.1/32]\n"
			}
			d := startTuned(t, yaml, nil)
			try := func(client string) int {
				hdr := map[string]string{"Authorization": "Bearer wrong", "X-Forwarded-For": client}
				copyHeaders(hdr, mcpHeaders)
				code, _, err := fresh("127.0.0.1", d.Addr(), "POST", "/mcp", hdr, skillsList2026)
				if err != nil {
					t.Fatal(err)
				}
				return code
			}
			for range 10 {
				try("203.0.113.9")
			}
			if code := try("203.0.113.9"); code != http.StatusTooManyRequests {
				t.Errorf("the guessing client: %d, want 429", code)
			}
			want := http.StatusUnauthorized
			if !trusted {
				want = http.StatusTooManyRequests // one peer, whatever the header says
			}
			if code := try("198.51.100.7"); code != want {
				t.Errorf("another client: %d, want %d", code, want)
			}
		})
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestReloadHTTP: allowed hosts, origins and metrics networks change on
// reload; the caps, proxies and timeouts keep their running values, with
// a warning naming the key.
func TestReloadHTTP(t *testing.T) {
	var logs testkit.Buffer
	d := startTuned(t, "http:\n  max_connections: 100\n", func(d *Daemon) {
		d.log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	addr := d.Addr()
	host := map[string]string{"Host": "skills.example.com"}
	if code, _, _ := fresh("127.0.0.1", addr, "GET", "/", host, ""); code != http.StatusForbidden {
		t.Fatalf("before reload: %d", code)
	}
	cfgFile := t.TempDir() + "/config.yaml"
	os.WriteFile(cfgFile, []byte("http:\n  max_connections: 5\n  trusted_proxies: [10.0.0.0/8]\n  header_timeout: 1s\n  allowed_hosts: [skills.example.com]\n"), 0o644)
	if err := d.reloadFile(cfgFile); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := fresh("127.0.0.1", addr, "GET", "/", host, ""); code != http.StatusOK {
		t.Errorf("after reload, an allowed host: %d", code)
	}
	for _, key := range []string{"http.max_connections", "http.trusted_proxies", "http.header_timeout"} {
		if !strings.Contains(logs.String(), `key=`+key) {
			t.Errorf("no restart warning for %s:\n%s", key, logs.String())
		}
	}
	if strings.Contains(logs.String(), "key=http.allowed_hosts") {
		t.Error("allowed_hosts reloads; it must not warn")
	}
	if h := d.running().cfg.HTTP; h.MaxConnections != 100 || len(h.TrustedProxyNets) != 0 || h.HeaderTimeout.D() != config.DefaultHeaderTimeout {
		t.Errorf("running values not kept: %+v", h)
	}
}
