package fakegithub_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-github/v60/github"

	"github.com/skillreg/skillreg/internal/fakegithub"
)

// The repository endpoints answer the way go-github reads GitHub's:
// listings with Link pagination and conditional requests, a user's
// listing, the installation's, and the Trees API.
func TestRepositoryEndpoints(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, fakegithub.Options{Token: "tok"})
	for i := range 45 {
		s.AddRepo(fakegithub.Repo{FullName: fmt.Sprintf("acme/r%02d", i), Topics: []string{"agent-skills"}, Files: []string{"a/SKILL.md"}})
	}
	s.AddRepo(fakegithub.Repo{FullName: "acme/secret", Private: true, Files: []string{"x"}})
	s.AddRepo(fakegithub.Repo{FullName: "acme/huge", Files: []string{"a", "b/SKILL.md"}, Truncated: true})
	s.AddRepo(fakegithub.Repo{FullName: "acme/empty"})
	s.AddRepo(fakegithub.Repo{FullName: "carol/dots", Files: []string{"SKILL.md"}})
	s.SetUser("carol")
	s.SetInstallationAccount("tok", "carol")
	ctx := context.Background()

	anon := client(t, s.URL)
	var all []*github.Repository
	opt := &github.RepositoryListByOrgOptions{ListOptions: github.ListOptions{PerPage: 20}}
	pages := 0
	for {
		repos, resp, err := anon.Repositories.ListByOrg(ctx, "acme", opt)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		all = append(all, repos...)
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if len(all) != 47 || pages != 3 {
		t.Errorf("anonymous listing: %d repositories in %d pages, want 47 (no private) in 3", len(all), pages)
	}
	if r := all[0]; r.GetFullName() != "acme/r00" || r.GetDefaultBranch() != "main" || r.GetCloneURL() != "https://github.com/acme/r00.git" ||
		len(r.Topics) != 1 || r.GetOwner().GetType() != "Organization" || r.GetID() == 0 {
		t.Errorf("first repository %+v", r)
	}
	authed := github.NewClient(&http.Client{Transport: bearer{"tok"}})
	authed.BaseURL = anon.BaseURL
	repos, resp, err := authed.Repositories.ListByOrg(ctx, "acme", &github.RepositoryListByOrgOptions{ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil || len(repos) != 48 {
		t.Fatalf("authenticated listing: %v, %d", err, len(repos))
	}
	// Conditional: 304 for the same ETag.
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/orgs/acme/repos?per_page=100", nil)
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusNotModified {
		t.Fatalf("conditional listing: %v %v", err, res)
	}
	res.Body.Close()

	if _, resp, err := anon.Repositories.ListByOrg(ctx, "carol", nil); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("/orgs/carol/repos: %v", err)
	}
	if repos, _, err := anon.Repositories.ListByUser(ctx, "carol", nil); err != nil || len(repos) != 1 || repos[0].GetOwner().GetType() != "User" {
		t.Errorf("/users/carol/repos: %v %+v", err, repos)
	}
	if inst, _, err := authed.Apps.ListRepos(ctx, nil); err != nil || inst.GetTotalCount() != 1 || inst.Repositories[0].GetFullName() != "carol/dots" {
		t.Errorf("/installation/repositories: %v %+v", err, inst)
	}
	if _, resp, err := anon.Apps.ListRepos(ctx, nil); err == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("/installation/repositories without an installation's token: %v", err)
	}

	tree, _, err := anon.Git.GetTree(ctx, "acme", "r00", "main", true)
	if err != nil || len(tree.Entries) != 2 || tree.GetTruncated() || tree.Entries[1].GetPath() != "a/SKILL.md" || tree.Entries[1].GetType() != "blob" {
		t.Errorf("tree: %v %+v", err, tree)
	}
	if top, _, err := anon.Git.GetTree(ctx, "acme", "r00", tree.GetSHA(), false); err != nil || len(top.Entries) != 1 || top.Entries[0].GetType() != "tree" {
		t.Errorf("top-level tree by sha: %v %+v", err, top)
	}
	if huge, _, err := anon.Git.GetTree(ctx, "acme", "huge", "main", true); err != nil || !huge.GetTruncated() || len(huge.Entries) != 1 {
		t.Errorf("truncated tree: %v %+v", err, huge)
	}
	if _, resp, err := anon.Git.GetTree(ctx, "acme", "empty", "main", true); err == nil || resp.StatusCode != http.StatusConflict {
		t.Errorf("empty repository's tree: %v", err)
	}
	if _, resp, err := anon.Git.GetTree(ctx, "acme", "secret", "main", true); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a private repository's tree, anonymously: %v", err)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
