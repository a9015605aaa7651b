package main

import (
	"fmt"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/store"
	"github.com/skillreg/skillreg/web"
	"github.com/skillreg/skillreg/webhook"
)

// webhookSecrets reads the webhook secrets from the environment variable
// named by github.webhook_secret_env, or from github.webhook_secret_file;
// either may hold several (one per line or comma-separated) for rotation.
func (d *Daemon) webhookSecrets() ([]string, error) {
	g := d.cfg.GitHub
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

// webhookSyncer asks the registry for the syncs webhook deliveries name,
// as urgent: someone pushed and waits to see it.
type webhookSyncer struct{ reg *registry.Registry }

func (w webhookSyncer) RequestSync(source, _ string) {
	w.reg.RequestSync(source, catalog.TriggerWebhook)
}

// webhookTargets shows the registry's git sources to the webhook handler,
// asked afresh on every delivery so reloads take effect.
type webhookTargets struct{ reg *registry.Registry }

func (w webhookTargets) Targets() []webhook.Target {
	var out []webhook.Target
	for _, s := range w.reg.Sources() {
		if s.Git != nil {
			out = append(out, webhook.Target{Source: s.Name, Repo: s.Git.Repo, Pin: s.Git.Pin})
		}
	}
	return out
}

// setupWebhook prepares POST /webhooks/github when a secret is configured;
// without one the endpoint answers 404 (unsigned deliveries are never
// accepted) and the log says how to enable it. On reload it replaces the
// handler, so rotated secrets take effect at once.
func (d *Daemon) setupWebhook() error {
	secrets, err := d.webhookSecrets()
	if err != nil {
		return err
	}
	d.secrets.Add(secrets...)
	if len(secrets) == 0 {
		d.log.Info("GitHub webhook endpoint not mounted: no secret; set " + d.cfg.GitHub.WebhookSecretEnv + " or github.webhook_secret_file to enable POST " + webhook.Path)
		d.swapWebhook(nil)
		return nil
	}
	rel, err := d.releasesClient()
	if err != nil {
		return err
	}
	h, err := webhook.New(webhook.Options{
		Secrets:    secrets,
		Sources:    webhookTargets{d.Registry},
		Syncer:     webhookSyncer{d.Registry},
		Releases:   rel,
		Log:        d.deliveries,
		Logger:     d.log,
		GitHubHost: d.cfg.GitHub.WebHost(),
		Metrics:    d.metrics.WebhookDelivery,
		Budget:     d.budget,
	})
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	d.swapWebhook(h)
	d.log.Info("GitHub webhook endpoint mounted", "path", webhook.Path, "secrets", len(secrets))
	return nil
}

func (d *Daemon) swapWebhook(h *webhook.Handler) {
	if old := d.webhook.Swap(h); old != nil {
		old.Close() // its pending sync requests go to the registry
	}
}

// serveWebhook forwards to the current webhook handler, or answers 404
// when no secret is configured.
func (d *Daemon) serveWebhook(c echo.Context) error {
	h := d.webhook.Load()
	if h == nil {
		return echo.ErrNotFound
	}
	return h.Handle(c)
}

// recentDeliveries shows the delivery log to the web catalog.
func (d *Daemon) recentDeliveries(n int) []web.Delivery {
	if d.webhook.Load() == nil {
		return nil
	}
	ds, err := d.deliveries.Recent(n)
	if err != nil {
		d.log.Error("recent webhook deliveries", "err", err)
		return nil
	}
	out := make([]web.Delivery, len(ds))
	for i, x := range ds {
		out[i] = web.Delivery(x)
	}
	return out
}

// storeDeliveries is the store's delivery log seen as webhook's.
type storeDeliveries struct{ s *store.Store }

func (l storeDeliveries) Seen(id string) (bool, error) { return l.s.SeenDelivery(id) }

func (l storeDeliveries) Record(d webhook.Delivery) error {
	return l.s.RecordDelivery(store.Delivery(d))
}

func (l storeDeliveries) Recent(n int) ([]webhook.Delivery, error) {
	ds, err := l.s.RecentDeliveries(n)
	out := make([]webhook.Delivery, len(ds))
	for i, d := range ds {
		out[i] = webhook.Delivery(d)
	}
	return out, err
}
