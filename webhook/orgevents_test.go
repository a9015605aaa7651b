package webhook_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/webhook"
)

// recDiscovery records what the handler passes on, in order. It returns at
// once, as the contract asks.
type recDiscovery struct {
	j     *journal
	mu    sync.Mutex
	repos []webhook.RepoEvent
	insts []webhook.InstallationEvent
}

func (d *recDiscovery) Repository(ev webhook.RepoEvent) {
	d.mu.Lock()
	d.repos = append(d.repos, ev)
	d.mu.Unlock()
	d.j.add("repository " + ev.Action + " " + ev.FullName)
}

func (d *recDiscovery) Installation(ev webhook.InstallationEvent) {
	d.mu.Lock()
	d.insts = append(d.insts, ev)
	d.mu.Unlock()
	d.j.add("installation " + ev.Action + " " + ev.Account)
}

func (d *recDiscovery) recorded() ([]webhook.RepoEvent, []webhook.InstallationEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.repos), slices.Clone(d.insts)
}

func withDiscovery(d *recDiscovery) rigOption {
	return func(o *webhook.Options, r *rig) {
		d.j = r.j
		o.Discovery = d
	}
}

// The repositories of the example payloads, as the handler must pass them
// on: every field read from the payload.
var (
	octocodersHello = webhook.RepoEvent{ID: 186853261, FullName: "Octocoders/Hello-World", Fork: true,
		DefaultBranch: "master", CloneURL: "https://github.com/Octocoders/Hello-World.git",
		HTMLURL: "https://github.com/Octocoders/Hello-World", Topics: []string{}}
	codertocatHello = webhook.RepoEvent{ID: 186853002, FullName: "Codertocat/Hello-World",
		DefaultBranch: "master", CloneURL: "https://github.com/Codertocat/Hello-World.git",
		HTMLURL: "https://github.com/Codertocat/Hello-World"}
)

func repoEv(base webhook.RepoEvent, change func(*webhook.RepoEvent)) webhook.RepoEvent {
	base.Topics = slices.Clone(base.Topics)
	change(&base)
	return base
}

// TestOrgEvents sends every organisation example payload, as JSON and as a
// form, and checks the answer, what Discovery was told (every field), the
// delivery log and the metric; and that without a Discovery each is
// ignored as before.
func TestOrgEvents(t *testing.T) {
	tests := []struct {
		file, event, action string
		repo                *webhook.RepoEvent
		inst                *webhook.InstallationEvent
	}{
		{"repository-created.json", "repository", "created",
			ptrTo(repoEv(octocodersHello, func(e *webhook.RepoEvent) { e.Action = "created" })), nil},
		{"repository-renamed.json", "repository", "renamed",
			ptrTo(repoEv(octocodersHello, func(e *webhook.RepoEvent) {
				e.Action, e.OldFullName = "renamed", "Octocoders/Hello-World"
			})), nil},
		{"repository-transferred.json", "repository", "transferred",
			ptrTo(repoEv(octocodersHello, func(e *webhook.RepoEvent) {
				e.Action, e.OldFullName = "transferred", "octocat/Hello-World"
			})), nil},
		{"repository-deleted.json", "repository", "deleted",
			ptrTo(repoEv(octocodersHello, func(e *webhook.RepoEvent) { e.Action = "deleted" })), nil},
		{"repository-archived.json", "repository", "archived",
			ptrTo(repoEv(octocodersHello, func(e *webhook.RepoEvent) { e.Action, e.Archived = "archived", true })), nil},
		{"repository-publicized.json", "repository", "publicized",
			ptrTo(repoEv(codertocatHello, func(e *webhook.RepoEvent) { e.Action = "publicized" })), nil},
		{"repository-privatized.json", "repository", "privatized",
			ptrTo(repoEv(codertocatHello, func(e *webhook.RepoEvent) {
				e.Action, e.Private, e.Topics = "privatized", true, []string{}
			})), nil},
		{"installation-created.json", "installation", "created", nil, &webhook.InstallationEvent{
			Action: "created", InstallationID: 957387, Account: "Codertocat",
			Repos: []webhook.RepoEvent{{Action: "added", ID: 186853002, FullName: "Codertocat/Hello-World"}}}},
		{"installation-deleted.json", "installation", "deleted", nil, &webhook.InstallationEvent{
			Action: "deleted", InstallationID: 2, Account: "octocat",
			Repos: []webhook.RepoEvent{{Action: "removed", ID: 1296269, FullName: "octocat/Hello-World"}}}},
		{"installation-suspend.json", "installation", "suspend", nil, &webhook.InstallationEvent{
			Action: "suspend", InstallationID: 16598467, Account: "Codertocat"}},
		{"installation-unsuspend.json", "installation", "unsuspend", nil, &webhook.InstallationEvent{
			Action: "unsuspend", InstallationID: 16598467, Account: "Codertocat"}},
		{"installation_repositories-added.json", "installation_repositories", "added", nil, &webhook.InstallationEvent{
			Action: "added", InstallationID: 957387, Account: "Codertocat",
			Repos: []webhook.RepoEvent{{Action: "added", ID: 186853007, FullName: "Codertocat/Space"}}}},
		{"installation_repositories-removed.json", "installation_repositories", "removed", nil, &webhook.InstallationEvent{
			Action: "removed", InstallationID: 2, Account: "octocat",
			Repos: []webhook.RepoEvent{{Action: "removed", ID: 1296269, FullName: "octocat/Hello-World"}}}},
		{"installation-new_permissions_accepted.json", "installation", "new_permissions_accepted", nil, nil},
	}
	for _, tt := range tests {
		for _, form := range []bool{false, true} {
			name := tt.file
			if form {
				name += "/form"
			}
			t.Run(name, func(t *testing.T) {
				d := &recDiscovery{}
				r := newRig(t, withDiscovery(d))
				body, ct := load(t, tt.file), "application/json"
				if form {
					body, ct = asForm(body), "application/x-www-form-urlencoded"
				}
				status, out := r.send(t, delivery{event: tt.event, id: "o-" + name, contentType: ct, body: body})
				wantStatus, wantOutcome := 202, webhook.OutcomeDiscovery
				if tt.repo == nil && tt.inst == nil {
					wantStatus, wantOutcome = 204, webhook.OutcomeIgnored
				}
				if status != wantStatus {
					t.Fatalf("status %d, want %d: %s", status, wantStatus, out)
				}
				if status == 202 {
					var rep webhook.Reply
					if err := json.Unmarshal(out, &rep); err != nil {
						t.Fatal(err)
					}
					want := webhook.Reply{Delivery: "o-" + name, Event: tt.event, Outcome: wantOutcome, Sources: []string{}}
					if !equalReply(rep, want) {
						t.Errorf("reply %+v, want %+v", rep, want)
					}
				}
				repos, insts := d.recorded()
				var wantRepos []webhook.RepoEvent
				var wantInsts []webhook.InstallationEvent
				if tt.repo != nil {
					wantRepos = []webhook.RepoEvent{*tt.repo}
				}
				if tt.inst != nil {
					wantInsts = []webhook.InstallationEvent{*tt.inst}
				}
				if !reflect.DeepEqual(repos, wantRepos) {
					t.Errorf("repository events\n got %+v\nwant %+v", repos, wantRepos)
				}
				if !reflect.DeepEqual(insts, wantInsts) {
					t.Errorf("installation events\n got %+v\nwant %+v", insts, wantInsts)
				}
				if got := r.syncer.total(); got != 0 {
					t.Errorf("%d syncs asked for", got)
				}
				recent, err := r.log.Recent(10)
				if err != nil {
					t.Fatal(err)
				}
				wantRepo := ""
				if tt.repo != nil {
					wantRepo = tt.repo.FullName
				}
				if len(recent) != 1 || recent[0].Event != tt.event || recent[0].Action != tt.action ||
					recent[0].Outcome != wantOutcome || recent[0].Repo != wantRepo {
					t.Errorf("logged %+v", recent)
				}
				if n := r.metric(tt.event, wantOutcome); n != 1 {
					t.Errorf("metric %s/%s = %d, want 1", tt.event, wantOutcome, n)
				}
			})
		}
		t.Run(tt.file+"/no discovery", func(t *testing.T) {
			r := newRig(t)
			status, out := r.send(t, delivery{event: tt.event, id: "n-1", body: load(t, tt.file)})
			if status != 204 {
				t.Fatalf("status %d, want 204: %s", status, out)
			}
			if n := r.metric(tt.event, webhook.OutcomeIgnored); n != 1 {
				t.Errorf("metric %s/ignored = %d, want 1", tt.event, n)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestOrgEventVariants covers what the examples lack: a rename that changes
// the name, a transfer from an organisation, pushes to repositories no
// source follows, and payloads Discovery must never see.
func TestOrgEventVariants(t *testing.T) {
	repoOf := func(m map[string]any) map[string]any { return m["repository"].(map[string]any) }
	tests := []struct {
		name, file, event string
		change            func(map[string]any)
		sources           webhook.Sources
		status            int
		journal           []string
		check             func(t *testing.T, repos []webhook.RepoEvent)
	}{
		{"rename to a new name", "repository-renamed.json", "repository", func(m map[string]any) {
			m["changes"].(map[string]any)["repository"].(map[string]any)["name"].(map[string]any)["from"] = "Old-Name"
		}, codertocat, 202, []string{"repository renamed Octocoders/Hello-World"},
			func(t *testing.T, repos []webhook.RepoEvent) {
				if repos[0].OldFullName != "Octocoders/Old-Name" {
					t.Errorf("old full name %q, want Octocoders/Old-Name", repos[0].OldFullName)
				}
			}},
		{"transfer from an organisation", "repository-transferred.json", "repository", func(m map[string]any) {
			from := m["changes"].(map[string]any)["owner"].(map[string]any)["from"].(map[string]any)
			from["organization"] = from["user"]
			delete(from, "user")
			from["organization"].(map[string]any)["login"] = "old-org"
		}, codertocat, 202, []string{"repository transferred Octocoders/Hello-World"},
			func(t *testing.T, repos []webhook.RepoEvent) {
				if repos[0].OldFullName != "old-org/Hello-World" {
					t.Errorf("old full name %q, want old-org/Hello-World", repos[0].OldFullName)
				}
			}},
		{"unarchived", "repository-archived.json", "repository", func(m map[string]any) {
			m["action"] = "unarchived"
			repoOf(m)["archived"] = false
		}, codertocat, 202, []string{"repository unarchived Octocoders/Hello-World"}, nil},
		{"edited is ignored", "repository-renamed.json", "repository", func(m map[string]any) {
			m["action"] = "edited"
		}, codertocat, 204, nil, nil},
		{"default branch changed syncs the sources following it", "repository-renamed.json", "repository", func(m map[string]any) {
			m["action"] = "edited"
			m["changes"] = map[string]any{"default_branch": map[string]any{"from": "dev"}}
			repoOf(m)["full_name"], repoOf(m)["clone_url"] = "Codertocat/Hello-World", "https://github.com/Codertocat/Hello-World.git"
		}, codertocat, 202, []string{"sync default"}, nil},
		{"default branch changed in a repository no source follows", "repository-renamed.json", "repository", func(m map[string]any) {
			m["action"] = "edited"
			m["changes"] = map[string]any{"default_branch": map[string]any{"from": "dev"}}
		}, codertocat, 204, nil, nil},
		{"push to a repository no source follows", "push.json", "push", nil,
			staticSources{codertocat[8]}, 202, []string{"repository pushed Codertocat/Hello-World"},
			func(t *testing.T, repos []webhook.RepoEvent) {
				want := webhook.RepoEvent{Action: "pushed", ID: 186853002, FullName: "Codertocat/Hello-World",
					DefaultBranch: "master", CloneURL: "https://github.com/Codertocat/Hello-World.git",
					HTMLURL: "https://github.com/Codertocat/Hello-World", Topics: []string{}}
				if !reflect.DeepEqual(repos[0], want) {
					t.Errorf("pushed\n got %+v\nwant %+v", repos[0], want)
				}
			}},
		{"push to a followed repository syncs and is not passed on", "push.json", "push", nil,
			codertocat, 202, []string{"sync default", "sync main-branch"}, nil},
		{"push of another branch of a followed repository", "push.json", "push",
			func(m map[string]any) { m["ref"] = "refs/heads/feature" }, codertocat, 204, nil, nil},
		{"push of another branch of a repository no source follows", "push.json", "push",
			func(m map[string]any) { m["ref"] = "refs/heads/feature" }, staticSources{}, 204, nil, nil},
		{"tag pushed to a repository no source follows", "push-tag.json", "push", nil, staticSources{}, 204, nil, nil},
		{"default branch deleted in a repository no source follows", "push-deleted.json", "push",
			func(m map[string]any) { m["ref"] = "refs/heads/master" }, staticSources{}, 204, nil, nil},
		{"push without a repository id", "push.json", "push",
			func(m map[string]any) { delete(repoOf(m), "id") }, staticSources{}, 204, nil, nil},
		{"repository without an id", "repository-created.json", "repository",
			func(m map[string]any) { delete(repoOf(m), "id") }, codertocat, 400, nil, nil},
		{"repository with a path for a name", "repository-created.json", "repository",
			func(m map[string]any) { repoOf(m)["full_name"] = "Octocoders/../../etc" }, codertocat, 400, nil, nil},
		{"repository with a name too long", "repository-created.json", "repository",
			func(m map[string]any) { repoOf(m)["full_name"] = "Octocoders/" + strings.Repeat("a", 101) }, codertocat, 400, nil, nil},
		{"rename from a name GitHub cannot have", "repository-renamed.json", "repository", func(m map[string]any) {
			m["changes"].(map[string]any)["repository"].(map[string]any)["name"].(map[string]any)["from"] = "a/b"
		}, codertocat, 400, nil, nil},
		{"repository that is not an object", "repository-created.json", "repository",
			func(m map[string]any) { m["repository"] = "Octocoders/Hello-World" }, codertocat, 400, nil, nil},
		{"installation without an account", "installation-created.json", "installation",
			func(m map[string]any) { delete(m["installation"].(map[string]any), "account") }, codertocat, 400, nil, nil},
		{"installation listing a repository without an id", "installation_repositories-added.json", "installation_repositories",
			func(m map[string]any) {
				delete(m["repositories_added"].([]any)[0].(map[string]any), "id")
			}, codertocat, 400, nil, nil},
		{"installation repositories with another action", "installation_repositories-added.json", "installation_repositories",
			func(m map[string]any) { m["action"] = "renamed" }, codertocat, 204, nil, nil},
		{"at most 100 topics are passed on", "repository-created.json", "repository",
			func(m map[string]any) {
				var many []any
				for i := range 1000 {
					many = append(many, fmt.Sprint("topic-", i))
				}
				repoOf(m)["topics"] = many
			}, codertocat, 202, []string{"repository created Octocoders/Hello-World"},
			func(t *testing.T, repos []webhook.RepoEvent) {
				if len(repos[0].Topics) != 100 || repos[0].Topics[99] != "topic-99" {
					t.Errorf("%d topics passed on", len(repos[0].Topics))
				}
			}},
		{"a clone URL that is not one is dropped", "repository-created.json", "repository",
			func(m map[string]any) { repoOf(m)["clone_url"] = "::not a url" }, codertocat, 202,
			[]string{"repository created Octocoders/Hello-World"},
			func(t *testing.T, repos []webhook.RepoEvent) {
				if repos[0].CloneURL != "" || repos[0].HTMLURL == "" {
					t.Errorf("clone URL %q, html URL %q", repos[0].CloneURL, repos[0].HTMLURL)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &recDiscovery{}
			r := newRig(t, withDiscovery(d), withSources(tt.sources))
			body := load(t, tt.file)
			if tt.change != nil {
				body = edit(t, tt.file, tt.change)
			}
			status, out := r.send(t, delivery{event: tt.event, id: "ov-1", body: body})
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, out)
			}
			waitJournal(t, r.j, len(tt.journal))
			r.h.Close()
			got := r.j.all()
			slices.Sort(got)
			if !slices.Equal(got, tt.journal) {
				t.Errorf("asked for %q, want %q", got, tt.journal)
			}
			if tt.check != nil {
				repos, _ := d.recorded()
				if len(repos) != 1 {
					t.Fatalf("%d repository events, want 1", len(repos))
				}
				tt.check(t, repos)
			}
		})
	}
}

// TestOrgEventRedelivery: an event is a hint to look again, so a
// redelivery (answered 200, like every redelivery) is passed on again.
func TestOrgEventRedelivery(t *testing.T) {
	d := &recDiscovery{}
	r := newRig(t, withDiscovery(d))
	for i, want := range []int{202, 200} {
		if status, out := r.send(t, delivery{event: "repository", id: "same", body: load(t, "repository-created.json")}); status != want {
			t.Fatalf("delivery %d: status %d, want %d: %s", i, status, want, out)
		}
	}
	if repos, _ := d.recorded(); len(repos) != 2 {
		t.Fatalf("%d repository events, want 2", len(repos))
	}
}

// TestOrgEventsAfterClose: a closed handler (the daemon is stopping) passes
// nothing on, as it asks for no sync.
func TestOrgEventsAfterClose(t *testing.T) {
	d := &recDiscovery{}
	r := newRig(t, withDiscovery(d), withSources(staticSources{}))
	r.h.Close()
	for i, tt := range []struct{ event, file string }{
		{"repository", "repository-created.json"},
		{"installation", "installation-created.json"},
		{"installation_repositories", "installation_repositories-added.json"},
		{"push", "push.json"},
	} {
		if status, out := r.send(t, delivery{event: tt.event, id: fmt.Sprint("c-", i), body: load(t, tt.file)}); status != 202 {
			t.Fatalf("%s: status %d: %s", tt.event, status, out)
		}
	}
	if repos, insts := d.recorded(); len(repos)+len(insts) != 0 {
		t.Fatalf("a closed handler passed on %v and %v", repos, insts)
	}
}

// TestInstallationRepositoryCap: an installation event listing up to
// MaxEventRepos repositories passes every one on; past that it passes the
// event on without them (Discovery lists the account again anyway), and
// every one is still checked.
func TestInstallationRepositoryCap(t *testing.T) {
	body := func(n int, bad bool) []byte {
		var b strings.Builder
		b.WriteString(`{"action":"added","installation":{"id":5,"account":{"login":"acme"}},"repositories_added":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			name := fmt.Sprintf("acme/r%d", i)
			if bad && i == n-1 {
				name = "acme/../r"
			}
			fmt.Fprintf(&b, `{"id":%d,"full_name":%q,"private":true}`, i+1, name)
		}
		b.WriteString("]}")
		return []byte(b.String())
	}
	for _, tt := range []struct {
		n      int
		bad    bool
		status int
		repos  int
	}{
		{webhook.MaxEventRepos, false, 202, webhook.MaxEventRepos},
		{webhook.MaxEventRepos + 1, false, 202, 0},
		{webhook.MaxEventRepos + 1, true, 400, 0},
	} {
		d := &recDiscovery{}
		r := newRig(t, withDiscovery(d))
		status, out := r.send(t, delivery{event: "installation_repositories", id: "cap", body: body(tt.n, tt.bad)})
		if status != tt.status {
			t.Fatalf("%d repositories (bad %v): status %d, want %d: %.200s", tt.n, tt.bad, status, tt.status, out)
		}
		_, insts := d.recorded()
		if tt.status != 202 {
			if len(insts) != 0 {
				t.Fatalf("a refused delivery was passed on")
			}
			continue
		}
		if len(insts) != 1 || len(insts[0].Repos) != tt.repos || insts[0].Account != "acme" || insts[0].InstallationID != 5 {
			t.Fatalf("%d repositories: passed on %d events, %d repositories", tt.n, len(insts), len(insts[0].Repos))
		}
		if tt.repos > 0 && !reflect.DeepEqual(insts[0].Repos[tt.repos-1], webhook.RepoEvent{Action: "added", ID: int64(tt.repos),
			FullName: fmt.Sprintf("acme/r%d", tt.repos-1), Private: true}) {
			t.Errorf("last repository %+v", insts[0].Repos[tt.repos-1])
		}
	}
}
