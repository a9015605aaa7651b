package webhook_test

import (
	"reflect"
	"testing"

	"github.com/skillreg/skillreg/webhook"
)

// withInstallations records what Options.Installations is told, in the
// rig's journal (so its order against Discovery shows).
func withInstallations(got *[]webhook.InstallationEvent) rigOption {
	return func(o *webhook.Options, r *rig) {
		o.Installations = func(ev webhook.InstallationEvent) {
			*got = append(*got, ev)
			r.j.add("app " + ev.Action + " " + ev.Account)
		}
	}
}

// TestInstallationsHook: the installation actions that make the GitHub
// App's cache stale (new_permissions_accepted among them, which Discovery
// never sees) reach Options.Installations, without Repos, with or without
// Discovery and before it; installation_repositories and repository events
// do not. Without Discovery such a delivery is answered 202 accepted, and
// a repository event stays 204 ignored.
func TestInstallationsHook(t *testing.T) {
	tests := []struct {
		file, event string
		app         *webhook.InstallationEvent
		discovery   bool // Discovery gets it too
	}{
		{"installation-created.json", "installation", &webhook.InstallationEvent{Action: "created", InstallationID: 957387, Account: "Codertocat"}, true},
		{"installation-deleted.json", "installation", &webhook.InstallationEvent{Action: "deleted", InstallationID: 2, Account: "octocat"}, true},
		{"installation-suspend.json", "installation", &webhook.InstallationEvent{Action: "suspend", InstallationID: 16598467, Account: "Codertocat"}, true},
		{"installation-unsuspend.json", "installation", &webhook.InstallationEvent{Action: "unsuspend", InstallationID: 16598467, Account: "Codertocat"}, true},
		{"installation-new_permissions_accepted.json", "installation", &webhook.InstallationEvent{Action: "new_permissions_accepted", InstallationID: 957387, Account: "Codertocat"}, false},
		{"installation_repositories-added.json", "installation_repositories", nil, true},
		{"repository-created.json", "repository", nil, true},
	}
	for _, tt := range tests {
		for _, withDisc := range []bool{false, true} {
			name := tt.file
			if withDisc {
				name += "/discovery"
			}
			t.Run(name, func(t *testing.T) {
				var got []webhook.InstallationEvent
				opts := []rigOption{withInstallations(&got)}
				d := &recDiscovery{}
				if withDisc {
					opts = append(opts, withDiscovery(d))
				}
				r := newRig(t, opts...)
				status, out := r.send(t, delivery{event: tt.event, id: "i-1", body: load(t, tt.file)})
				var want []webhook.InstallationEvent
				if tt.app != nil {
					want = []webhook.InstallationEvent{*tt.app}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Installations told %+v, want %+v", got, want)
				}
				wantStatus, wantOutcome := 204, webhook.OutcomeIgnored
				switch {
				case withDisc && tt.discovery:
					wantStatus, wantOutcome = 202, webhook.OutcomeDiscovery
				case tt.app != nil:
					wantStatus, wantOutcome = 202, webhook.OutcomeAccepted
				}
				if status != wantStatus {
					t.Fatalf("status %d, want %d: %s", status, wantStatus, out)
				}
				if n := r.metric(tt.event, wantOutcome); n != 1 {
					t.Errorf("metric %s/%s = %d, want 1", tt.event, wantOutcome, n)
				}
				if withDisc && tt.discovery && tt.app != nil {
					if j := r.j.all(); len(j) != 2 || j[0] != "app "+tt.app.Action+" "+tt.app.Account {
						t.Errorf("journal %q: the App is not told first", j)
					}
				}
				if _, insts := d.recorded(); withDisc && !tt.discovery && len(insts) != 0 {
					t.Errorf("Discovery got %+v", insts)
				}
			})
		}
	}
}
