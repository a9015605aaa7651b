package access

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestHosts(t *testing.T) {
	h := NewHosts([]string{"skills.example.com", "*.svc.cluster.local"})
	cases := []struct {
		host string
		ok   bool
	}{
		{"skills.example.com", true},
		{"SKILLS.example.com:8443", true},
		{"skills.example.com.", true},
		{"skillreg.ns.svc.cluster.local:8080", true},
		{"svc.cluster.local", false}, // the wildcard is for names below it
		{"evil.example.com", false},  // a DNS-rebinding page's own name
		{"evil.example.com:8080", false},
		{"skills.example.com.evil.net", false},
		{"localhost:8080", true},
		{"app.localhost", true},
		{"127.0.0.1:8080", true}, // IP literals: the page's origin is this server's address
		{"10.2.3.4:8080", true},  // a Kubernetes probe: the pod IP
		{"[::1]:8080", true},
		{"[2001:db8::5]", true},
		{"", false},
		{":8080", false},
	}
	for _, tc := range cases {
		if got := h.Allowed(tc.host); got != tc.ok {
			t.Errorf("Allowed(%q) = %v, want %v", tc.host, got, tc.ok)
		}
	}
	if !NewHosts([]string{"*"}).Allowed("anything.example") {
		t.Error(`"*" must allow every Host`)
	}
	def := NewHosts(nil)
	if def.Allowed("evil.example.com") || !def.Allowed("localhost") {
		t.Error("the loopback default")
	}

	srv := HostCheck(func() *Hosts { return h }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, tc := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = tc.host
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if (w.Code == http.StatusOK) != tc.ok || (!tc.ok && w.Code != http.StatusForbidden) {
			t.Errorf("Host %q: %d", tc.host, w.Code)
		}
	}
}

func TestOrigins(t *testing.T) {
	o := NewOrigins([]string{"https://app.example.com", "http://localhost:6274/"})
	cases := []struct {
		origin, host string
		ok           bool
	}{
		{"", "127.0.0.1:8080", true},                      // not a browser
		{"http://127.0.0.1:8080", "127.0.0.1:8080", true}, // same origin
		{"http://localhost:8080", "localhost:8080", true},
		{"http://LOCALHOST:8080", "localhost:8080", true},
		{"https://skills.example.com", "skills.example.com:443", true},
		{"http://skills.example.com:80", "skills.example.com", true},
		{"https://app.example.com", "skills.example.com", true}, // listed
		{"https://app.example.com:443", "skills.example.com", true},
		{"http://localhost:6274", "127.0.0.1:8080", true},
		{"http://evil.example.com", "127.0.0.1:8080", false},
		{"http://evil.example.com", "skills.example.com", false},
		{"http://app.example.com", "skills.example.com", false}, // scheme matters
		{"http://localhost:3000", "localhost:8080", false},      // port matters
		{"null", "127.0.0.1:8080", false},
		{"file://", "127.0.0.1:8080", false},
		{"http://127.0.0.1:8080/path", "127.0.0.1:8080", false},
	}
	for _, tc := range cases {
		if got := o.Allowed(tc.origin, tc.host); got != tc.ok {
			t.Errorf("Allowed(%q, %q) = %v, want %v", tc.origin, tc.host, got, tc.ok)
		}
	}
	var none *Origins = NewOrigins(nil)
	if none.Allowed("https://app.example.com", "skills.example.com") {
		t.Error("no origins listed: a foreign origin passed")
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		r := httptest.NewRequest(m, "/mcp", nil)
		r.Host = "127.0.0.1:8080"
		r.Header.Set("Origin", "http://evil.example.com")
		w := httptest.NewRecorder()
		OriginCheck(func() *Origins { return none }, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
		if w.Code != http.StatusForbidden {
			t.Errorf("%s with a foreign Origin: %d", m, w.Code)
		}
	}
}

func TestNetworks(t *testing.T) {
	n := Networks{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8")}
	for a, want := range map[string]bool{"127.0.0.1": true, "127.9.9.9": true, "::1": true, "::ffff:127.0.0.1": true, "10.1.1.1": true, "192.0.2.1": false, "2001:db8::1": false} {
		if got := n.Contains(netip.MustParseAddr(a)); got != want {
			t.Errorf("Contains(%s) = %v", a, got)
		}
	}
	if (Networks{}).Contains(netip.MustParseAddr("127.0.0.1")) {
		t.Error("no networks contain nothing")
	}
}
