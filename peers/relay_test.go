package peers

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/testkit"
)

var testSecret = []byte("peer secret")

// receiver is a peer on loopback that checks each relay's signature as a
// replica does and records what it got.
type receiver struct {
	srv  *httptest.Server
	self string // answer relays from this instance id as OutcomeSelf

	mu     sync.Mutex
	got    []relayed
	hold   chan struct{} // when set, each request waits for it (or its context)
	status int           // answered status (default 202)
}

type relayed struct {
	from, event, delivery, contentType, body string
	signed                                   bool
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewUnstartedServer(rc)
	rc.srv.Start()
	t.Cleanup(rc.close)
	return rc
}

func (rc *receiver) close() {
	rc.mu.Lock()
	if rc.hold != nil {
		select {
		case <-rc.hold:
		default:
			close(rc.hold)
		}
	}
	rc.mu.Unlock()
	rc.srv.Close()
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	from := r.Header.Get(HeaderFrom)
	got := relayed{
		from: from, event: r.Header.Get("X-GitHub-Event"), delivery: r.Header.Get("X-GitHub-Delivery"),
		contentType: r.Header.Get("Content-Type"), body: string(body),
		signed: Verify(r.Header.Get(HeaderSignature), [][]byte{testSecret}, from, r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery"), body),
	}
	rc.mu.Lock()
	hold, status := rc.hold, rc.status
	rc.got = append(rc.got, got)
	rc.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if r.URL.Path != Path || r.Method != http.MethodPost {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if from == rc.self {
		w.Header().Set(HeaderOutcome, OutcomeSelf)
		w.WriteHeader(http.StatusOK)
		return
	}
	if status == 0 {
		status = http.StatusAccepted
	}
	w.WriteHeader(status)
}

func (rc *receiver) received() []relayed {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]relayed(nil), rc.got...)
}

// results counts Options.Metrics calls by result.
type results struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *results) add(r string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[r]++
}

func (c *results) get(r string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[r]
}

func newRelay(t *testing.T, o Options) *Relay {
	t.Helper()
	if o.Self == "" {
		o.Self = "me"
	}
	if o.Secret == nil {
		o.Secret = testSecret
	}
	o.Logger = testkit.Logger(t, slog.LevelDebug)
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func statsOf(r *Relay, url string) Stats {
	for _, s := range r.Stats() {
		if s.URL == url {
			return s
		}
	}
	return Stats{}
}

// TestRelaySendsToEveryOtherPeer: each peer gets the original body and
// GitHub's headers, signed; the address that answers "self" is not sent
// to again.
func TestRelaySendsToEveryOtherPeer(t *testing.T) {
	a, b, me := newReceiver(t), newReceiver(t), newReceiver(t)
	me.self = "me"
	var res results
	r := newRelay(t, Options{Peers: []Peer{{URL: a.srv.URL}, {URL: me.srv.URL}, {URL: b.srv.URL}}, Metrics: res.add})
	body := `{"ref":"refs/heads/main"}`
	r.Send("push", "d-1", "application/json", []byte(body))
	testkit.WaitUntil(t, "relays answered", func() bool { return res.get(ResultOK) == 2 && res.get(ResultSelf) == 1 })
	for _, rc := range []*receiver{a, b} {
		got := rc.received()
		want := relayed{from: "me", event: "push", delivery: "d-1", contentType: "application/json", body: body, signed: true}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("%s received %+v, want %+v", rc.srv.URL, got, want)
		}
	}
	if s := statsOf(r, me.srv.URL); !s.Self || s.LastResult != ResultSelf {
		t.Fatalf("own address: %+v", s)
	}
	if r.Known() != 2 {
		t.Fatalf("Known = %d, want 2", r.Known())
	}
	r.Send("push", "d-2", "application/json", []byte(body))
	testkit.WaitUntil(t, "second relays answered", func() bool { return res.get(ResultOK) == 4 })
	r.Close()
	if n := len(me.received()); n != 1 {
		t.Fatalf("own address sent %d relays, want 1 (skipped once known)", n)
	}
	if s := statsOf(r, a.srv.URL); s.Sent != 2 || s.Failed != 0 || s.LastResult != ResultOK || s.LastAt.IsZero() {
		t.Fatalf("stats of a: %+v", s)
	}
}

// TestRelayDownPeer: a peer that is down costs a failure counted for it,
// and the others get the delivery.
func TestRelayDownPeer(t *testing.T) {
	up := newReceiver(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	var res results
	r := newRelay(t, Options{Peers: []Peer{{URL: down}, {URL: up.srv.URL}}, Metrics: res.add})
	r.Send("push", "d-1", "application/json", []byte("{}"))
	testkit.WaitUntil(t, "both relays ended", func() bool { return res.get(ResultOK)+res.get(ResultFailed) == 2 })
	if res.get(ResultFailed) != 1 || len(up.received()) != 1 {
		t.Fatalf("results %v, up received %d", res.n, len(up.received()))
	}
	if s := statsOf(r, down); s.Failed != 1 || s.LastResult != ResultFailed || !strings.Contains(s.LastError, "connect") {
		t.Fatalf("stats of the down peer: %+v", s)
	}
}

// TestRelayRefused: a peer that answers but refuses (a wrong secret) is
// counted as refused.
func TestRelayRefused(t *testing.T) {
	p := newReceiver(t)
	p.status = http.StatusUnauthorized
	var res results
	r := newRelay(t, Options{Peers: []Peer{{URL: p.srv.URL}}, Metrics: res.add})
	r.Send("push", "d-1", "application/json", []byte("{}"))
	testkit.WaitUntil(t, "the relay ended", func() bool { return res.get(ResultRefused) == 1 })
	if s := statsOf(r, p.srv.URL); s.Failed != 1 || !strings.Contains(s.LastError, "401") {
		t.Fatalf("stats: %+v", s)
	}
}

// TestRelaySlowPeerTimesOut: Send returns while a peer has not answered,
// the other peers are not held up by it, and the slow one fails at the
// timeout.
func TestRelaySlowPeerTimesOut(t *testing.T) {
	slow, fast := newReceiver(t), newReceiver(t)
	slow.hold = make(chan struct{}) // never answers before its request ends
	var res results
	r := newRelay(t, Options{Peers: []Peer{{URL: slow.srv.URL}, {URL: fast.srv.URL}}, Metrics: res.add, Timeout: 200 * time.Millisecond})
	r.Send("push", "d-1", "application/json", []byte("{}"))
	testkit.WaitUntil(t, "the fast peer answered", func() bool { return res.get(ResultOK) == 1 })
	testkit.WaitUntil(t, "the slow peer timed out", func() bool { return res.get(ResultFailed) == 1 })
	if s := statsOf(r, slow.srv.URL); !strings.Contains(s.LastError, "deadline exceeded") {
		t.Fatalf("slow peer: %+v", s)
	}
}

// TestRelayBudget: a delivery whose body does not fit beside the relays
// in flight is dropped and counted; once they are done, one fits again.
func TestRelayBudget(t *testing.T) {
	p := newReceiver(t)
	p.hold = make(chan struct{})
	var res results
	r := newRelay(t, Options{Peers: []Peer{{URL: p.srv.URL}}, Metrics: res.add, Budget: 10})
	r.Send("push", "d-1", "application/json", []byte("12345678"))
	testkit.WaitUntil(t, "the first relay arrived", func() bool { return len(p.received()) == 1 })
	r.Send("push", "d-2", "application/json", []byte("12345678"))
	if r.Dropped() != 1 || res.get(ResultDropped) != 1 {
		t.Fatalf("dropped %d (metric %d), want 1", r.Dropped(), res.get(ResultDropped))
	}
	r.Send("push", "d-3", "application/json", []byte("12")) // fits beside the first
	testkit.WaitUntil(t, "the small relay arrived", func() bool { return len(p.received()) == 2 })
	close(p.hold)
	testkit.WaitUntil(t, "both answered", func() bool { return res.get(ResultOK) == 2 })
	waitIdle(t, r) // the budget is free
	r.Send("push", "d-4", "application/json", []byte("12345678"))
	testkit.WaitUntil(t, "the relay after them", func() bool { return res.get(ResultOK) == 3 })
	if got := p.received(); len(got) != 3 || got[1].delivery != "d-3" || got[2].delivery != "d-4" {
		t.Fatalf("received %+v", got)
	}
}

// waitIdle waits until r has no delivery in flight.
func waitIdle(t *testing.T, r *Relay) {
	t.Helper()
	testkit.WaitUntil(t, "no relay in flight", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.inFlight == 0
	})
}

// fakeResolver answers from a map the test changes.
type fakeResolver struct {
	mu    sync.Mutex
	addrs map[string][]string
	calls int
}

func (f *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	a, ok := f.addrs[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func (f *fakeResolver) set(host string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs[host] = addrs
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// samePortReceivers starts receivers on 127.0.0.1 and 127.0.0.2 on one
// port, as a headless Service's pods listen on one port at several
// addresses.
func samePortReceivers(t *testing.T, tlsCfg *tls.Config) (*receiver, *receiver, int) {
	t.Helper()
	for range 20 {
		ln1, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln1.Addr().(*net.TCPAddr).Port
		ln2, err := net.Listen("tcp", "127.0.0.2:"+strconv.Itoa(port))
		if err != nil {
			ln1.Close()
			continue
		}
		var rcs [2]*receiver
		for i, ln := range []net.Listener{ln1, ln2} {
			rc := &receiver{}
			rc.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: rc, ErrorLog: log.New(io.Discard, "", 0)}}
			if tlsCfg != nil {
				rc.srv.TLS = tlsCfg
				rc.srv.StartTLS()
			} else {
				rc.srv.Start()
			}
			t.Cleanup(rc.close)
			rcs[i] = rc
		}
		return rcs[0], rcs[1], port
	}
	t.Skip("could not bind 127.0.0.1 and 127.0.0.2 on one port")
	return nil, nil, 0
}

// TestRelayDNSReResolved: a dns: peer's addresses are looked up through
// the resolver, kept for ResolveEvery by the injected clock, then looked
// up again: a pod gone is no longer sent to, a new one is.
func TestRelayDNSReResolved(t *testing.T) {
	one, two, port := samePortReceivers(t, nil)
	res := &fakeResolver{addrs: map[string][]string{"skillreg-headless": {"127.0.0.1"}}}
	clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	var counts results
	r := newRelay(t, Options{Peers: []Peer{{DNSName: "skillreg-headless", Port: port}}, Resolver: res, Now: clock.now, Metrics: counts.add})
	if r.Known() != 0 {
		t.Fatalf("Known = %d before any lookup", r.Known())
	}
	r.Start()
	testkit.WaitUntil(t, "the lookup at Start", func() bool { return r.Known() == 1 })
	r.Send("push", "d-1", "application/json", []byte("{}"))
	testkit.WaitUntil(t, "the first relay", func() bool { return counts.get(ResultOK) == 1 })
	if len(one.received()) != 1 {
		t.Fatalf("127.0.0.1 received %d", len(one.received()))
	}

	res.set("skillreg-headless", "127.0.0.2")
	clock.add(ResolveEvery - time.Second)
	r.Send("push", "d-2", "application/json", []byte("{}"))
	testkit.WaitUntil(t, "the second relay", func() bool { return counts.get(ResultOK) == 2 })
	if len(one.received()) != 2 || len(two.received()) != 0 {
		t.Fatalf("before ResolveEvery: 127.0.0.1 got %d, 127.0.0.2 got %d; want 2 and 0", len(one.received()), len(two.received()))
	}

	clock.add(time.Second)
	r.Send("push", "d-3", "application/json", []byte("{}"))
	testkit.WaitUntil(t, "the third relay", func() bool { return counts.get(ResultOK) == 3 })
	if len(one.received()) != 2 || len(two.received()) != 1 {
		t.Fatalf("after ResolveEvery: 127.0.0.1 got %d, 127.0.0.2 got %d; want 2 and 1", len(one.received()), len(two.received()))
	}
	st := r.Stats()
	if len(st) != 1 || st[0].URL != fmt.Sprintf("http://127.0.0.2:%d", port) || st[0].Peer != fmt.Sprintf("dns:skillreg-headless:%d", port) {
		t.Fatalf("stats: %+v", st)
	}

	// An address found to be this replica's own is skipped until the
	// name is looked up again.
	two.self = "me"
	r.Send("push", "d-4", "application/json", []byte("{}"))
	testkit.WaitUntil(t, "the self answer", func() bool { return counts.get(ResultSelf) == 1 })
	r.Send("push", "d-5", "application/json", []byte("{}"))
	waitIdle(t, r)                  // d-5 was sent to no one, before the clock moves
	r.Refresh(context.Background()) // not stale: nothing looked up
	if r.Known() != 0 || len(two.received()) != 2 {
		t.Fatalf("own address: Known %d, received %d", r.Known(), len(two.received()))
	}
	clock.add(ResolveEvery)
	r.Refresh(context.Background())
	if r.Known() != 1 {
		t.Fatalf("after a lookup, Known = %d, want 1 (the address is tried again)", r.Known())
	}
	// A failed lookup keeps what was known.
	res.mu.Lock()
	delete(res.addrs, "skillreg-headless")
	res.mu.Unlock()
	clock.add(ResolveEvery)
	r.Refresh(context.Background())
	if r.Known() != 1 {
		t.Fatalf("after a failed lookup, Known = %d, want 1", r.Known())
	}
}

// serverTLS is a server configuration with a certificate for names and
// ips, signed by ca.
func serverTLS(t *testing.T, ca *testkit.CA, names []string, ips ...net.IP) *tls.Config {
	t.Helper()
	hosts := slices.Clone(names)
	for _, ip := range ips {
		hosts = append(hosts, ip.String())
	}
	der, key := ca.Issue(t, 2, hosts...)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// TestRelayHTTPS: https peers are verified against the configured CA; a
// dns: peer's certificate must carry the DNS name (the TLS server name),
// not the address it resolved to.
func TestRelayHTTPS(t *testing.T) {
	ca := testkit.NewCA(t)
	one, _, port := samePortReceivers(t, serverTLS(t, ca, []string{"skillreg-headless"}, net.ParseIP("127.0.0.1")))
	static := fmt.Sprintf("https://127.0.0.1:%d", port)
	resolver := &fakeResolver{addrs: map[string][]string{"skillreg-headless": {"127.0.0.1"}, "other-name": {"127.0.0.1"}}}
	peersList := []Peer{{URL: static}, {DNSName: "skillreg-headless", Port: port}, {DNSName: "other-name", Port: port}}

	var counts results
	r := newRelay(t, Options{Peers: peersList, DNSScheme: "https", RootCAs: ca.Pool, Resolver: resolver, Metrics: counts.add})
	r.Send("push", "d-1", "application/json", []byte("{}"))
	testkit.WaitUntil(t, "three relays ended", func() bool { return counts.get(ResultOK)+counts.get(ResultFailed) == 3 })
	// The static URL and skillreg-headless resolve to the same address,
	// so two of the three arrive; other-name's certificate check fails.
	if counts.get(ResultOK) != 2 || len(one.received()) != 2 {
		t.Fatalf("results %v, received %d", counts.n, len(one.received()))
	}
	var wrongName Stats
	for _, s := range r.Stats() {
		if s.Peer == fmt.Sprintf("dns:other-name:%d", port) {
			wrongName = s
		}
	}
	if wrongName.LastResult != ResultFailed || !strings.Contains(wrongName.LastError, "other-name") {
		t.Fatalf("a certificate without the DNS name: %+v", wrongName)
	}

	// Without the CA, the system roots do not know the peer.
	var plain results
	r2 := newRelay(t, Options{Peers: []Peer{{URL: static}}, Metrics: plain.add})
	r2.Send("push", "d-2", "application/json", []byte("{}"))
	testkit.WaitUntil(t, "the unverified relay ended", func() bool { return plain.get(ResultFailed) == 1 })
	if s := statsOf(r2, static); !strings.Contains(s.LastError, "certificate") {
		t.Fatalf("without peers_ca_file: %+v", s)
	}
}
