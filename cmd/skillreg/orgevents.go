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

// hookInstallations is the webhook's Options.Installations: with a GitHub
// App, an installation created, deleted, suspended or unsuspended, or new
// permissions accepted, makes the App forget what it holds for the account
// (its installation id, the "not installed" answer it keeps for 10 minutes,
// and the installation's token), so the next sync or listing for that
// owner asks GitHub again. nil without an App. Whether any github: source
// is configured does not matter: every git source and release lookup on
// the owner uses the App's token.
func (d *Daemon) hookInstallations() func(webhook.InstallationEvent) {
	if d.app == nil {
		return nil
	}
	app, log := d.app, d.log
	return func(ev webhook.InstallationEvent) {
		app.Forget(ev.Account)
		log.Info("GitHub App installation changed; its installation and token for the account will be asked for again",
			"account", ev.Account, "action", ev.Action, "installation_id", ev.InstallationID)
	}
}
