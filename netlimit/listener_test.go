package netlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/testkit"
)

// serve runs an http.Server answering 200 "ok PATH" on l, with ProbeOnly.
func serve(t *testing.T, l *Listener) string {
	t.Helper()
	srv := &http.Server{
		Handler: ProbeOnly([]string{"/healthz", "/readyz"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "ok %s", r.URL.Path)
		})),
		ConnContext: ConnContext,
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

func listen(t *testing.T, o Options) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return NewListener(ln, o)
}

// dialFrom connects from a chosen loopback address.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends one request on c and returns the status line and body, or
// the error if the connection was closed instead.
func get(c net.Conn, path string) (int, string, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path); err != nil {
		return 0, "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// closedByServer reports whether the server closed c without answering.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestListenerCaps(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		o        Options
		hold     []string // connections held open, by source address
		next     string   // then one more from here
		admitted bool
	}{
		{name: "under the total cap", o: Options{MaxConns: 3}, hold: []string{"127.0.0.2", "127.0.0.3"}, next: "127.0.0.4", admitted: true},
		{name: "over the total cap", o: Options{MaxConns: 2}, hold: []string{"127.0.0.2", "127.0.0.3"}, next: "127.0.0.4"},
		{name: "over the per-address cap", o: Options{MaxConns: 10, MaxConnsPerIP: 2}, hold: []string{"127.0.0.2", "127.0.0.2"}, next: "127.0.0.2"},
		{name: "another address under its cap", o: Options{MaxConns: 10, MaxConnsPerIP: 2}, hold: []string{"127.0.0.2", "127.0.0.2"}, next: "127.0.0.3", admitted: true},
		{name: "per-address cap off", o: Options{MaxConns: 10}, hold: []string{"127.0.0.2", "127.0.0.2"}, next: "127.0.0.2", admitted: true},
		{name: "exempt peer (a trusted proxy)", o: Options{MaxConns: 10, MaxConnsPerIP: 2, Exempt: func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.2") }},
			hold: []string{"127.0.0.2", "127.0.0.2"}, next: "127.0.0.2", admitted: true},
		{name: "exempt peer still under the total cap", o: Options{MaxConns: 2, MaxConnsPerIP: 2, Exempt: func(netip.Addr) bool { return true }},
			hold: []string{"127.0.0.2", "127.0.0.2"}, next: "127.0.0.2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.ProbePaths = []string{"/healthz"}
			tc.o.PeekTimeout = 200 * time.Millisecond
			l := listen(t, tc.o)
			addr := serve(t, l)
			for _, from := range tc.hold {
				c := dialFrom(t, from, addr)
				if code, _, err := get(c, "/mcp"); err != nil || code != 200 {
					t.Fatalf("held connection from %s: %d %v", from, code, err)
				}
			}
			c := dialFrom(t, tc.next, addr)
			code, body, err := get(c, "/mcp")
			if tc.admitted && (err != nil || code != 200) {
				t.Fatalf("want it served, got %d %q %v", code, body, err)
			}
			if !tc.admitted && err == nil {
				t.Fatalf("want it closed, got %d %q", code, body)
			}
			// Closing a held connection frees its place.
			if !tc.admitted {
				st := l.Stats()
				if st.Refused == 0 {
					t.Errorf("stats %+v: refused not counted", st)
				}
			}
		})
	}
}

func TestListenerFreesPlaces(t *testing.T) {
	t.Parallel()
	l := listen(t, Options{MaxConns: 1, MaxConnsPerIP: 1})
	addr := serve(t, l)
	for i := range 20 {
		c := dialFrom(t, "127.0.0.2", addr)
		if code, _, err := get(c, "/x"); err != nil || code != 200 {
			t.Fatalf("connection %d: %d %v (a closed connection did not free its place)", i, code, err)
		}
		c.Close()
		testkit.WaitUntil(t, "the closed connection's place freed", func() bool { return l.Stats().Open == 0 })
	}
}

func TestProbePool(t *testing.T) {
	t.Parallel()
	l := listen(t, Options{MaxConns: 1, Reserved: 2, ProbePaths: []string{"/healthz", "/readyz"}, PeekTimeout: 100 * time.Millisecond})
	addr := serve(t, l)
	held := dialFrom(t, "127.0.0.2", addr)
	if code, _, err := get(held, "/mcp"); err != nil || code != 200 {
		t.Fatalf("held: %d %v", code, err)
	}
	for _, path := range []string{"/healthz", "/readyz", "/healthz?verbose=1"} {
		c := dialFrom(t, "127.0.0.3", addr)
		code, body, err := get(c, path)
		if err != nil || code != 200 || !strings.HasPrefix(body, "ok /") {
			t.Fatalf("probe %s over the cap: %d %q %v", path, code, body, err)
		}
		// One request per probe connection, then it closes.
		if !closedByServer(c) {
			t.Errorf("probe connection for %s stayed open", path)
		}
	}
	for _, line := range []string{"GET /mcp HTTP/1.1", "POST /healthz HTTP/1.1", "GET /healthzz HTTP/1.1", "GET /healthz/x HTTP/1.1", "GARBAGE"} {
		c := dialFrom(t, "127.0.0.3", addr)
		fmt.Fprintf(c, "%s\r\nHost: localhost\r\n\r\n", line)
		if !closedByServer(c) {
			t.Errorf("%q over the cap was not closed", line)
		}
	}
	// Silent connections are closed after the peek timeout.
	c := dialFrom(t, "127.0.0.3", addr)
	if !closedByServer(c) {
		t.Error("a silent connection over the cap stayed open")
	}
	// A probe connection that asks for something else after all is refused.
	c = dialFrom(t, "127.0.0.3", addr)
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\nGET /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n")
	br := bufio.NewReader(c)
	for i := 0; ; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		b, _ := io.ReadAll(resp.Body)
		if i > 0 || strings.Contains(string(b), "/mcp") {
			t.Errorf("a probe-pool connection answered a second request: %d %q", resp.StatusCode, b)
		}
	}
}

// TestProbesUnderFlood: while the caps are full and a flood keeps
// opening silent connections over them, probes still get answers.
func TestProbesUnderFlood(t *testing.T) {
	t.Parallel()
	l := listen(t, Options{MaxConns: 20, MaxConnsPerIP: 10, ProbePaths: []string{"/healthz"}, PeekTimeout: 5 * time.Second})
	addr := serve(t, l)
	for i := range 20 {
		dialFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%2), addr)
	}
	stop := make(chan struct{})
	flooded := make(chan int)
	go func() {
		n := 0
		defer func() { flooded <- n }()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.4")}}
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				continue
			}
			n++
			open = append(open, c)
			if len(open) > 500 {
				open[0].Close()
				open = open[1:]
			}
		}
	}()
	for i := range 50 {
		c := dialFrom(t, "127.0.0.1", addr)
		code, _, err := get(c, "/healthz")
		if err != nil || code != 200 {
			t.Fatalf("probe %d under the flood: %d %v (stats %+v)", i, code, err, l.Stats())
		}
		c.Close()
	}
	close(stop)
	n := <-flooded
	st := l.Stats()
	t.Logf("flood opened %d connections; stats %+v", n, st)
	if st.Open > 20 || st.Peeking > DefaultReserved {
		t.Errorf("caps exceeded: %+v", st)
	}
}

func TestIsProbe(t *testing.T) {
	t.Parallel()
	paths := []string{"/healthz", "/readyz"}
	cases := []struct {
		line           string
		probe, decided bool
	}{
		{"GET /healthz HTTP/1.1\r\n", true, true},
		{"HEAD /readyz HTTP/1.0\r\n", true, true},
		{"GET /healthz?x=1 HTTP/1.1", true, true},
		{"GET /healthz ", true, true},
		{"GET /health", false, false},
		{"GET /", false, false},
		{"GE", false, false},
		{"GET /healthzz ", false, true},
		{"GET /mcp", false, true},
		{"POST /healthz HTTP/1.1\r\n", false, true},
		{"DELETE", false, true},
		{"\r\n", false, true},
		{"GET\r\n", false, true},
		{"GET /heal\r\n", false, true},
		{"GET http://x/healthz HTTP/1.1\r\n", false, true},
	}
	for _, tc := range cases {
		p, d := isProbe([]byte(tc.line), paths)
		if p != tc.probe || d != tc.decided {
			t.Errorf("isProbe(%q) = %v, %v; want %v, %v", tc.line, p, d, tc.probe, tc.decided)
		}
	}
}

func FuzzIsProbe(f *testing.F) {
	for _, s := range []string{"GET /healthz HTTP/1.1\r\n", "GET /readyz?", "HEAD /", "GET " + strings.Repeat("/", 300), "\x00\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		probe, decided := isProbe(b, []string{"/healthz", "/readyz"})
		if probe && !decided {
			t.Fatal("probe before decided")
		}
		if probe && !(strings.HasPrefix(string(b), "GET /healthz") || strings.HasPrefix(string(b), "GET /readyz") ||
			strings.HasPrefix(string(b), "HEAD /healthz") || strings.HasPrefix(string(b), "HEAD /readyz")) {
			t.Fatalf("%q taken for a probe", b)
		}
	})
}

// TestCapKey: an IPv6 client is counted by its /64, so rotating through
// the addresses of its network does not dodge max_connections_per_ip;
// IPv4 and loopback addresses count alone.
func TestCapKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{a: "2001:db8:1:2::1", b: "2001:db8:1:2:ffff::9", same: true},
		{a: "2001:db8:1:2::1", b: "2001:db8:1:3::1", same: false},
		{a: "192.0.2.1", b: "192.0.2.2", same: false},
		{a: "::1", b: "::1", same: true},
		{a: "::ffff:192.0.2.1", b: "::ffff:192.0.2.2", same: false},
	} {
		ka, kb := capKey(netip.MustParseAddr(c.a)), capKey(netip.MustParseAddr(c.b))
		if (ka == kb) != c.same {
			t.Errorf("capKey(%s) = %s, capKey(%s) = %s; same = %v", c.a, ka, c.b, kb, ka == kb)
		}
	}
}
