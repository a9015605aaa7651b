package netlimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestClient(t *testing.T) {
	t.Parallel()
	proxies := Proxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	cases := []struct {
		peer string
		xff  []string
		want string
	}{
		{"192.0.2.7:5000", nil, "192.0.2.7"},
		{"192.0.2.7:5000", []string{"203.0.113.9"}, "192.0.2.7"}, // untrusted peer: header ignored
		{"10.1.2.3:5000", nil, "10.1.2.3"},
		{"10.1.2.3:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"10.1.2.3:5000", []string{"1.1.1.1, 203.0.113.9"}, "203.0.113.9"},           // the client's own claim on the left
		{"10.1.2.3:5000", []string{"1.1.1.1, 203.0.113.9, 10.9.9.9"}, "203.0.113.9"}, // two trusted hops
		{"10.1.2.3:5000", []string{"1.1.1.1", "203.0.113.9"}, "203.0.113.9"},         // several header lines
		{"10.1.2.3:5000", []string{"10.4.4.4, 10.5.5.5"}, "10.4.4.4"},                // all trusted: the left-most
		{"10.1.2.3:5000", []string{"garbage, 203.0.113.9"}, "203.0.113.9"},
		{"10.1.2.3:5000", []string{"203.0.113.9, garbage"}, "10.1.2.3"}, // a hop that does not parse: the peer
		{"10.1.2.3:5000", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"10.1.2.3:5000", []string{"203.0.113.9:1234"}, "203.0.113.9"},
		{"[::1]:5000", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"[::ffff:10.1.2.3]:5000", []string{"203.0.113.9"}, "203.0.113.9"},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.peer
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := proxies.Client(r); got.String() != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
		if got := (Proxies{}).Client(r); got != Peer(r) {
			t.Errorf("no trusted proxies: %s, want the peer", got)
		}
	}
}

func TestForwardedCapsClients(t *testing.T) {
	t.Parallel()
	proxies := Proxies{netip.MustParsePrefix("10.0.0.0/8")}
	per := NewPerClient(1)
	inside := make(chan string, 1)
	release := make(chan struct{})
	h := Forwarded(proxies, per, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- r.RemoteAddr
		<-release
	}))
	req := func(xff string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "10.0.0.1:4000"
		r.Header.Set("X-Forwarded-For", xff)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	done := make(chan struct{})
	go func() { req("203.0.113.9"); close(done) }()
	if got := <-inside; got != "203.0.113.9:0" {
		t.Errorf("RemoteAddr below the proxy: %q", got)
	}
	if w := req("203.0.113.9"); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("second request of one client over its cap: %d", w.Code)
	}
	go func() { <-inside }()
	release <- struct{}{} // the other client is not held by the first's cap
	close(release)
	if w := req("203.0.113.10"); w.Code != http.StatusOK {
		t.Errorf("another client: %d", w.Code)
	}
	<-done
}

// FuzzClient: whatever X-Forwarded-For says, the client is the peer or
// one of the header's hops, never a trusted proxy unless every hop is, and
// an untrusted peer's header is never read.
func FuzzClient(f *testing.F) {
	for _, s := range []string{"203.0.113.9", "1.1.1.1, 203.0.113.9, 10.9.9.9", "garbage", "[::1]:80, 10.0.0.1", strings.Repeat("10.0.0.1,", 1000), ""} {
		f.Add(s, true)
		f.Add(s, false)
	}
	proxies := Proxies{netip.MustParsePrefix("10.0.0.0/8")}
	f.Fuzz(func(t *testing.T, xff string, trustedPeer bool) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "192.0.2.1:1000"
		if trustedPeer {
			r.RemoteAddr = "10.0.0.1:1000"
		}
		r.Header.Set("X-Forwarded-For", xff)
		got := proxies.Client(r)
		if !trustedPeer {
			if got != Peer(r) {
				t.Fatalf("untrusted peer: client %s", got)
			}
			return
		}
		if got == Peer(r) {
			return
		}
		if !strings.Contains(xff, strings.TrimPrefix(got.String(), "::ffff:")) && !strings.Contains(strings.ToLower(xff), got.String()) {
			t.Fatalf("client %s is not in %q", got, xff)
		}
	})
}
