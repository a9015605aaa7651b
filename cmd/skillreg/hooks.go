package main

import (
	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/store"
	"github.com/skillreg/skillreg/web"
	"github.com/skillreg/skillreg/webhook"
)

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

// serveWebhook forwards to the current webhook handler, or answers 404
// when no secret is configured.
func (d *Daemon) serveWebhook(c echo.Context) error {
	h := d.running().webhook
	if h == nil {
		return echo.ErrNotFound
	}
	return h.Handle(c)
}

// recentDeliveries shows the delivery log to the web catalog.
func (d *Daemon) recentDeliveries(n int) []web.Delivery {
	if d.running().webhook == nil {
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
