package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/gitmirror"
	"github.com/skillreg/skillreg/netlimit"
	"github.com/skillreg/skillreg/webhook"
)

// Body limits of the endpoints other than the webhook (webhook.MaxBodyBytes).
const (
	mcpMaxBody   = 4 << 20  // one JSON-RPC message
	otherMaxBody = 64 << 10 // the sign-in form, and anything else
)

// probePaths are served from the reserved connection pool under a flood.
var probePaths = []string{"/healthz", "/readyz"}

// frontTuning holds what tests set below the defaults (the configuration
// holds the rest); the zero value means the netlimit defaults.
type frontTuning struct {
	peekTimeout time.Duration // a connection over the caps has this long to send its request line
	budget      int64         // body bytes in flight across all requests
	budgetWait  time.Duration // how long a body waits for budget before 503
	reserved    int           // the probe pool
}

// frontPolicy is the reloadable part of the front door.
type frontPolicy struct {
	hosts   *access.Hosts
	origins *access.Origins
	metrics access.Networks
}

func newFrontPolicy(cfg *config.Config) *frontPolicy {
	return &frontPolicy{
		hosts:   access.NewHosts(cfg.AllowedHosts()),
		origins: access.NewOrigins(cfg.HTTP.AllowedOrigins),
		metrics: access.Networks(cfg.HTTP.MetricsNets),
	}
}

// currentFront is the running configuration's front-door policy.
func (d *Daemon) currentFront() *frontPolicy { return d.running().front }

// hostAllowed is the running http.allowed_hosts check: the Hosts that
// absolute URLs (marketplace archives, install commands) may be built on.
func (d *Daemon) hostAllowed(hostport string) bool {
	return d.currentFront().hosts.Allowed(hostport)
}

// listen wraps the bound socket in the connection caps.
func (d *Daemon) limitListener(ln net.Listener) *netlimit.Listener {
	h := d.running().cfg.HTTP
	proxies := netlimit.Proxies(h.TrustedProxyNets)
	return netlimit.NewListener(ln, netlimit.Options{
		MaxConns:      h.MaxConnections,
		MaxConnsPerIP: *h.MaxConnectionsPerIP,
		Exempt:        proxies.Trusted,
		ProbePaths:    probePaths,
		Reserved:      d.tuning.reserved,
		PeekTimeout:   d.tuning.peekTimeout,
		TLS:           d.tlsConfig(),
		Logger:        d.log,
	})
}

// tlsConfig is the HTTPS configuration, nil for plain HTTP. The listener
// terminates TLS itself, so that a probe over the caps can still be read.
func (d *Daemon) tlsConfig() *tls.Config {
	if d.certs == nil {
		return nil
	}
	return d.certs.config()
}

// frontDoor is what every request passes before the routes: probe-pool
// connections kept to the probes, the Host check, the client address
// behind trusted proxies (and its cap), and body pacing and budget.
func (d *Daemon) frontDoor(next http.Handler) http.Handler {
	h := d.running().cfg.HTTP
	proxies := netlimit.Proxies(h.TrustedProxyNets)
	per := netlimit.NewPerClient(*h.MaxConnectionsPerIP)
	pace := func(limit int64, buffer bool) netlimit.BodyPolicy {
		return netlimit.BodyPolicy{Limit: limit, Grace: h.BodyGrace.D(), MinRate: h.BodyMinRate, Buffer: buffer}
	}
	hook, mcpBody, other := pace(webhook.MaxBodyBytes, false), pace(mcpMaxBody, true), pace(otherMaxBody, true)
	gitBody := pace(gitmirror.MaxRequestBytes, true) // wants and haves, from the shared budget
	policy := func(r *http.Request) netlimit.BodyPolicy {
		switch r.URL.Path {
		case webhook.Path:
			return hook // read by the webhook handler, from the same budget
		case "/mcp":
			return mcpBody
		}
		if strings.HasPrefix(r.URL.Path, gitmirror.Prefix) && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			return gitBody
		}
		return other
	}
	hosts := func() *access.Hosts { return d.currentFront().hosts }
	return netlimit.ProbeOnly(probePaths,
		access.HostCheck(hosts,
			netlimit.Forwarded(proxies, per,
				netlimit.Bodies(d.budget, policy, next))))
}

// originCheck guards /mcp.
func (d *Daemon) originCheck(next http.Handler) http.Handler {
	return access.OriginCheck(func() *access.Origins { return d.currentFront().origins }, next)
}

// inspector reports whether a request may see operational detail (every
// source's state on /readyz, /metrics): always without access control;
// with it, a credential the gate accepts (a client's token or the
// provider's) or a client address in http.metrics_networks. A wrong token
// counts as a failed attempt.
func (d *Daemon) inspector(r *http.Request) bool {
	g := d.currentGate()
	if !g.Required() {
		return true
	}
	if d.currentFront().metrics.Contains(netlimit.Peer(r)) {
		return true
	}
	tok := access.Bearer(r.Header.Get("Authorization"))
	if tok == "" {
		return false
	}
	_, err := g.Check(r.Context(), remoteHost(r), tok)
	return err == nil
}

// metricsHandler serves /metrics to inspectors only.
func (d *Daemon) metricsHandler() echo.HandlerFunc {
	h := d.metrics.Handler()
	return func(c echo.Context) error {
		if !d.inspector(c.Request()) {
			return echo.NewHTTPError(http.StatusForbidden, "metrics need a valid token (a client's or the provider's) or an address in http.metrics_networks")
		}
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

// readyz answers 200 when the catalog is loaded (every source has a
// snapshot or has finished a first sync attempt) and 503 before. Inspectors
// get each source's state; anyone else, once clients are configured, only
// the readiness bit and counts.
func (d *Daemon) readyz(c echo.Context) error {
	type source struct {
		catalog.State
		AgeSeconds *float64 `json:"age_seconds,omitempty"`
		Serving    bool     `json:"serving"`
	}
	cat := d.Registry.Current()
	ready := d.Registry.Ready()
	code := http.StatusOK
	if !ready {
		code = http.StatusServiceUnavailable
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	states := d.Registry.States()
	if !d.inspector(c.Request()) {
		return c.JSON(code, struct {
			Ready   bool `json:"ready"`
			Skills  int  `json:"skills"`
			Sources int  `json:"sources"`
		}{ready, cat.Len(catalog.Filter{}), len(states)})
	}
	out := struct {
		Ready      bool   `json:"ready"`
		Generation uint64 `json:"generation"`
		// GenerationName is what cursors carry: replicas that show the
		// same one continue each other's listings.
		GenerationName string `json:"generation_name"`
		// InstanceID is this process's id among its peers (random at
		// start): what a relay it sends carries.
		InstanceID string   `json:"instance_id"`
		Skills     int      `json:"skills"`
		Sources    []source `json:"sources"`
	}{Ready: ready, Generation: cat.Gen, GenerationName: cat.Name(), InstanceID: d.instance, Skills: cat.Len(catalog.Filter{})}
	for _, st := range states {
		s := source{State: st}
		if snap, ok := cat.Snapshot(st.Source); ok {
			s.Serving = true
			age := time.Since(snap.IndexedAt).Seconds()
			s.AgeSeconds = &age
		}
		out.Sources = append(out.Sources, s)
	}
	return c.JSON(code, out)
}
