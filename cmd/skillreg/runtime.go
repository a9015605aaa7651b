package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/mcp"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/releases"
	"github.com/skillreg/skillreg/webhook"
)

// runtimeConfig is the whole of what a configuration sets at runtime: the
// sources, the clients, the public set, the front door's Host, Origin and
// metrics-network policy, the skill-meta tools and the webhook handler
// with its secrets. build makes one complete and checked, at start and on
// every reload; install swaps it in with one atomic pointer, and only then
// is the one it replaces retired. So a configuration that fails anywhere
// changes nothing, and a request never sees half of one and half of
// another.
type runtimeConfig struct {
	cfg     *config.Config
	sources []catalog.Source
	static  []catalog.Source // the configured sources, without the discovered ones (discovery.go)
	clients *access.Clients
	// gate is who a credential belongs to, for every surface; oidc is the
	// provider's verifier it (and the web sign-in) asks, nil without oidc.
	gate   *access.Gate
	oidc   *oidcRuntime
	public map[string]bool // the sources visible without a token (public: true)
	front  *frontPolicy
	// meta are the skill-meta tools (none without the MCP surface).
	meta []mcp.SkillMetaTool
	// webhook is POST /webhooks/github: nil without a secret (the endpoint
	// answers 404) or without the HTTP surface.
	webhook     *webhook.Handler
	hookSecrets []string
	// peers is the relay to the other replicas (peers.go); never nil
	// with the HTTP surface.
	peers *peerRuntime
}

// build makes the runtime of cfg for the surfaces this daemon has. It
// changes nothing the daemon serves (at most it makes the shared releases
// client, which is made on first use anyway), and on error nothing it made
// is left running.
func (d *Daemon) build(cfg *config.Config) (_ *runtimeConfig, err error) {
	rt := &runtimeConfig{cfg: cfg, front: newFrontPolicy(cfg)}
	if rt.sources, err = sources(cfg, d.core.app); err != nil {
		return nil, err
	}
	if rt.clients, err = clientsOf(cfg.Clients); err != nil {
		return nil, err
	}
	if rt.oidc, err = d.buildOIDC(cfg); err != nil {
		return nil, err
	}
	rt.gate = d.newGate(cfg, rt.clients, rt.oidc)
	rt.public = map[string]bool{}
	for _, s := range cfg.Sources {
		if s.Public {
			rt.public[s.Name] = true
		}
	}
	if d.has.mcp {
		if rt.meta, err = d.skillMeta(cfg); err != nil {
			return nil, err
		}
	}
	if d.has.http {
		// Last: the handler is the one part that holds anything.
		if rt.hookSecrets, err = webhookSecrets(cfg.GitHub); err != nil {
			return nil, err
		}
		if rt.peers, err = d.buildPeers(cfg); err != nil {
			return nil, err
		}
		if rt.webhook, err = d.newWebhook(rt.hookSecrets, rt.peers, cfg); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// install makes rt the running runtime and tells what keeps its own copy
// of a setting (the registry its sources, the MCP surface its tools and
// cache hint, the log level); nothing here can fail. Then the runtime it
// replaced is retired.
func (d *Daemon) install(rt *runtimeConfig) {
	d.discMu.Lock()
	defer d.discMu.Unlock()
	d.applyTemplates(rt)
	d.learnTokens(rt.sources)
	d.learnPassphrases(rt.sources)
	d.secrets.Add(rt.hookSecrets...)
	if rt.oidc != nil {
		d.secrets.Add(rt.oidc.secrets...)
	}
	d.startOIDC(rt) // before rt is shared: it sets rt.oidc.stop
	old := d.rt.Swap(rt)
	if d.MCP != nil {
		d.MCP.SetCacheTTL(rt.cfg.MCP.CacheTTL.D())
		d.MCP.SetSkillMeta(rt.meta)
	}
	if d.level != nil {
		_ = d.level.UnmarshalText([]byte(rt.cfg.Log.Level))
	}
	d.Registry.SetSources(rt.sources)
	if d.has.http {
		if rt.webhook == nil {
			d.log.Info("GitHub webhook endpoint not mounted: no secret; set " + rt.cfg.GitHub.WebhookSecretEnv + " or github.webhook_secret_file to enable POST " + webhook.Path)
		} else {
			d.log.Info("GitHub webhook endpoint mounted", "path", webhook.Path, "secrets", len(rt.hookSecrets), "peer_secrets", len(rt.peers.secrets))
		}
		d.installPeers(rt, old)
	}
	if len(rt.public) > 0 && !rt.gate.Required() {
		d.log.Warn("public: true has no effect without clients or oidc: every skill is already visible to everyone")
	}
	if old == nil {
		return
	}
	if d.web != nil {
		d.web.ResetSessions() // a session's filter is the old clients'
	}
	retireOIDC(old, rt)
	d.retire(old)
}

// retire lets go of a replaced runtime: its webhook handler finishes the
// release refreshes it started (each bounded) and asks for the syncs that
// follow them, in the background; deliveries it still handles ask the
// registry as before. The handler is kept until shutdown, which closes it
// with the running one (closeHooks): a delivery that was inside it at the
// swap may start a refresh after its drain, and that refresh must not
// outlive the releases client and the store.
func (d *Daemon) retire(rt *runtimeConfig) {
	if rt.webhook == nil {
		return
	}
	d.retiredMu.Lock()
	d.retired = append(d.retired, rt.webhook)
	d.retiredMu.Unlock()
	d.drains.Go(rt.webhook.Drain)
}

// closeHooks stops every webhook handler, the running one and each a
// reload replaced, and waits for their release refreshes and drains: from
// then on none asks the registry for anything or touches the releases
// client. Call it before the registry stops and the core closes.
func (d *Daemon) closeHooks() {
	d.stopHooks()
	d.retiredMu.Lock()
	hs := slices.Clone(d.retired)
	d.retiredMu.Unlock()
	if rt := d.running(); rt != nil && rt.webhook != nil {
		hs = append(hs, rt.webhook)
	}
	for _, h := range hs {
		h.Close() // waits for its cancelled release refreshes
	}
	d.closePeers() // no handler hands it a delivery any more
	d.drains.Wait()
}

// running is the installed runtime.
func (d *Daemon) running() *runtimeConfig { return d.rt.Load() }

// currentPublic is the running configuration's public sources.
func (d *Daemon) currentPublic() map[string]bool { return d.running().public }

// clientsOf checks and indexes the configured clients.
func clientsOf(cfg []config.Client) (*access.Clients, error) {
	list := make([]access.Client, 0, len(cfg))
	for i, c := range cfg {
		h, err := access.ParseHash(c.TokenSHA256)
		if err != nil {
			return nil, fmt.Errorf("clients[%d]: %w", i, err)
		}
		list = append(list, access.Client{Name: c.Name, Hash: h, Sources: c.Sources})
	}
	return access.New(list), nil
}

// skillMeta turns the skill_meta entries into MCP tools.
func (d *Daemon) skillMeta(cfg *config.Config) ([]mcp.SkillMetaTool, error) {
	var out []mcp.SkillMetaTool
	for i, m := range cfg.Meta {
		rel, err := d.releasesClient()
		if err != nil {
			return nil, err
		}
		meta := releases.SkillMeta{Skill: m.Skill, Tool: m.Tool, Repo: m.Repo, UpdateDocURL: m.UpdateDocURL, CacheTTL: m.CacheTTL.D()}
		if len(m.Recipes) > 0 {
			meta.Recipes = map[string]releases.Recipe{}
			for client, r := range m.Recipes {
				meta.Recipes[client] = releases.Recipe{Command: r.Command, Kind: r.Kind}
			}
		}
		if err := meta.Validate(); err != nil {
			return nil, fmt.Errorf("skill_meta[%d]: %w", i, err)
		}
		out = append(out, mcp.SkillMetaTool{Meta: meta, Releases: rel})
	}
	return out, nil
}

// webhookSecrets reads the webhook secrets from the environment variable
// named by github.webhook_secret_env, or from github.webhook_secret_file;
// either may hold several (one per line or comma-separated) for rotation.
func webhookSecrets(g config.GitHub) ([]string, error) {
	var raw string
	if g.WebhookSecretFile != "" {
		b, err := os.ReadFile(g.WebhookSecretFile)
		if err != nil {
			return nil, fmt.Errorf("github.webhook_secret_file: %w", err)
		}
		raw = string(b)
	}
	if g.WebhookSecretEnv != "" {
		if v := os.Getenv(g.WebhookSecretEnv); v != "" {
			raw += "\n" + v
		}
	}
	return webhook.ParseSecrets(raw), nil
}

// newWebhook makes the handler of POST /webhooks/github for secrets and
// the peer secrets; none (nil) without either, since unsigned deliveries
// are never accepted. A reload makes a new one, so rotated secrets take
// effect at once.
func (d *Daemon) newWebhook(secrets []string, pr *peerRuntime, cfg *config.Config) (*webhook.Handler, error) {
	if len(secrets) == 0 && len(pr.secrets) == 0 {
		return nil, nil
	}
	var rel webhook.Releases = d.hookReleases
	if rel == nil {
		rc, err := d.releasesClient()
		if err != nil {
			return nil, err
		}
		rel = rc
	}
	opts := webhook.Options{
		Secrets:      secrets,
		PeerSecrets:  pr.secrets,
		Instance:     d.instance,
		RelayMetrics: d.relayReceived,
		Sources:      webhookTargets{d.Registry},
		Syncer:       webhookSyncer{d.Registry},
		Releases:     rel,
		Discovery:    d.hookDiscovery(cfg),
		Log:          d.deliveries,
		Logger:       d.log,
		GitHubHost:   d.core.cfg.GitHub.WebHost(),
		Metrics:      d.metrics.WebhookDelivery,
		Budget:       d.budget,
		Context:      d.hookCtx,
	}
	opts.Installations = d.hookInstallations()
	if pr.relay != nil {
		opts.Relay = pr.relay
	}
	h, err := webhook.New(opts)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return h, nil
}

// webhookSyncer asks the registry for the syncs webhook deliveries name,
// as urgent: someone pushed and waits to see it.
type webhookSyncer struct{ reg *registry.Registry }

func (w webhookSyncer) RequestSync(source, _ string) {
	w.reg.RequestSync(source, catalog.TriggerWebhook)
}
