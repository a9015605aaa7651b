package discovery_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/discovery"
	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/store"
)

var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const token = "ghs_discoverytesttoken"

// tokenTransport presents the test's token, as github.token_env or the
// App's installation client does.
type tokenTransport struct{}

func (tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return http.DefaultTransport.RoundTrip(r)
}

var authed = &http.Client{Transport: tokenTransport{}}

type env struct {
	gh    *fakegithub.Server
	clock *fakegithub.Clock
	slept []time.Duration
	mu    sync.Mutex
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{clock: fakegithub.NewClock(epoch)}
	e.gh = fakegithub.New(fakegithub.Options{Now: e.clock.Now, Token: token})
	t.Cleanup(e.gh.Close)
	return e
}

// options are a Manager's options against the fake: authenticated, on its
// clock, and a Sleep that moves the clock instead of waiting.
func (e *env) options(t testing.TB) discovery.Options {
	return discovery.Options{
		APIURL: e.gh.URL + "/",
		Client: func(string) *http.Client { return authed },
		Logger: testkit.Logger(t, -4),
		Now:    e.clock.Now,
		Sleep: func(ctx context.Context, d time.Duration) error {
			e.mu.Lock()
			e.slept = append(e.slept, d)
			e.mu.Unlock()
			e.clock.Advance(d)
			return ctx.Err()
		},
	}
}

func newManager(t testing.TB, o discovery.Options, tpls ...discovery.Template) *discovery.Manager {
	t.Helper()
	m, err := discovery.New(o)
	if err != nil {
		t.Fatal(err)
	}
	m.SetTemplates(tpls, []string{"static"})
	return m
}

func refresh(t testing.TB, m *discovery.Manager) {
	t.Helper()
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// byRepo is every listed repository of the groups, by full name.
func byRepo(m *discovery.Manager) map[string]discovery.Found {
	out := map[string]discovery.Found{}
	for _, g := range m.Status() {
		for _, f := range g.Repositories {
			out[f.Repo.FullName] = f
		}
	}
	return out
}

func included(m *discovery.Manager) []string {
	var out []string
	for _, f := range m.Included() {
		out = append(out, f.Source+"="+f.Repo.FullName)
	}
	return out
}

var skillFiles = []string{"README.md", "skills/review/SKILL.md", "skills/review/notes.md"}

// seedThreeOwners lists three owners' repositories: two organisations and
// a user, with topics, an archived repository, a fork, names the globs
// select and leave out, a repository without skills, one whose skills
// are outside path, and an empty one.
func seedThreeOwners(gh *fakegithub.Server) {
	topic := []string{"agent-skills"}
	for _, r := range []fakegithub.Repo{
		{FullName: "acme/skills", Topics: topic, Files: skillFiles},
		{FullName: "acme/Review_Tools", Topics: []string{"Agent-Skills", "go"}, Files: skillFiles},
		{FullName: "acme/old-skills", Topics: topic, Archived: true, Files: skillFiles},
		{FullName: "acme/forked-skills", Topics: topic, Fork: true, Files: skillFiles},
		{FullName: "acme/website", Files: []string{"index.html"}},
		{FullName: "acme/notopic", Files: skillFiles},
		{FullName: "acme/docs", Topics: topic, Files: []string{"README.md"}},
		{FullName: "acme/elsewhere", Topics: topic, Files: []string{"other/x/SKILL.md"}},
		{FullName: "acme/empty", Topics: topic},
		{FullName: "acme/skills-sandbox", Topics: topic, Files: skillFiles},
		{FullName: "acme/secret-skills", Topics: topic, Private: true, Files: skillFiles},
		{FullName: "beta/agents", Topics: topic, Files: skillFiles, DefaultBranch: "trunk"},
		{FullName: "beta/tools", Files: skillFiles},
		{FullName: "carol/my-skills", Files: skillFiles},
		{FullName: "carol/dotfiles", Files: []string{"SKILL.md"}},
	} {
		gh.AddRepo(r)
	}
	gh.SetUser("carol")
}

func TestDiscoversThreeOwners(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedThreeOwners(e.gh)
	m := newManager(t, e.options(t),
		discovery.Template{Name: "acme", Owner: "acme", Topic: "agent-skills", Exclude: []string{"*-sandbox"}, Path: "skills"},
		discovery.Template{Name: "beta", Owner: "beta", Include: []string{"ag*"}},
		discovery.Template{Name: "carol", Owner: "carol", Forks: true},
	)
	refresh(t, m)
	want := []string{
		"acme-review-tools=acme/Review_Tools", "acme-secret-skills=acme/secret-skills", "acme-skills=acme/skills",
		"beta-agents=beta/agents", "carol-dotfiles=carol/dotfiles", "carol-my-skills=carol/my-skills",
	}
	if got := included(m); !slices.Equal(got, want) {
		t.Errorf("included:\n got %q\nwant %q", got, want)
	}
	reasons := map[string]string{
		"acme/old-skills":     discovery.ReasonArchived,
		"acme/forked-skills":  discovery.ReasonFork,
		"acme/website":        `topic "agent-skills" missing`,
		"acme/notopic":        `topic "agent-skills" missing`,
		"acme/docs":           `no SKILL.md under path "skills"`,
		"acme/elsewhere":      `no SKILL.md under path "skills"`,
		"acme/empty":          `no SKILL.md under path "skills"`,
		"acme/skills-sandbox": `excluded by glob "*-sandbox"`,
		"beta/tools":          `not matched by include ["ag*"]`,
	}
	all := byRepo(m)
	for name, want := range reasons {
		f, ok := all[name]
		if !ok || f.Included || f.Reason != want {
			t.Errorf("%s: %+v, want left out: %q", name, f, want)
		}
	}
	if len(all) != 15 {
		t.Errorf("%d repositories shown, want all 15", len(all))
	}
	// Trees are asked only of the repositories the cheap rules keep.
	for _, p := range []string{"/repos/acme/website/git/trees/main", "/repos/acme/old-skills/git/trees/main", "/repos/beta/tools/git/trees/main"} {
		if n := e.gh.Requests(p); n != 0 {
			t.Errorf("%s asked %d times, want never", p, n)
		}
	}
	if n := e.gh.Requests("/repos/beta/agents/git/trees/trunk"); n != 1 {
		t.Errorf("beta/agents' tree asked %d times on its default branch, want 1", n)
	}
	// carol is a user: /orgs/carol/repos is a 404, then /users/carol/repos.
	if st := e.gh.Stats("/orgs/carol/repos"); st.Status[404] != 1 {
		t.Errorf("/orgs/carol/repos: %+v", st)
	}
}

// TestDiscoversThreeOrganisations: the listings of three organisations
// (acme, beta, gamma) and a user (carol), each with its own template, give
// every repository its verdict: included, or left out as archived, a fork,
// not matched by include, excluded by a glob, without the topic, or
// without a SKILL.md; a template that asks for archived repositories gets
// them, and one with both include and exclude globs applies both.
func TestDiscoversThreeOrganisations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedThreeOwners(e.gh)
	topic := []string{"agent-skills"}
	for _, r := range []fakegithub.Repo{
		{FullName: "gamma/skills-core", Topics: topic, Files: skillFiles},
		{FullName: "gamma/skills-archive", Topics: topic, Archived: true, Files: skillFiles},
		{FullName: "gamma/skills-fork", Topics: topic, Fork: true, Files: skillFiles},
		{FullName: "gamma/skills-wip", Topics: topic, Files: skillFiles},
		{FullName: "gamma/Skills-Old1", Topics: topic, Files: skillFiles},
		{FullName: "gamma/agent-kit", Topics: []string{"AGENT-SKILLS"}, Files: []string{"SKILL.md"}},
		{FullName: "gamma/website", Topics: topic, Files: skillFiles},
		{FullName: "gamma/skills-notopic", Topics: []string{"go"}, Files: skillFiles},
		{FullName: "gamma/skills-docs", Topics: topic, Files: []string{"README.md"}},
	} {
		e.gh.AddRepo(r)
	}
	m := newManager(t, e.options(t),
		discovery.Template{Name: "acme", Owner: "acme", Topic: "agent-skills", Exclude: []string{"*-sandbox"}, Path: "skills"},
		discovery.Template{Name: "beta", Owner: "beta", Include: []string{"ag*"}},
		discovery.Template{Name: "carol", Owner: "carol", Forks: true},
		discovery.Template{Name: "gamma", Owner: "gamma", Topic: "agent-skills", Archived: true,
			Include: []string{"skills-*", "agent*"}, Exclude: []string{"*-wip", "skills-old?"}},
	)
	refresh(t, m)
	want := []string{
		"acme-review-tools=acme/Review_Tools", "acme-secret-skills=acme/secret-skills", "acme-skills=acme/skills",
		"beta-agents=beta/agents", "carol-dotfiles=carol/dotfiles", "carol-my-skills=carol/my-skills",
		"gamma-agent-kit=gamma/agent-kit", "gamma-skills-archive=gamma/skills-archive", "gamma-skills-core=gamma/skills-core",
	}
	if got := included(m); !slices.Equal(got, want) {
		t.Errorf("included:\n got %q\nwant %q", got, want)
	}
	gammaInclude := `not matched by include ["skills-*" "agent*"]`
	reasons := map[string]string{ // every repository listed: "" is included
		"acme/skills": "", "acme/Review_Tools": "", "acme/secret-skills": "",
		"acme/old-skills":     discovery.ReasonArchived,
		"acme/forked-skills":  discovery.ReasonFork,
		"acme/website":        `topic "agent-skills" missing`,
		"acme/notopic":        `topic "agent-skills" missing`,
		"acme/docs":           `no SKILL.md under path "skills"`,
		"acme/elsewhere":      `no SKILL.md under path "skills"`,
		"acme/empty":          `no SKILL.md under path "skills"`,
		"acme/skills-sandbox": `excluded by glob "*-sandbox"`,
		"beta/agents":         "",
		"beta/tools":          `not matched by include ["ag*"]`,
		"carol/my-skills":     "", "carol/dotfiles": "",
		"gamma/skills-core": "", "gamma/skills-archive": "", "gamma/agent-kit": "",
		"gamma/skills-fork":    discovery.ReasonFork,
		"gamma/skills-wip":     `excluded by glob "*-wip"`,
		"gamma/Skills-Old1":    `excluded by glob "skills-old?"`,
		"gamma/website":        gammaInclude,
		"gamma/skills-notopic": `topic "agent-skills" missing`,
		"gamma/skills-docs":    discovery.ReasonNoSkill,
	}
	all := byRepo(m)
	for name, want := range reasons {
		f, ok := all[name]
		if !ok || f.Included != (want == "") || f.Reason != want {
			t.Errorf("%s: %+v, want included %v, reason %q", name, f, want == "", want)
		}
	}
	if len(all) != len(reasons) {
		t.Errorf("%d repositories shown, want all %d", len(all), len(reasons))
	}
	for name, f := range all {
		if f.Group != strings.SplitN(name, "/", 2)[0] {
			t.Errorf("%s in group %q", name, f.Group)
		}
	}
	// Each organisation is listed as one (a 200 at /orgs/...), the user
	// after a 404 there.
	for _, org := range []string{"acme", "beta", "gamma"} {
		if st := e.gh.Stats("/orgs/" + org + "/repos"); st.Status[200] != 1 || st.Status[404] != 0 {
			t.Errorf("/orgs/%s/repos: %+v", org, st)
		}
	}
	if st := e.gh.Stats("/orgs/carol/repos"); st.Status[404] != 1 {
		t.Errorf("/orgs/carol/repos: %+v", st)
	}
	// Trees are asked only of the repositories the cheap rules keep.
	for _, p := range []string{"/repos/gamma/skills-fork/git/trees/main", "/repos/gamma/skills-wip/git/trees/main",
		"/repos/gamma/Skills-Old1/git/trees/main", "/repos/gamma/website/git/trees/main", "/repos/gamma/skills-notopic/git/trees/main"} {
		if n := e.gh.Requests(p); n != 0 {
			t.Errorf("%s asked %d times, want never", p, n)
		}
	}
}

func TestRefreshIsConditional(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedThreeOwners(e.gh)
	m := newManager(t, e.options(t), discovery.Template{Name: "acme", Owner: "acme", Topic: "agent-skills"})
	refresh(t, m)
	_, before, _ := e.gh.RateLimit(true)
	total := e.gh.Total()
	refresh(t, m)
	// Every request of the second listing is conditional and answered 304,
	// which costs no rate limit.
	asked := e.gh.Total() - total
	if asked == 0 {
		t.Fatal("the second refresh asked nothing")
	}
	// Only acme/empty's tree costs: a 409 has no ETag to be conditional on.
	if _, after, _ := e.gh.RateLimit(true); before-after != 1 {
		t.Errorf("rate limit spent %d by an unchanged refresh, want 1 (the empty repository's 409)", before-after)
	}
	st := e.gh.Stats("/orgs/acme/repos")
	if st.Requests != 2 || st.NotModified != 1 {
		t.Errorf("listing: %+v", st)
	}
	st = e.gh.Stats("/repos/acme/skills/git/trees/main")
	if st.Requests != 2 || st.NotModified != 1 {
		t.Errorf("tree: %+v", st)
	}
	// A new file in a tree: its ETag changes and the tree is read again.
	id := byRepo(m)["acme/docs"].Repo.ID
	if err := e.gh.EditRepo(id, func(r *fakegithub.Repo) { r.Files = append(r.Files, "x/SKILL.md") }); err != nil {
		t.Fatal(err)
	}
	refresh(t, m)
	if f := byRepo(m)["acme/docs"]; !f.Included || f.Source != "acme-docs" {
		t.Errorf("acme/docs after its first SKILL.md: %+v", f)
	}
}

func TestPaginates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 250 {
		files := []string{"README.md"}
		if i%50 == 0 {
			files = append(files, "SKILL.md")
		}
		e.gh.AddRepo(fakegithub.Repo{FullName: fmt.Sprintf("big/r%03d", i), Files: files})
	}
	m := newManager(t, e.options(t), discovery.Template{Name: "big", Owner: "big"})
	refresh(t, m)
	if got := len(m.Included()); got != 5 {
		t.Errorf("%d included, want 5: %q", got, included(m))
	}
	if got := len(byRepo(m)); got != 250 {
		t.Errorf("%d listed, want 250", got)
	}
	// One request per page: 100, 100, 50.
	if n := e.gh.Requests("/orgs/big/repos"); n != 3 {
		t.Errorf("%d listing requests, want 3 (one per page)", n)
	}
}

func TestWaitsOutRateLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedThreeOwners(e.gh)
	m := newManager(t, e.options(t), discovery.Template{Name: "beta", Owner: "beta"})
	reset := epoch.Add(17 * time.Minute)
	e.gh.ExhaustRateLimit(reset)
	refresh(t, m)
	if got := included(m); !slices.Equal(got, []string{"beta-agents=beta/agents", "beta-tools=beta/tools"}) {
		t.Errorf("included after the wait: %q", got)
	}
	e.mu.Lock()
	slept := slices.Clone(e.slept)
	e.mu.Unlock()
	if len(slept) != 1 || slept[0] != 17*time.Minute {
		t.Errorf("slept %v, want once until the reset (17m)", slept)
	}
	if st := e.gh.Stats("/orgs/beta/repos"); st.Status[403] != 1 || st.Status[200] != 1 {
		t.Errorf("listing: %+v, want one 403 then one 200", st)
	}

	// A secondary limit: 429 with Retry-After.
	e.slept = nil
	e.gh.AddRepo(fakegithub.Repo{FullName: "beta/more", Files: skillFiles})
	e.gh.SecondaryRateLimit(http.StatusTooManyRequests, 90*time.Second)
	refresh(t, m)
	if f := byRepo(m)["beta/more"]; !f.Included {
		t.Errorf("beta/more after the secondary limit: %+v", f)
	}
	e.mu.Lock()
	slept = slices.Clone(e.slept)
	e.mu.Unlock()
	if len(slept) != 1 || slept[0] != 90*time.Second {
		t.Errorf("slept %v, want once for Retry-After (90s)", slept)
	}
}

func TestNamesAreFixedAtFirstDiscovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.gh.AddRepo(fakegithub.Repo{FullName: "acme/skills", Files: skillFiles})
	e.gh.AddRepo(fakegithub.Repo{FullName: "acme/Static", Files: skillFiles})
	e.gh.AddRepo(fakegithub.Repo{FullName: "acme/a_b", Files: skillFiles})
	o := e.options(t)
	m, err := discovery.New(o)
	if err != nil {
		t.Fatal(err)
	}
	m.SetTemplates([]discovery.Template{{Name: "acme", Owner: "acme"}}, []string{"acme-static"})
	refresh(t, m)
	if got := included(m); !slices.Equal(got, []string{"acme-a-b=acme/a_b", "acme-skills=acme/skills"}) {
		t.Errorf("included: %q", got)
	}
	if f := byRepo(m)["acme/Static"]; f.Included || f.Reason != "name collision: acme-static is a configured source" {
		t.Errorf("acme/Static: %+v", f)
	}
	// A second repository whose name maps to a name given: a collision.
	e.gh.AddRepo(fakegithub.Repo{FullName: "acme/a.b", Files: skillFiles})
	e.gh.AddRepo(fakegithub.Repo{FullName: "acme/A-B", Files: skillFiles})
	refresh(t, m)
	if f := byRepo(m)["acme/A-B"]; f.Included || !strings.HasPrefix(f.Reason, "name collision: acme-a-b is the name of repository id ") {
		t.Errorf("acme/A-B: %+v", f)
	}
	if f := byRepo(m)["acme/a.b"]; !f.Included || f.Source != "acme-a.b" {
		t.Errorf("acme/a.b: %+v", f)
	}
	// Renamed, and transferred within the owner's listing: same id, same
	// name, the new remote.
	if err := e.gh.EditRepo(id, func(r *fakegithub.Repo) {
		r.FullName, r.CloneURL = "acme/agent-skills", "https://git.example/acme/agent-skills.git"
	}); err != nil {
		t.Fatal(err)
	}
	refresh(t, m)
	f := byRepo(m)["acme/agent-skills"]
	if !f.Included || f.Source != "acme-skills" || f.Repo.CloneURL != "https://git.example/acme/agent-skills.git" {
		t.Errorf("after the rename: %+v", f)
	}
}

func TestRestartHasTheDiscoveredSetBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedThreeOwners(e.gh)
	st, err := store.Open(filepath.Join(t.TempDir(), store.FileName), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tpl := discovery.Template{Name: "acme", Owner: "acme", Topic: "agent-skills"}
	o := e.options(t)
	o.Store = st
	m := newManager(t, o, tpl)
	refresh(t, m)
	want := included(m)
	if len(want) != 5 {
		t.Fatalf("first run included %q", want)
	}
	total := e.gh.Total()

	m2 := newManager(t, o, tpl)
	if got := included(m2); !slices.Equal(got, want) {
		t.Errorf("restarted: %q, want %q before any request", got, want)
	}
	if e.gh.Total() != total {
		t.Errorf("the restart asked GitHub %d times before its refresh", e.gh.Total()-total)
	}
	// Its first refresh is conditional on the stored ETags: all 304.
	refresh(t, m2)
	if s := e.gh.Stats("/orgs/acme/repos"); s.NotModified != 1 {
		t.Errorf("listing after the restart: %+v, want a 304", s)
	}
	// A group that goes keeps its names: configured again, it gives the
	// same ones.
	m2.SetTemplates(nil, nil)
	m3 := newManager(t, o, discovery.Template{Name: "acme2", Owner: "acme", Topic: "agent-skills"})
	if got := included(m3); len(got) != 0 {
		t.Errorf("a new group of the owner: %q before its listing", got)
	}
	refresh(t, m3)
	if got := included(m3); !slices.Equal(got, want) {
		t.Errorf("a group configured again: %q, want the names given before %q", got, want)
	}
}

func TestEventsApplyInTheBackground(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedThreeOwners(e.gh)
	changes := make(chan struct{}, 16)
	o := e.options(t)
	o.OnChange = func() { changes <- struct{}{} }
	m := newManager(t, o, discovery.Template{Name: "acme", Owner: "acme", Topic: "agent-skills"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testkit.WaitUntil(t, "the first listing", func() bool { return len(m.Included()) == 5 })

	// A new repository, seen through its first push, appears without a
	// poll.
	id := e.gh.AddRepo(fakegithub.Repo{FullName: "acme/new-skills", Topics: []string{"agent-skills"}, Files: skillFiles})
	m.Repository(discovery.RepoEvent{Action: "pushed", ID: id, FullName: "acme/new-skills", DefaultBranch: "main",
		CloneURL: "https://github.com/acme/new-skills.git", Topics: []string{"agent-skills"}})
	testkit.WaitUntil(t, "the pushed repository included", func() bool { return byRepo(m)["acme/new-skills"].Included })

	// Deleted: gone at once, whatever the listing says until it changes.
	skills := byRepo(m)["acme/skills"]
	m.Repository(discovery.RepoEvent{Action: "deleted", ID: skills.Repo.ID, FullName: "acme/skills"})
	if f, ok := byRepo(m)["acme/skills"]; ok {
		t.Errorf("deleted repository still listed: %+v", f)
	}
	e.gh.DeleteRepo(skills.Repo.ID)
	// Archived: left out.
	rt := byRepo(m)["acme/Review_Tools"].Repo
	rt.Archived = true
	m.Repository(discovery.RepoEvent{Action: "archived", ID: rt.ID, FullName: rt.FullName, Archived: true, DefaultBranch: "main", CloneURL: rt.CloneURL, Topics: rt.Topics})
	if f := byRepo(m)["acme/Review_Tools"]; f.Included || f.Reason != discovery.ReasonArchived {
		t.Errorf("archived: %+v", f)
	}
	// Installation: the App uninstalled from the account drops its
	// repositories.
	m.Installation(discovery.InstallationEvent{Action: "deleted", Account: "acme"})
	if got := included(m); len(got) != 0 {
		t.Errorf("after the installation was deleted: %q", got)
	}
	select {
	case <-changes:
	default:
		t.Error("OnChange never called")
	}
}

func TestTruncatedTreeIsIncluded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gh.AddRepo(fakegithub.Repo{FullName: "huge/mono", Files: []string{"a.txt", "z/SKILL.md"}, Truncated: true})
	m := newManager(t, e.options(t), discovery.Template{Name: "huge", Owner: "huge"})
	refresh(t, m)
	if f := byRepo(m)["huge/mono"]; !f.Included || f.Reason != discovery.ReasonTruncated {
		t.Errorf("truncated tree: %+v", f)
	}
}

func TestInstallationListing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedThreeOwners(e.gh)
	e.gh.SetInstallationAccount(token, "carol")
	o := e.options(t)
	o.Installation = true
	m := newManager(t, o, discovery.Template{Name: "carol", Owner: "carol"})
	refresh(t, m)
	if got := included(m); !slices.Equal(got, []string{"carol-dotfiles=carol/dotfiles", "carol-my-skills=carol/my-skills"}) {
		t.Errorf("included: %q", got)
	}
	if n := e.gh.Requests("/installation/repositories"); n != 1 {
		t.Errorf("%d installation listings, want 1", n)
	}
}

func TestSourceName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ owner, repo, want string }{
		{"acme", "skills", "acme-skills"},
		{"Acme", "Review_Tools", "acme-review-tools"},
		{"acme", "a..b", "acme-a.-b"},
		{"acme", "repo-", "acme-repo"},
		{"acme", ".github", "acme-.github"},
		{"o", strings.Repeat("x", 80), "o-" + strings.Repeat("x", 61)},
		{"o", strings.Repeat("x", 60) + "-.y", "o-" + strings.Repeat("x", 60)},
	} {
		got, ok := discovery.SourceName(c.owner, c.repo)
		if !ok || got != c.want {
			t.Errorf("SourceName(%q, %q) = %q, %v; want %q", c.owner, c.repo, got, ok, c.want)
		}
		if len(got) > discovery.MaxNameLen {
			t.Errorf("%q is longer than %d", got, discovery.MaxNameLen)
		}
	}
}

func TestTemplateChangesReevaluate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedThreeOwners(e.gh)
	tpl := discovery.Template{Name: "acme", Owner: "acme", Topic: "agent-skills", Path: "skills"}
	m := newManager(t, e.options(t), tpl)
	refresh(t, m)
	if f := byRepo(m)["acme/elsewhere"]; f.Included {
		t.Fatalf("acme/elsewhere under skills: %+v", f)
	}
	// Another path: what the trees said of the old one no longer counts.
	tpl.Path = "other"
	if !m.SetTemplates([]discovery.Template{tpl}, nil) {
		t.Error("SetTemplates with another path reported no change")
	}
	if got := included(m); len(got) != 0 {
		t.Errorf("before the trees are asked again: %q", got)
	}
	refresh(t, m)
	if got := included(m); !slices.Equal(got, []string{"acme-elsewhere=acme/elsewhere"}) {
		t.Errorf("under path other: %q", got)
	}
	// Another owner: nothing known of acme applies.
	if !m.SetTemplates([]discovery.Template{{Name: "acme", Owner: "beta"}}, nil) || len(m.Included()) != 0 {
		t.Errorf("another owner: %q", included(m))
	}
}

func TestCloneURLsStayOnTheGitHubHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gh.AddRepo(fakegithub.Repo{FullName: "acme/skills", Files: skillFiles})
	e.gh.AddRepo(fakegithub.Repo{FullName: "acme/moved", Files: skillFiles, CloneURL: "https://git.evil.example/acme/moved.git"})
	o := e.options(t)
	o.CloneHost = "github.com"
	m := newManager(t, o, discovery.Template{Name: "acme", Owner: "acme"})
	refresh(t, m)
	if got := included(m); !slices.Equal(got, []string{"acme-skills=acme/skills"}) {
		t.Errorf("included %q", got)
	}
	if f := byRepo(m)["acme/moved"]; f.Reason != "clone URL not on github.com" {
		t.Errorf("acme/moved: %+v", f)
	}
	if n := e.gh.Requests("/repos/acme/moved/git/trees/main"); n != 0 {
		t.Errorf("its tree was asked %d times", n)
	}
}

func TestTruncatedTreeIsProbed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gh.AddRepo(fakegithub.Repo{FullName: "huge/mono", Files: []string{"a.txt", "z/SKILL.md"}, Truncated: true})
	e.gh.AddRepo(fakegithub.Repo{FullName: "huge/none", Files: []string{"a.txt", "b.txt"}, Truncated: true})
	o := e.options(t)
	var asked []string
	o.Probe = func(_ context.Context, _ string, r discovery.Repo, branch, dir string) (bool, error) {
		asked = append(asked, r.FullName+"@"+branch+":"+dir)
		return r.FullName == "huge/mono", nil
	}
	m := newManager(t, o, discovery.Template{Name: "huge", Owner: "huge", Path: "z"})
	refresh(t, m)
	if got := included(m); !slices.Equal(got, []string{"huge-mono=huge/mono"}) {
		t.Errorf("included %q", got)
	}
	if f := byRepo(m)["huge/none"]; f.Included || f.Reason != `no SKILL.md under path "z"` {
		t.Errorf("huge/none: %+v", f)
	}
	// An unchanged tree (304) keeps the probe's verdict: no second fetch.
	refresh(t, m)
	if !slices.Equal(asked, []string{"huge/mono@main:z", "huge/none@main:z"}) && !slices.Equal(asked, []string{"huge/none@main:z", "huge/mono@main:z"}) {
		t.Errorf("probed %q, want each once", asked)
	}
}
