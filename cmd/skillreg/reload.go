package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"syscall"

	"github.com/skillreg/skillreg/config"
)

// overrides are the serve flags that take precedence over the
// configuration file. A reload applies them to the new file as the start
// did, so that what it compares with the running configuration is what
// would run: a --data or --listen flag is no change of the file.
type overrides struct {
	listen, dataDir string
}

func (o overrides) apply(cfg *config.Config) {
	if o.listen != "" {
		cfg.Listen = o.listen
	}
	if o.dataDir != "" {
		cfg.DataDir = o.dataDir
	}
}

// Reload applies a new configuration without dropping connections:
// sources added, removed or changed, clients, the oidc and access
// sections (the provider's verifier kept when oidc did not change),
// webhook secrets, skill-meta
// tools, the cache hint, the log level, cache.content_bytes, and http.allowed_hosts,
// http.allowed_origins and http.metrics_networks. What only a restart can
// change (listen address, data directory, log format, mcp.fast_path, GitHub API settings,
// the connection caps, trusted proxies and timeouts of the http section)
// is kept as it is, with a warning. A configuration that fails to load or to
// apply is refused and the running one stays. cfg is the effective
// configuration: the flags' overrides already applied (reloadFile does).
func (d *Daemon) Reload(cfg *config.Config) error {
	old := d.running().cfg
	for _, k := range []struct {
		key      string
		old, new any
	}{
		{"listen", old.Listen, cfg.Listen}, {"data_dir", dataDir(old), dataDir(cfg)},
		{"log.format", old.Log.Format, cfg.Log.Format}, {"github.api_url", old.GitHub.APIURL, cfg.GitHub.APIURL},
		{"github.token_env", old.GitHub.TokenEnv, cfg.GitHub.TokenEnv}, {"github.app", old.GitHub.App, cfg.GitHub.App},
		{"http.max_connections", old.HTTP.MaxConnections, cfg.HTTP.MaxConnections},
		{"http.max_connections_per_ip", old.HTTP.MaxConnectionsPerIP, cfg.HTTP.MaxConnectionsPerIP},
		{"http.trusted_proxies", old.HTTP.TrustedProxyNets, cfg.HTTP.TrustedProxyNets},
		{"http.header_timeout", old.HTTP.HeaderTimeout, cfg.HTTP.HeaderTimeout},
		{"http.body_grace", old.HTTP.BodyGrace, cfg.HTTP.BodyGrace},
		{"http.body_min_rate", old.HTTP.BodyMinRate, cfg.HTTP.BodyMinRate},
		{"http.idle_timeout", old.HTTP.IdleTimeout, cfg.HTTP.IdleTimeout},
		{"public_url", old.PublicURL, cfg.PublicURL}, {"marketplace", old.Marketplace, cfg.Marketplace},
		{"cache.artifact_bytes", old.Cache.ArtifactBytes, cfg.Cache.ArtifactBytes}, {"tls", old.TLS, cfg.TLS},
		{"mcp.fast_path", old.MCP.FastPath, cfg.MCP.FastPath}, // *bool: DeepEqual compares the values
	} {
		if !reflect.DeepEqual(k.old, k.new) {
			d.log.Warn("configuration change needs a restart; keeping the running value", "key", k.key)
		}
	}
	// Keep what needs a restart, so the config on record is what runs.
	cfg.Listen, cfg.DataDir, cfg.Log.Format, cfg.GitHub.APIURL, cfg.GitHub.TokenEnv, cfg.GitHub.App =
		old.Listen, old.DataDir, old.Log.Format, old.GitHub.APIURL, old.GitHub.TokenEnv, old.GitHub.App
	// Of the http section, only the Host, Origin and metrics-network
	// policies change at runtime.
	keep := cfg.HTTP
	cfg.HTTP = old.HTTP
	cfg.HTTP.AllowedHosts, cfg.HTTP.AllowedOrigins = keep.AllowedHosts, keep.AllowedOrigins
	cfg.HTTP.MetricsNetworks, cfg.HTTP.MetricsNets = keep.MetricsNetworks, keep.MetricsNets
	cfg.PublicURL, cfg.Marketplace, cfg.Cache.ArtifactBytes, cfg.TLS = old.PublicURL, old.Marketplace, old.Cache.ArtifactBytes, old.TLS
	cfg.MCP.FastPath = old.MCP.FastPath // the MCP server is made with it
	if o := cfg.OIDC; o != nil {
		// Tokens are issued for the running public_url's resource.
		if old.PublicURL == "" {
			return errors.New("oidc: requires public_url, which only a restart sets")
		}
		if o.AudienceDefaulted {
			o.Audience = cfg.MCPResource()
		}
	}
	// Build the whole runtime first: whatever fails, nothing has changed,
	// the certificate included.
	rt, err := d.build(cfg)
	if err != nil {
		return err
	}
	d.install(rt)
	d.Registry.Live().SetContentCacheBytes(cfg.Cache.ContentBytes)
	if d.certs != nil {
		// SIGHUP also reloads the certificate, which has its own refusal
		// (the file watch reloads it whatever the configuration does).
		d.certs.reload()
	}
	d.log.Info("configuration reloaded", "sources", len(rt.sources), "clients", len(cfg.Clients), "oidc", cfg.OIDC != nil, "access_rules", len(cfg.Access), "skill_meta", len(rt.meta))
	return nil
}

// reloadOnHUP reloads the configuration file on every SIGHUP until ctx
// ends. Without a configuration file (the embedded default) there is
// nothing to reload.
func (d *Daemon) reloadOnHUP(ctx context.Context, path string) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if path == "" {
				d.log.Warn("SIGHUP ignored: serving the embedded default, there is no configuration file to reload")
				continue
			}
			err := d.reloadFile(path)
			d.metrics.ConfigReload(err == nil)
			if err != nil {
				d.log.Error("configuration reload refused; the running configuration stays", "file", path, "err", err)
			}
		}
	}
}

func (d *Daemon) reloadFile(path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	d.overrides.apply(cfg)
	if err := d.Reload(cfg); err != nil {
		return fmt.Errorf("apply %s: %w", path, err)
	}
	return nil
}
