package main

import (
	"slices"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/discovery"
	"github.com/skillreg/skillreg/webhook"
)

// webhookDiscovery passes the webhook's organisation events (the App's
// repository, installation and installation_repositories deliveries, and
// pushes to repositories no source follows) on to the discovery Manager,
// which applies them in the background. webhook declares its own plain
// event types so that it imports no discovery; they are discovery's field
// for field, so each converts as it is (a field added on one side only
// stops this file compiling, which is the point).
type webhookDiscovery struct{ m *discovery.Manager }

func (w webhookDiscovery) Repository(ev webhook.RepoEvent) {
	w.m.Repository(discovery.RepoEvent(ev))
}

func (w webhookDiscovery) Installation(ev webhook.InstallationEvent) {
	repos := make([]discovery.RepoEvent, len(ev.Repos))
	for i, r := range ev.Repos {
		repos[i] = discovery.RepoEvent(r)
	}
	w.m.Installation(discovery.InstallationEvent{
		Action:         ev.Action,
		InstallationID: ev.InstallationID,
		Account:        ev.Account,
		Repos:          repos,
	})
}

// hookDiscovery is the webhook's Discovery for cfg: nil (a nil interface,
// so the handler answers the organisation events 204 ignored, as before)
// without a discovery Manager or without any github: source.
func (d *Daemon) hookDiscovery(cfg *config.Config) webhook.Discovery {
	if d.disc == nil || !slices.ContainsFunc(cfg.Sources, func(s config.Source) bool { return s.GitHub != nil }) {
		return nil
	}
	return webhookDiscovery{d.disc}
}
