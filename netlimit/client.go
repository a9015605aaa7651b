package netlimit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
)

// Proxies are the networks of trusted reverse proxies. Only a request whose
// peer is in them has its X-Forwarded-For read; every other request's
// client is its peer, whatever headers it sends.
type Proxies []netip.Prefix

// Trusted reports whether a is a trusted proxy.
func (p Proxies) Trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Peer is the address a request's connection comes from.
func Peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		a, _ := netip.ParseAddr(r.RemoteAddr)
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}

// Client is the address a request is from: its peer, or, when the peer is
// a trusted proxy, the right-most address in X-Forwarded-For that is not a
// trusted proxy (what the outermost trusted proxy saw; anything left of it
// is the client's own claim). A header that does not parse falls back to
// the peer.
func (p Proxies) Client(r *http.Request) netip.Addr {
	peer := Peer(r)
	if len(p) == 0 || !p.Trusted(peer) {
		return peer
	}
	hops := forwardedFor(r.Header)
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			return peer
		}
		client = a.Unmap()
		if !p.Trusted(client) {
			return client
		}
	}
	return client
}

// forwardedFor lists the X-Forwarded-For hops, left to right, over every
// header line (a proxy may add its own line rather than append).
func forwardedFor(h http.Header) []string {
	var out []string
	for _, line := range h.Values("X-Forwarded-For") {
		for _, hop := range strings.Split(line, ",") {
			hop = strings.TrimSpace(hop)
			if hop == "" {
				continue
			}
			if host, _, err := net.SplitHostPort(hop); err == nil {
				hop = host
			}
			out = append(out, strings.Trim(hop, "[]"))
		}
	}
	return out
}

// PerClient caps the requests in flight per client address, for clients
// behind trusted proxies, whose connections the Listener cannot tell apart.
type PerClient struct {
	max int
	mu  sync.Mutex
	n   map[netip.Addr]int
}

// NewPerClient allows max requests in flight per client (0: no cap).
func NewPerClient(max int) *PerClient { return &PerClient{max: max, n: map[netip.Addr]int{}} }

// Enter counts a request of a in; it reports false, counting nothing, when
// a is at its cap. Every true is paired with a Leave.
func (pc *PerClient) Enter(a netip.Addr) bool {
	if pc == nil || pc.max <= 0 {
		return true
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.n[a] >= pc.max {
		return false
	}
	pc.n[a]++
	return true
}

// Leave counts a request of a out.
func (pc *PerClient) Leave(a netip.Addr) {
	if pc == nil || pc.max <= 0 {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.n[a]--; pc.n[a] <= 0 {
		delete(pc.n, a)
	}
}

// Forwarded resolves each request's client through proxies: behind a
// trusted proxy it rewrites RemoteAddr to the forwarded client (so every
// handler, limiter and log below sees the client) and holds the client to
// per's cap of requests in flight, answering 503 over it.
func Forwarded(proxies Proxies, per *PerClient, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(proxies) == 0 || !proxies.Trusted(Peer(r)) {
			next.ServeHTTP(w, r)
			return
		}
		client := proxies.Client(r)
		if !per.Enter(client) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests from one client", http.StatusServiceUnavailable)
			return
		}
		defer per.Leave(client)
		r2 := r.WithContext(r.Context()) // a shallow copy
		r2.RemoteAddr = netip.AddrPortFrom(client, 0).String()
		next.ServeHTTP(w, r2)
	})
}
