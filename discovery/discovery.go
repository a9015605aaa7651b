// Package discovery turns a `github:` source template (an owner, a topic,
// include and exclude globs, whether archived repositories and forks
// count) into the set of that owner's repositories that hold skills: one
// git source per repository, named at its first discovery and keyed by
// GitHub's repository id, so a rename or a transfer keeps the name. The
// Manager lists the owner's repositories (one request per page, each
// ETag-conditional, rate limits honoured), looks for a SKILL.md under the
// template's path with the Git Trees API (also ETag-conditional), keeps
// what it learnt in a Store so a restart has every discovered source
// before any network call, and applies the App's webhook events
// (Repository, Installation) in the background within seconds.
//
// It knows nothing of the configuration file or the registry: cmd turns
// the Found repositories into sources, from the template's own settings.
package discovery

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// RepoEvent is what a webhook delivery says of one repository (the
// `repository` event, a repository in `installation_repositories`, or a
// `push` to a repository no source follows, as Action "pushed").
type RepoEvent struct {
	// Action is one of created, deleted, archived, unarchived, renamed,
	// transferred, publicized, privatized, pushed, added, removed.
	Action      string
	ID          int64
	FullName    string // owner/name now
	OldFullName string // before a rename or transfer, else ""

	Archived, Fork, Private          bool
	DefaultBranch, CloneURL, HTMLURL string
	Topics                           []string
}

// InstallationEvent is what an `installation` or
// `installation_repositories` delivery says.
type InstallationEvent struct {
	// Action is one of created, deleted, suspend, unsuspend, added,
	// removed.
	Action         string
	InstallationID int64
	Account        string      // the owner login
	Repos          []RepoEvent // the repositories added or removed
}

// Template is one `github:` source: which of an owner's repositories it
// stands for. Name is the template source's name, the group every
// repository it discovers belongs to.
type Template struct {
	Name     string
	Owner    string
	Topic    string   // "" any
	Include  []string // globs on repository names; none: every name
	Exclude  []string
	Archived bool   // include archived repositories
	Forks    bool   // include forks
	Path     string // a repository is included when a SKILL.md is under it ("" anywhere)
}

// Repo is a repository as GitHub lists it.
type Repo struct {
	ID            int64    `json:"id"`
	FullName      string   `json:"full_name"`
	Archived      bool     `json:"archived,omitempty"`
	Fork          bool     `json:"fork,omitempty"`
	Private       bool     `json:"private,omitempty"`
	DefaultBranch string   `json:"default_branch,omitempty"`
	CloneURL      string   `json:"clone_url"`
	HTMLURL       string   `json:"html_url,omitempty"`
	Topics        []string `json:"topics,omitempty"`
}

// Owner is the login before the slash of FullName.
func (r *Repo) Owner() string { o, _, _ := strings.Cut(r.FullName, "/"); return o }

// Name is the repository's name after the slash of FullName.
func (r *Repo) Name() string { _, n, _ := strings.Cut(r.FullName, "/"); return n }

// Found is one listed repository of a group and what became of it.
type Found struct {
	Group string `json:"group"`
	Repo  Repo   `json:"repo"`
	// Source is the name the repository was given ("" when it never was:
	// not included, or its name was taken).
	Source   string `json:"source,omitempty"`
	Included bool   `json:"included"`
	// Reason says why it is not included (or, for an included one, a
	// note such as ReasonTruncated).
	Reason string `json:"reason,omitempty"`
}

// Name is the source name given to a repository id at its first
// discovery, and the group that gave it.
type Name struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Group string `json:"group"`
}

// Page is one page of an owner's repository listing as last fetched.
type Page struct {
	URL   string `json:"url"`
	ETag  string `json:"etag,omitempty"`
	Repos []Repo `json:"repos"`
	Next  string `json:"next,omitempty"` // the next page's URL, from the Link header
}

// TreeCheck is what the Trees API said of a repository's default branch.
type TreeCheck struct {
	ID        int64  `json:"id"`
	Ref       string `json:"ref"`            // the branch asked for
	Path      string `json:"path,omitempty"` // the template path it was judged for
	ETag      string `json:"etag,omitempty"`
	HasSkill  bool   `json:"has_skill"`
	Truncated bool   `json:"truncated,omitempty"`
}

// GroupRecord is what the Store keeps of a group: the listing with its
// ETags, the tree checks, and the last evaluation (the included set).
type GroupRecord struct {
	Group    string      `json:"group"`
	Owner    string      `json:"owner"`
	Pages    []Page      `json:"pages,omitempty"`
	Trees    []TreeCheck `json:"trees,omitempty"`
	Found    []Found     `json:"found,omitempty"`
	ListedAt time.Time   `json:"listed_at,omitzero"`
}

// Store keeps what discovery learnt across restarts.
type Store interface {
	LoadDiscovery() ([]GroupRecord, []Name, error)
	// SaveDiscovery stores a group's record and the names given so far,
	// in one transaction.
	SaveDiscovery(g GroupRecord, names []Name) error
	DeleteDiscoveryGroup(group string) error
}

// Options configures a Manager. The zero value lists the public API
// anonymously, every DefaultPoll, and keeps nothing.
type Options struct {
	// APIURL is the REST API's base (github.api_url; default
	// https://api.github.com/).
	APIURL string
	// Client returns the HTTP client to ask about an owner's
	// repositories (the App's installation client, or one presenting
	// github.token_env); nil means http.DefaultClient.
	Client func(owner string) *http.Client
	// Installation lists GET /installation/repositories (what the App's
	// installation on the owner may read) instead of the owner's
	// public listing /orgs/{owner}/repos (or /users/{owner}/repos).
	Installation bool
	// CloneHost, when set, is the host every clone URL must be on (the
	// GitHub host): a repository elsewhere is never a source, so no
	// template's credential is sent to another host.
	CloneHost string
	// Poll is how often every group is listed again (default
	// DefaultPoll); events refresh one owner at once.
	Poll  time.Duration
	Store Store
	// OnChange is called (from the Manager's goroutine) after the
	// included set of some group changed; it reads Included.
	OnChange func()
	Logger   *slog.Logger
	Now      func() time.Time
	// Sleep waits out a rate limit (default a timer); tests advance
	// their clock instead.
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultPoll is github.discovery_poll's default.
const DefaultPoll = 10 * time.Minute

// Manager keeps every group's discovered repositories current.
type Manager struct {
	o   Options
	log *slog.Logger
	api *api

	mu        sync.Mutex
	templates map[string]Template // by group
	reserved  map[string]bool     // names of the configured sources
	groups    map[string]*group
	names     map[int64]Name
	dirty     map[string]bool // groups to refresh
	kick      chan struct{}
	seq       uint64 // counts events applied
	// changed says an included set changed since OnChange was last told.
	changed bool
}

// group is one template's discovery state.
type group struct {
	rec   GroupRecord
	err   string
	errAt time.Time
	// overrides are what events said of repositories since the last
	// listing that changed (a nil repo: deleted); a listing that changes
	// drops those older than it.
	overrides map[int64]override
}

type override struct {
	repo *Repo // nil: gone
	seq  uint64
}

// New returns a Manager holding what the store kept: Included answers
// at once, before any network call.
func New(o Options) (*Manager, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	m := &Manager{
		o: o, log: o.Logger,
		api:       newAPI(o),
		templates: map[string]Template{},
		reserved:  map[string]bool{},
		groups:    map[string]*group{},
		names:     map[int64]Name{},
		dirty:     map[string]bool{},
		kick:      make(chan struct{}, 1),
	}
	if o.Store != nil {
		recs, names, err := o.Store.LoadDiscovery()
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			m.names[n.ID] = n
		}
		for _, r := range recs {
			m.groups[r.Group] = &group{rec: r}
		}
	}
	return m, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SetTemplates installs the configured templates and the names of every
// other configured source (a discovered repository never takes one).
// Groups no template names any more are forgotten (their names stay
// given); the others are re-evaluated from what is known and refreshed
// in the background. It reports whether the included set changed.
func (m *Manager) SetTemplates(tpls []Template, reserved []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.templates = map[string]Template{}
	for _, t := range tpls {
		m.templates[t.Name] = t
	}
	m.reserved = map[string]bool{}
	for _, n := range reserved {
		m.reserved[n] = true
	}
	changed := false
	for name, g := range m.groups {
		if t, ok := m.templates[name]; !ok || !strings.EqualFold(t.Owner, g.rec.Owner) {
			// Gone, or another owner: nothing known still applies.
			delete(m.groups, name)
			changed = changed || slices.ContainsFunc(g.rec.Found, func(f Found) bool { return f.Included })
			if m.o.Store != nil {
				if err := m.o.Store.DeleteDiscoveryGroup(name); err != nil {
					m.log.Error("forget discovered group in store", "source", name, "err", err)
				}
			}
		}
	}
	for _, t := range m.templates {
		g, ok := m.groups[t.Name]
		if !ok {
			g = &group{rec: GroupRecord{Group: t.Name, Owner: t.Owner}}
			m.groups[t.Name] = g
		}
		if m.evaluateLocked(g) {
			changed = true
		}
		m.dirty[t.Name] = true
	}
	m.signal()
	return changed
}

func (m *Manager) signal() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Included returns every included repository of every configured group,
// sorted by source name.
func (m *Manager) Included() []Found {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Found
	for name, g := range m.groups {
		if _, ok := m.templates[name]; !ok {
			continue
		}
		for _, f := range g.rec.Found {
			if f.Included {
				out = append(out, f)
			}
		}
	}
	slices.SortFunc(out, func(a, b Found) int { return strings.Compare(a.Source, b.Source) })
	return out
}

// Members returns the names of the sources a group discovered (nil for a
// name that is no group).
func (m *Manager) Members(group string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.groups[group]
	if _, tpl := m.templates[group]; !ok || !tpl {
		return nil
	}
	out := []string{}
	for _, f := range g.rec.Found {
		if f.Included {
			out = append(out, f.Source)
		}
	}
	return out
}

// GroupStatus is what diagnose and /sources show of a group.
type GroupStatus struct {
	Group    string    `json:"group"`
	Owner    string    `json:"owner"`
	ListedAt time.Time `json:"listed_at,omitzero"`
	Error    string    `json:"error,omitempty"`
	ErrorAt  time.Time `json:"error_at,omitzero"`
	// Repositories are every listed repository, included or not, with
	// the reason.
	Repositories []Found `json:"repositories"`
}

// Status returns every configured group's state, sorted by name.
func (m *Manager) Status() []GroupStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []GroupStatus
	for name, g := range m.groups {
		if _, ok := m.templates[name]; !ok {
			continue
		}
		out = append(out, GroupStatus{Group: name, Owner: g.rec.Owner, ListedAt: g.rec.ListedAt, Error: g.err, ErrorAt: g.errAt,
			Repositories: slices.Clone(g.rec.Found)})
	}
	slices.SortFunc(out, func(a, b GroupStatus) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// Run refreshes every group at once, then every Poll and whenever an
// event or SetTemplates asks, until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	m.markAll()
	t := time.NewTimer(m.o.Poll)
	defer t.Stop()
	for {
		m.refreshDirty(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-m.kick:
		case <-t.C:
			m.markAll()
			t.Reset(m.o.Poll)
		}
	}
}

func (m *Manager) markAll() {
	m.mu.Lock()
	for name := range m.templates {
		m.dirty[name] = true
	}
	m.mu.Unlock()
}

// Refresh lists every group now and waits for it (for tests and
// `skillreg sync`). It returns the groups' errors joined.
func (m *Manager) Refresh(ctx context.Context) error {
	m.markAll()
	return m.refreshDirty(ctx)
}

// refreshDirty refreshes the groups marked dirty, one at a time, and
// tells OnChange once if any included set changed.
func (m *Manager) refreshDirty(ctx context.Context) error {
	var errs []error
	for ctx.Err() == nil {
		m.mu.Lock()
		var name string
		for n := range m.dirty {
			name = n
			break
		}
		if name == "" {
			m.mu.Unlock()
			break
		}
		delete(m.dirty, name)
		tpl, ok := m.templates[name]
		m.mu.Unlock()
		if !ok {
			continue
		}
		if err := m.refresh(ctx, tpl); err != nil {
			errs = append(errs, err)
		}
	}
	m.mu.Lock()
	changed := m.changed
	m.changed = false
	m.mu.Unlock()
	if changed && m.o.OnChange != nil {
		m.o.OnChange()
	}
	return errors.Join(errs...)
}

// Repository applies a repository event: what it says is applied at once
// in the background, and the owner's groups are listed again.
func (m *Manager) Repository(ev RepoEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyLocked(ev)
	m.signal()
}

// Installation applies an installation event in the background: the
// repositories it adds or removes, or (deleted, suspend) every
// repository of the account's groups, then the account is listed again.
func (m *Manager) Installation(ev InstallationEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev.Action {
	case "deleted", "suspend":
		for name, g := range m.groups {
			if strings.EqualFold(g.rec.Owner, ev.Account) {
				m.seq++
				g.overrides = map[int64]override{}
				for _, p := range g.rec.Pages {
					for _, r := range p.Repos {
						g.overrides[r.ID] = override{seq: m.seq}
					}
				}
				g.rec.Pages = nil // nothing listed is readable now
				m.evaluateLocked(g)
				m.dirty[name] = true
			}
		}
	default:
		for _, r := range ev.Repos {
			if r.FullName == "" {
				r.FullName = ev.Account + "/"
			}
			m.applyLocked(r)
		}
		m.markOwnerLocked(ev.Account)
	}
	m.signal()
}

// applyLocked records what an event says of one repository in the groups
// of its owner (and of its old owner, after a transfer) and marks them
// for a refresh.
func (m *Manager) applyLocked(ev RepoEvent) {
	r := &Repo{ID: ev.ID, FullName: ev.FullName, Archived: ev.Archived, Fork: ev.Fork, Private: ev.Private,
		DefaultBranch: ev.DefaultBranch, CloneURL: ev.CloneURL, HTMLURL: ev.HTMLURL, Topics: slices.Clone(ev.Topics)}
	gone := ev.Action == "deleted" || ev.Action == "removed"
	owners := []string{r.Owner()}
	if ev.OldFullName != "" {
		if o, _, _ := strings.Cut(ev.OldFullName, "/"); !strings.EqualFold(o, r.Owner()) {
			owners = append(owners, o)
		}
	}
	m.seq++
	for name, g := range m.groups {
		if _, ok := m.templates[name]; !ok {
			continue
		}
		for _, o := range owners {
			if !strings.EqualFold(g.rec.Owner, o) {
				continue
			}
			if g.overrides == nil {
				g.overrides = map[int64]override{}
			}
			switch {
			case r.ID == 0:
				// No id: the event only asks for the listing.
			case gone || !strings.EqualFold(r.Owner(), g.rec.Owner):
				// Deleted, removed from the installation, or
				// transferred away from this owner.
				g.overrides[r.ID] = override{seq: m.seq}
			case r.CloneURL != "":
				g.overrides[r.ID] = override{repo: r, seq: m.seq}
			}
			m.evaluateLocked(g)
			m.dirty[name] = true
		}
	}
}

func (m *Manager) markOwnerLocked(owner string) {
	for name, g := range m.groups {
		if strings.EqualFold(g.rec.Owner, owner) {
			m.dirty[name] = true
		}
	}
}
