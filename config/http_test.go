package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHTTPErrorsNameKey(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"http:\n  max_connections: -1\n", `http.max_connections: -1`},
		{"http:\n  max_connections_per_ip: -3\n", `http.max_connections_per_ip: -3`},
		{"http:\n  trusted_proxies: [10.0.0.0/33]\n", `http.trusted_proxies: "10.0.0.0/33"`},
		{"http:\n  trusted_proxies: [proxy.example.com]\n", `http.trusted_proxies: "proxy.example.com" is not a CIDR`},
		{"http:\n  metrics_networks: [\"\"]\n", `http.metrics_networks`},
		{"http:\n  allowed_hosts: [skills.example.com:443]\n", `http.allowed_hosts[0]: "skills.example.com:443": a host name without port`},
		{"http:\n  allowed_hosts: [ok.example.com, Skills.Example.com]\n", `http.allowed_hosts[1]: "Skills.Example.com" is not a lowercase host name`},
		{"http:\n  allowed_hosts: [\"https://x\"]\n", `http.allowed_hosts[0]`},
		{"http:\n  allowed_origins: [app.example.com]\n", `http.allowed_origins[0]: "app.example.com" is not an origin`},
		{"http:\n  allowed_origins: [\"https://app.example.com/path\"]\n", `http.allowed_origins[0]`},
		{"http:\n  body_min_rate: -5\n", `http.body_min_rate`},
		{"http:\n  header_timeout: -1s\n", `not a duration`},
		{"http:\n  idle_timeout: soon\n", `not a duration`},
		{"http:\n  max_conections: 5\n", `line 2: unknown key "max_conections"`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}

func TestHTTPDefaultsAndParsing(t *testing.T) {
	c, err := Parse(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	h := c.HTTP
	if h.MaxConnections != 0 || *h.MaxConnectionsPerIP != DefaultMaxConnectionsPerIP || h.HeaderTimeout.D() != DefaultHeaderTimeout ||
		h.BodyGrace.D() != DefaultBodyGrace || h.BodyMinRate != DefaultBodyMinRate || h.IdleTimeout.D() != DefaultIdleTimeout {
		t.Errorf("defaults %+v", h)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	if !slices.Equal(h.MetricsNets, want) || len(h.TrustedProxyNets) != 0 {
		t.Errorf("networks %v %v", h.MetricsNets, h.TrustedProxyNets)
	}
	if got := c.AllowedHosts(); !slices.Equal(got, LoopbackHosts) {
		t.Errorf("default allowed hosts on 127.0.0.1: %v", got)
	}

	c, err = Parse([]byte(`listen: skills.internal:8080
http:
  max_connections: 5000
  max_connections_per_ip: 0
  trusted_proxies: [10.0.0.0/8, 192.168.1.7, "::ffff:172.16.0.0/108"]
  metrics_networks: []
  allowed_origins: ["https://app.example.com"]
  header_timeout: 250ms
  body_grace: 100ms
  body_min_rate: 4096
  idle_timeout: 500ms
`), "")
	if err != nil {
		t.Fatal(err)
	}
	h = c.HTTP
	if h.MaxConnections != 5000 || *h.MaxConnectionsPerIP != 0 || h.HeaderTimeout.D() != 250*time.Millisecond ||
		h.BodyGrace.D() != 100*time.Millisecond || h.BodyMinRate != 4096 || h.IdleTimeout.D() != 500*time.Millisecond {
		t.Errorf("set %+v", h)
	}
	wantProxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("172.16.0.0/12")}
	if !slices.Equal(h.TrustedProxyNets, wantProxies) {
		t.Errorf("trusted proxies %v", h.TrustedProxyNets)
	}
	if len(h.MetricsNets) != 0 {
		t.Errorf("metrics_networks: [] must mean none, got %v", h.MetricsNets)
	}
	if got := c.AllowedHosts(); !slices.Contains(got, "skills.internal") || !slices.Contains(got, "localhost") {
		t.Errorf("the listen host joins the default: %v", got)
	}
	c, err = Parse([]byte("http:\n  allowed_hosts: [skills.example.com, \"*.svc.cluster.local\"]\n"), "")
	if err != nil || !slices.Equal(c.AllowedHosts(), []string{"skills.example.com", "*.svc.cluster.local"}) {
		t.Errorf("allowed_hosts set: %v %v", c.AllowedHosts(), err)
	}
}
