// Package metrics exposes what skillreg does as Prometheus metrics. It
// implements the small metrics interfaces the registry, the releases cache,
// the webhook handler and the MCP surface declare, and reads the catalog
// and the store at scrape time for gauges, so they are exact and never
// stale.
package metrics

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skillreg/skillreg/catalog"
)

// Options says where the scrape-time gauges come from; nil funcs are
// skipped.
type Options struct {
	Catalog   func() *catalog.Catalog
	Sessions  func() int
	StoreSize func() (int64, error)
	// States gives the sources' sync states, for the persist and stall
	// gauges.
	States func() []catalog.State
	// Connections reports the HTTP front door's connection counts.
	Connections func() Connections
	// BodyBytes reports the request body bytes held in memory and the
	// budget they share.
	BodyBytes func() (inUse, budget int64)
}

// Connections are the front door's counts: open connections (under the
// caps), those served from the probe pool, those over the caps whose
// first request line is awaited, and the totals accepted and refused.
type Connections struct {
	Open, Probes, Peeking int
	Accepted, Refused     uint64
}

// Metrics holds skillreg's collectors.
type Metrics struct {
	reg *prometheus.Registry

	syncs         *prometheus.CounterVec
	syncDuration  *prometheus.HistogramVec
	deliveries    *prometheus.CounterVec
	mcpRequests   *prometheus.CounterVec
	mcpDuration   *prometheus.HistogramVec
	cacheLookups  *prometheus.CounterVec
	upstream      *prometheus.CounterVec
	authFailures  prometheus.Counter
	configReloads *prometheus.CounterVec
	persistFails  *prometheus.CounterVec
	relaysSent    *prometheus.CounterVec
	relaysRecv    *prometheus.CounterVec
	peersKnown    atomic.Pointer[func() int]
}

// New registers every collector.
func New(o Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.syncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skillreg_syncs_total", Help: "Syncs by source and result (updated, unchanged, failed, stalled).",
	}, []string{"source", "result"})
	m.syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "skillreg_sync_duration_seconds", Help: "Duration of syncs by source.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"source"})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skillreg_webhook_deliveries_total", Help: "GitHub webhook deliveries by event and outcome.",
	}, []string{"event", "outcome"})
	m.mcpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skillreg_mcp_requests_total", Help: "MCP requests by method and outcome (ok, error).",
	}, []string{"method", "outcome"})
	m.mcpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "skillreg_mcp_request_duration_seconds", Help: "Time to answer MCP requests, by method.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 3},
	}, []string{"method"})
	m.cacheLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skillreg_release_cache_lookups_total", Help: "Release cache lookups by result (fresh, stale, miss).",
	}, []string{"result"})
	m.upstream = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skillreg_release_upstream_requests_total", Help: "Requests to the GitHub Releases API by result.",
	}, []string{"result"})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "skillreg_auth_failures_total", Help: "Requests refused for a wrong or invalid token (a request without one is not counted).",
	})
	m.configReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skillreg_config_reloads_total", Help: "Configuration reloads (SIGHUP) by result (applied, refused).",
	}, []string{"result"})
	m.persistFails = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skillreg_persist_failures_total", Help: "Failed attempts to store a source's served catalog (a full disk, say), by source; each is retried.",
	}, []string{"source"})
	m.relaysSent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skillreg_relays_sent_total", Help: "Webhook deliveries relayed to a peer, by result (ok, refused, failed, self; dropped: a delivery relayed to no peer, over the relay's byte budget).",
	}, []string{"result"})
	m.relaysRecv = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "skillreg_relays_received_total", Help: "Webhook deliveries relayed by a peer, by outcome (the delivery's, or self, duplicate, unauthorized, ...).",
	}, []string{"outcome"})
	m.reg.MustRegister(m.relaysSent, m.relaysRecv, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "skillreg_peers_known", Help: "Peer addresses deliveries are relayed to (this replica's own not counted once found).",
	}, func() float64 {
		if f := m.peersKnown.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	}))
	m.reg.MustRegister(m.persistFails, m.syncs, m.syncDuration, m.deliveries, m.mcpRequests, m.mcpDuration,
		m.cacheLookups, m.upstream, m.authFailures, m.configReloads,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&catalogCollector{o: o})
	if o.Sessions != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "skillreg_mcp_sessions", Help: "Open MCP sessions (protocol 2025-11-25; 2026-07-28 requests are stateless).",
		}, func() float64 { return float64(o.Sessions()) }))
	}
	if o.Connections != nil {
		gauge := func(name, help string, v func(Connections) float64) {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
				func() float64 { return v(o.Connections()) }))
		}
		gauge("skillreg_http_connections", "Open HTTP connections counted by the caps.", func(c Connections) float64 { return float64(c.Open) })
		gauge("skillreg_http_probe_connections", "Connections served from the reserved probe pool (/healthz, /readyz).", func(c Connections) float64 { return float64(c.Probes) })
		gauge("skillreg_http_connections_awaiting", "Connections over the caps whose first request line is awaited.", func(c Connections) float64 { return float64(c.Peeking) })
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "skillreg_http_connections_accepted_total", Help: "Connections handed to the HTTP server.",
		}, func() float64 { return float64(o.Connections().Accepted) }))
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "skillreg_http_connections_refused_total", Help: "Connections closed at once, over http.max_connections or http.max_connections_per_ip.",
		}, func() float64 { return float64(o.Connections().Refused) }))
	}
	if o.BodyBytes != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "skillreg_http_body_bytes", Help: "Request body bytes held in memory across all requests.",
		}, func() float64 { n, _ := o.BodyBytes(); return float64(n) }))
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "skillreg_http_body_budget_bytes", Help: "The budget request bodies in memory share.",
		}, func() float64 { _, n := o.BodyBytes(); return float64(n) }))
	}
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// SyncFinished counts a sync (registry.Metrics); result is one of the
// catalog.Result values (updated, unchanged, failed, stalled).
func (m *Metrics) SyncFinished(source, result string, d time.Duration, _ *catalog.Snapshot) {
	m.syncs.WithLabelValues(source, result).Inc()
	m.syncDuration.WithLabelValues(source).Observe(d.Seconds())
}

// PersistFailed counts a failed persist (registry.PersistMetrics).
func (m *Metrics) PersistFailed(source string) { m.persistFails.WithLabelValues(source).Inc() }

// CacheLookup counts a release cache lookup (releases.Metrics).
func (m *Metrics) CacheLookup(result string) { m.cacheLookups.WithLabelValues(result).Inc() }

// UpstreamRequest counts a GitHub API request (releases.Metrics).
func (m *Metrics) UpstreamRequest(result string) { m.upstream.WithLabelValues(result).Inc() }

// WebhookDelivery counts a webhook delivery.
func (m *Metrics) WebhookDelivery(event, outcome string) {
	m.deliveries.WithLabelValues(event, outcome).Inc()
}

// RelaySent counts one relay to a peer by result (peers.Options.Metrics).
func (m *Metrics) RelaySent(result string) { m.relaysSent.WithLabelValues(result).Inc() }

// RelayReceived counts one relay from a peer by outcome
// (webhook.Options.RelayMetrics).
func (m *Metrics) RelayReceived(outcome string) { m.relaysRecv.WithLabelValues(outcome).Inc() }

// SetPeersKnown sets where skillreg_peers_known is read from (the running
// relay; nil: 0). The relay is made and replaced after the metrics.
func (m *Metrics) SetPeersKnown(known func() int) {
	if known == nil {
		m.peersKnown.Store(nil)
		return
	}
	m.peersKnown.Store(&known)
}

// MCPRequest counts and times one MCP request.
func (m *Metrics) MCPRequest(method, outcome string, d time.Duration) {
	m.mcpRequests.WithLabelValues(method, outcome).Inc()
	m.mcpDuration.WithLabelValues(method).Observe(d.Seconds())
}

// AuthFailure counts a refused token.
func (m *Metrics) AuthFailure() { m.authFailures.Inc() }

// ConfigReload counts a reload.
func (m *Metrics) ConfigReload(applied bool) {
	r := "refused"
	if applied {
		r = "applied"
	}
	m.configReloads.WithLabelValues(r).Inc()
}

// catalogCollector reads the current catalog (and the store's size) at
// scrape time.
type catalogCollector struct{ o Options }

var (
	skillsDesc   = prometheus.NewDesc("skillreg_skills", "Skills of the current catalog by source and state (served, excluded).", []string{"source", "state"}, nil)
	filesDesc    = prometheus.NewDesc("skillreg_indexed_files", "Files of the served skills by source.", []string{"source"}, nil)
	bytesDesc    = prometheus.NewDesc("skillreg_indexed_bytes", "Bytes of the served skills by source.", []string{"source"}, nil)
	genDesc      = prometheus.NewDesc("skillreg_catalog_generation", "Generation number of the current catalog.", nil, nil)
	storeDesc    = prometheus.NewDesc("skillreg_store_size_bytes", "Size of the store file on disk.", nil, nil)
	snapshotDesc = prometheus.NewDesc("skillreg_snapshot_age_seconds", "Age of each source's served snapshot.", []string{"source"}, nil)
	unsavedDesc  = prometheus.NewDesc("skillreg_catalog_unsaved", "1 while a source's served catalog is not in the store (its persist failed and is being retried, or a directory source's first catalog is being stored).", []string{"source"}, nil)
	staleDesc    = prometheus.NewDesc("skillreg_catalog_stale", "1 while a source serves a stored catalog older than the one served before the restart, until its resync.", []string{"source"}, nil)
	watchedDesc  = prometheus.NewDesc("skillreg_source_watched_directories", "Directories watched for changes, by directory source.", []string{"source"}, nil)
	exhaustDesc  = prometheus.NewDesc("skillreg_source_watch_exhausted", "1 while a directory source could not watch every directory for lack of inotify watches or instances (fs.inotify.max_user_watches, or a user namespace's lower user.max_inotify_watches; /readyz names the one that applied); its changes beneath the rest are found by its periodic rescan.", []string{"source"}, nil)
	blindDesc    = prometheus.NewDesc("skillreg_source_watch_blind", "1 while a directory source has unwatched directories and no poll (poll: 0): changes beneath them are never noticed. An error.", []string{"source"}, nil)
	overflowDesc = prometheus.NewDesc("skillreg_source_watch_overflows_total", "Overflows of the kernel's event queue of a directory source's watch (each answered by a whole rescan).", []string{"source"}, nil)
	rescansDesc  = prometheus.NewDesc("skillreg_source_rescans_total", "Syncs of a directory source by scope: changed (only what a watch saw change) or whole (the tree).", []string{"source", "scope"}, nil)
	stalledDesc  = prometheus.NewDesc("skillreg_source_stalled", "1 while a source's syncs are stalled (a failure retrying cannot mend: invalid_pin, invalid_repository, ref_not_found, repository_not_found, auth_refused, path_missing, unverified), by reason.", []string{"source", "reason"}, nil)
	unverifDesc  = prometheus.NewDesc("skillreg_source_unverified", "1 while the commit or tag a verified source (verify: ...) resolves to does not carry a valid signature by its keys: it is not served (the last verified snapshot is, if any). 0 for a verified source that is not, absent for the others.", []string{"source"}, nil)
)

func (c *catalogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{skillsDesc, filesDesc, bytesDesc, genDesc, storeDesc, snapshotDesc, unsavedDesc, staleDesc, stalledDesc, unverifDesc,
		watchedDesc, exhaustDesc, blindDesc, overflowDesc, rescansDesc} {
		ch <- d
	}
}

func (c *catalogCollector) Collect(ch chan<- prometheus.Metric) {
	if c.o.Catalog != nil {
		cat := c.o.Catalog()
		ch <- prometheus.MustNewConstMetric(genDesc, prometheus.GaugeValue, float64(cat.Gen))
		for _, s := range cat.Sources(catalog.Filter{}) {
			ch <- prometheus.MustNewConstMetric(skillsDesc, prometheus.GaugeValue, float64(len(s.Skills)), s.Source, "served")
			ch <- prometheus.MustNewConstMetric(skillsDesc, prometheus.GaugeValue, float64(len(s.Excluded)), s.Source, "excluded")
			ch <- prometheus.MustNewConstMetric(filesDesc, prometheus.GaugeValue, float64(s.Stats.Files), s.Source)
			ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(s.Stats.Bytes), s.Source)
			ch <- prometheus.MustNewConstMetric(snapshotDesc, prometheus.GaugeValue, time.Since(s.IndexedAt).Seconds(), s.Source)
		}
	}
	if c.o.States != nil {
		for _, st := range c.o.States() {
			ch <- prometheus.MustNewConstMetric(unsavedDesc, prometheus.GaugeValue, b2f((st.PersistError != "" || st.Saving) && !st.Stale), st.Source)
			ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.GaugeValue, b2f(st.Stale), st.Source)
			if st.Stalled != "" {
				ch <- prometheus.MustNewConstMetric(stalledDesc, prometheus.GaugeValue, 1, st.Source, string(st.Stalled))
			}
			if st.Verify != "" {
				ch <- prometheus.MustNewConstMetric(unverifDesc, prometheus.GaugeValue, b2f(st.Stalled == catalog.StallUnverified), st.Source)
			}
			if st.Kind == catalog.KindDir {
				w := st.Watch
				ch <- prometheus.MustNewConstMetric(watchedDesc, prometheus.GaugeValue, float64(w.Dirs), st.Source)
				ch <- prometheus.MustNewConstMetric(exhaustDesc, prometheus.GaugeValue, b2f(w.Exhausted), st.Source)
				ch <- prometheus.MustNewConstMetric(blindDesc, prometheus.GaugeValue, b2f(w.Blind), st.Source)
				ch <- prometheus.MustNewConstMetric(overflowDesc, prometheus.CounterValue, float64(w.Overflows), st.Source)
				ch <- prometheus.MustNewConstMetric(rescansDesc, prometheus.CounterValue, float64(w.Rescans), st.Source, "changed")
				ch <- prometheus.MustNewConstMetric(rescansDesc, prometheus.CounterValue, float64(w.FullRescans), st.Source, "whole")
			}
		}
	}
	if c.o.StoreSize != nil {
		if n, err := c.o.StoreSize(); err == nil {
			ch <- prometheus.MustNewConstMetric(storeDesc, prometheus.GaugeValue, float64(n))
		}
	}
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
