package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/discovery"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/mcp"
	"github.com/skillreg/skillreg/web"
)

// discoveryTimeout bounds one GitHub API request of discovery.
const discoveryTimeout = 30 * time.Second

// openDiscovery makes the discovery manager of a serving daemon: what the
// store kept of each github: template's repositories is at hand before
// any request, so the first install serves every discovered source the
// last run did. Its listings run with the registry (Serve).
func (d *Daemon) openDiscovery(cfg *config.Config) error {
	o := discovery.Options{
		APIURL:    cfg.GitHub.APIURL,
		CloneHost: cfg.GitHub.WebHost(),
		Client:    d.githubClient(cfg.GitHub.TokenEnv),
		Probe:     d.probeTree,
		Poll:      cfg.GitHub.DiscoveryPoll.D(),
		OnChange:  d.discoveryChanged,
		Logger:    d.log,
	}
	if d.store != nil {
		o.Store = d.store
	}
	m, err := discovery.New(o)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	d.disc = m
	return nil
}

// githubClient is the client discovery asks GitHub's API with for an
// owner: the GitHub App's installation token for that owner when the App
// is installed there, else github.token_env's token (read at each request,
// so a rotated one takes effect), anonymous without one: the precedence
// releases lookups and git follow (ghapp.go).
func (d *Daemon) githubClient(env string) func(owner string) *http.Client {
	fallback := envToken{env: env, secrets: d.secrets.Add}
	if d.core == nil || d.app == nil {
		c := &http.Client{Timeout: discoveryTimeout, Transport: fallback}
		return func(string) *http.Client { return c }
	}
	app := d.app
	return func(owner string) *http.Client {
		return &http.Client{Timeout: discoveryTimeout, Transport: &ownerTransport{app: app, owner: owner, base: fallback}}
	}
}

// envToken presents the token of an environment variable, and tells the
// log scrubber each one it presents.
type envToken struct {
	env     string
	secrets func(...string)
}

func (t envToken) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.env != "" {
		if tok := strings.TrimSpace(os.Getenv(t.env)); tok != "" {
			t.secrets(tok)
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// templatesOf are cfg's github: templates, and the names of all its
// sources, templates included (which no discovered repository may take:
// a client naming a template must mean its group).
func templatesOf(cfg *config.Config) (tpls []discovery.Template, reserved []string) {
	for _, s := range cfg.Sources {
		reserved = append(reserved, s.Name)
		g := s.GitHub
		if g == nil {
			continue
		}
		tpls = append(tpls, discovery.Template{
			Name: s.Name, Owner: g.Owner, Topic: g.Topic, Include: g.Include, Exclude: g.Exclude,
			Archived: g.Archived, Forks: g.Forks, Path: s.Path,
		})
	}
	return tpls, reserved
}

// applyTemplates gives the discovery manager rt's templates and adds the
// repositories they discover now to rt's sources and public set. Called
// with discMu held, before rt is installed.
func (d *Daemon) applyTemplates(rt *runtimeConfig) {
	if d.disc == nil {
		return
	}
	if rt.static == nil {
		rt.static = rt.sources
	}
	d.disc.SetTemplates(templatesOf(rt.cfg))
	d.addDiscovered(rt)
}

// addDiscovered sets rt's sources to its configured ones plus every
// repository its templates discover now, and its public set to match.
// Each discovered source is its template's config.Source copied whole,
// with the repository's name and clone URL, through the same conversion
// as a configured source: ref, path, poll, timeout, auth, public (and
// whatever a template grows) come with it.
func (d *Daemon) addDiscovered(rt *runtimeConfig) {
	tpl := map[string]config.Source{}
	for _, s := range rt.cfg.Sources {
		if s.GitHub != nil {
			tpl[s.Name] = s
		}
	}
	public := map[string]bool{} // as build makes it, plus the discovered
	for _, s := range rt.cfg.Sources {
		if s.Public {
			public[s.Name] = true
		}
	}
	var copies []config.Source
	var groups []string
	for _, f := range d.disc.Included() {
		t, ok := tpl[f.Group]
		if !ok {
			continue
		}
		repo, err := gitref.ParseRepo(f.Repo.CloneURL)
		if err != nil {
			d.log.Warn("discovered repository not served: its clone URL does not parse", "source", f.Source, "repo", f.Repo.FullName, "err", err)
			continue
		}
		t.Name, t.URL, t.GitHub, t.Repo = f.Source, repo.URL(), nil, repo
		copies = append(copies, t)
		groups = append(groups, f.Group)
		if t.Public {
			public[f.Source] = true
		}
	}
	srcs := rt.static
	if len(copies) > 0 {
		c := *rt.cfg
		c.Sources = copies
		found, err := sources(&c, d.app)
		if err != nil {
			d.log.Error("discovered sources not served", "err", err)
		} else {
			for i := range found {
				found[i].Group = groups[i]
			}
			srcs = append(append([]catalog.Source(nil), rt.static...), found...)
		}
	}
	rt.sources, rt.public = srcs, public
}

// discoveryChanged installs the discovery manager's new included set: a
// runtime like the running one with the new sources, swapped in whole.
func (d *Daemon) discoveryChanged() {
	d.discMu.Lock()
	defer d.discMu.Unlock()
	rt := d.running()
	if rt == nil {
		return
	}
	next := *rt
	d.addDiscovered(&next)
	d.rt.Store(&next)
	d.learnTokens(next.sources)
	d.Registry.SetSources(next.sources)
	d.log.Info("discovered sources changed", "sources", len(next.sources)-len(next.static))
}

// groupMembers are the sources a template's group holds now, for the
// gate (nil for a name that is no group).
func (d *Daemon) groupMembers(name string) []string {
	if d.disc == nil {
		return nil
	}
	return d.disc.Members(name)
}

// discoveredMCP is every discovered repository and why it is or is not
// served, for diagnose.
func (d *Daemon) discoveredMCP() []mcp.DiscoveredRepo {
	if d.disc == nil {
		return nil
	}
	var out []mcp.DiscoveredRepo
	for _, g := range d.disc.Status() {
		g.Error = d.secrets.String(g.Error) // GitHub's answer, which may echo what it was sent
		for _, f := range g.Repositories {
			out = append(out, mcp.DiscoveredRepo{Group: g.Group, Repository: f.Repo.FullName, ID: f.Repo.ID,
				Source: f.Source, Included: f.Included, Reason: f.Reason, ListError: g.Error})
		}
		if len(g.Repositories) == 0 && g.Error != "" {
			out = append(out, mcp.DiscoveredRepo{Group: g.Group, ListError: g.Error})
		}
	}
	return out
}

// discoveredWeb is discoveredMCP for the /sources page.
func (d *Daemon) discoveredWeb() []web.Discovered {
	var out []web.Discovered
	for _, r := range d.discoveredMCP() {
		out = append(out, web.Discovered{Group: r.Group, Repository: r.Repository, Source: r.Source, Included: r.Included, Reason: r.Reason, ListError: r.ListError})
	}
	return out
}

// probeTree decides a repository whose recursive tree GitHub truncated:
// a shallow fetch of branch into the repository's object store (its
// first sync reuses what it fetched), with the template's credential,
// then a walk of dir for a SKILL.md.
func (d *Daemon) probeTree(ctx context.Context, group string, r discovery.Repo, branch, dir string) (bool, error) {
	repo, err := gitref.ParseRepo(r.CloneURL)
	if err != nil {
		return false, err
	}
	rt := d.running()
	if rt == nil {
		return false, errors.New("no configuration installed yet")
	}
	var auth *config.Auth
	cfg := rt.cfg
	for _, s := range cfg.Sources {
		if s.Name == group && s.GitHub != nil {
			auth = s.Auth
		}
	}
	var creds gitstore.Auth
	if token, _, _ := tokenSource(auth, repo, cfg.GitHub.WebHost(), cfg.GitHub.TokenEnv, d.app); token != nil {
		if creds.Token, err = token(); err != nil {
			return false, err
		}
		d.secrets.AddBasic(gitstore.TokenUser, creds.Token)
	}
	pin, err := gitref.ParsePin("branch", branch)
	if err != nil {
		return false, err
	}
	store, err := d.pool.Repo(repo.URL())
	if err != nil {
		return false, err
	}
	refs, err := store.ListRemote(ctx, creds)
	if err != nil {
		return false, d.secrets.Error(err)
	}
	res, err := refs.Resolve(pin)
	if err != nil {
		return false, err
	}
	if err := store.Fetch(ctx, res, creds); err != nil {
		return false, d.secrets.Error(err)
	}
	entries, err := store.Walk(res.Commit, dir)
	if errors.Is(err, gitstore.ErrPathNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if path.Base(e.Path) == "SKILL.md" && e.Mode != gitstore.ModeSubmodule {
			return true, nil
		}
	}
	return false, nil
}
