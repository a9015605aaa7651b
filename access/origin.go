package access

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Hosts is the Host header check against DNS rebinding: a page on an
// attacker's name that resolves to this server sends that name as Host, so
// only names the operator listed are served. IP literals always pass (the
// page's origin is then this server's own address, which no attacker
// serves pages from) and so do loopback names (only the machine itself
// serves pages under them).
type Hosts struct {
	any      bool
	exact    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
}

// NewHosts accepts host names, "*.suffix" wildcards (any name under
// suffix, not suffix itself) and "*" (every Host).
func NewHosts(patterns []string) *Hosts {
	h := &Hosts{exact: map[string]bool{}}
	for _, p := range append([]string{"localhost", "*.localhost"}, patterns...) {
		p = strings.TrimSuffix(strings.ToLower(p), ".")
		switch {
		case p == "*":
			h.any = true
		case strings.HasPrefix(p, "*."):
			h.suffixes = append(h.suffixes, p[1:])
		default:
			h.exact[p] = true
		}
	}
	return h
}

// Allowed reports whether a Host header value (with or without port) may
// be served.
func (h *Hosts) Allowed(hostport string) bool {
	if h == nil || h.any {
		return true
	}
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if h.exact[host] {
		return true
	}
	for _, s := range h.suffixes {
		if strings.HasSuffix(host, s) && len(host) > len(s) {
			return true
		}
	}
	return false
}

// HostCheck answers 403 to a request whose Host is not allowed. hosts is
// read at every request, so a reload takes effect at once.
func HostCheck(hosts func() *Hosts, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts().Allowed(r.Host) {
			w.Header().Set("Connection", "close")
			http.Error(w, "Host not allowed (see http.allowed_hosts)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Origins is the Origin check of the MCP endpoint: a request without
// Origin (not from a browser) passes, and so does one whose Origin is the
// request's own host (a page this server served; the Host check has
// vouched for that name) or one of the listed origins. Every method is
// checked: net/http's CrossOriginProtection lets GET and HEAD through and
// trusts Sec-Fetch-Site, while MCP requires servers to validate Origin on
// every request.
type Origins struct {
	set map[string]bool
}

// NewOrigins accepts origins such as "https://app.example.com".
func NewOrigins(list []string) *Origins {
	o := &Origins{set: map[string]bool{}}
	for _, s := range list {
		if c, ok := canonicalOrigin(s); ok {
			o.set[c] = true
		}
	}
	return o
}

// Allowed reports whether a request from origin to host may be served.
func (o *Origins) Allowed(origin, host string) bool {
	if origin == "" {
		return true
	}
	c, ok := canonicalOrigin(origin)
	if !ok {
		return false // "null", garbage
	}
	if o != nil && o.set[c] {
		return true
	}
	u, _ := url.Parse(c)
	return strings.EqualFold(u.Host, canonicalHost(u.Scheme, host))
}

// canonicalOrigin lowercases an origin and drops its default port.
func canonicalOrigin(s string) (string, bool) {
	u, err := url.Parse(strings.TrimSuffix(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.User != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	return scheme + "://" + canonicalHost(scheme, u.Host), true
}

func canonicalHost(scheme, host string) string {
	host = strings.ToLower(host)
	if h, port, err := net.SplitHostPort(host); err == nil && (scheme == "http" && port == "80" || scheme == "https" && port == "443") {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return host
}

// OriginCheck answers 403 to a request whose Origin is not allowed.
// origins is read at every request.
func OriginCheck(origins func() *Origins, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !origins().Allowed(r.Header.Get("Origin"), r.Host) {
			http.Error(w, "Origin not allowed (see http.allowed_origins)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Networks are the addresses that may read operational detail (/metrics,
// the whole /readyz) without a token.
type Networks []netip.Prefix

// Contains reports whether a is in one of the networks.
func (n Networks) Contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range n {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
