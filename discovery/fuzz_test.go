package discovery_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/discovery"
	"github.com/skillreg/skillreg/internal/deepjson"
	"github.com/skillreg/skillreg/jsonbound"
)

// A page and a tree shaped like GitHub's answers (the fields discovery
// reads, among others it skips).
const (
	pageJSON = `[{"id":1296269,"node_id":"MDEwOlJlcG9zaXRvcnkxMjk2MjY5","name":"skills","full_name":"acme/skills","private":false,` +
		`"owner":{"login":"acme","id":1,"type":"Organization"},"html_url":"https://github.com/acme/skills","fork":false,` +
		`"clone_url":"https://github.com/acme/skills.git","archived":false,"topics":["agent-skills"],"default_branch":"main",` +
		`"permissions":{"admin":false,"push":false,"pull":true}}]`
	installationJSON = `{"total_count":1,"repositories":` + pageJSON + `}`
	treeJSON         = `{"sha":"9fb037999f264ba9a7fc6274d15fa3ae2ab98312","url":"https://api.github.com/repos/acme/skills/git/trees/9fb0",` +
		`"tree":[{"path":"skills","mode":"040000","type":"tree","sha":"1","url":"u"},` +
		`{"path":"skills/review/SKILL.md","mode":"100644","type":"blob","size":30,"sha":"2","url":"u"}],"truncated":false}`
)

func TestDecodeRepos(t *testing.T) {
	t.Parallel()
	for _, body := range []string{pageJSON, installationJSON} {
		repos, err := discovery.DecodeRepos([]byte(body))
		if err != nil || len(repos) != 1 {
			t.Fatalf("DecodeRepos: %v, %+v", err, repos)
		}
		r := repos[0]
		if r.ID != 1296269 || r.FullName != "acme/skills" || r.CloneURL != "https://github.com/acme/skills.git" || r.DefaultBranch != "main" || len(r.Topics) != 1 {
			t.Errorf("decoded %+v", r)
		}
	}
	// Entries that name no repository are dropped: no id, no owner, a
	// clone URL with credentials or of another scheme.
	bad := `[{"id":0,"full_name":"a/b","clone_url":"https://x/a/b.git"},{"id":2,"full_name":"ab","clone_url":"https://x/a/b.git"},` +
		`{"id":3,"full_name":"a/b","clone_url":"https://user:pw@x/a/b.git"},{"id":4,"full_name":"a/b","clone_url":"file:///etc"}]`
	if repos, err := discovery.DecodeRepos([]byte(bad)); err != nil || len(repos) != 0 {
		t.Errorf("bad entries: %v, %+v", err, repos)
	}
	if _, err := discovery.DecodeRepos(deepjson.Arrays(1000)); !errors.Is(err, jsonbound.ErrTooDeep) {
		t.Errorf("1,000 deep: %v", err)
	}
}

func FuzzDecodeRepos(f *testing.F) {
	f.Add([]byte(pageJSON))
	f.Add([]byte(installationJSON))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"repositories":null}`))
	for _, s := range deepjson.Shapes() {
		f.Add(s.JSON)
		if len(s.JSON) < 64<<10 {
			f.Add(deepjson.Embed([]byte(installationJSON), "repositories", s.JSON))
			f.Add(deepjson.Embed([]byte(installationJSON), "x", s.JSON))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		repos, err := discovery.DecodeRepos(body)
		if err != nil {
			return
		}
		if jsonbound.Check(body, jsonbound.Limits{MaxDepth: 16}) != nil {
			t.Fatal("a body over the bounds decoded")
		}
		for _, r := range repos {
			owner, name, ok := strings.Cut(r.FullName, "/")
			u, uerr := url.Parse(r.CloneURL)
			if r.ID <= 0 || !ok || owner == "" || name == "" || strings.Contains(name, "/") || uerr != nil || u.User != nil ||
				(u.Scheme != "https" && u.Scheme != "http") {
				t.Fatalf("decoded an entry that names no repository: %+v", r)
			}
		}
	})
}

func FuzzDecodeTree(f *testing.F) {
	f.Add([]byte(treeJSON))
	f.Add([]byte(`{"tree":[],"truncated":true}`))
	for _, s := range deepjson.Shapes() {
		f.Add(s.JSON)
		if len(s.JSON) < 64<<10 {
			f.Add(deepjson.Embed([]byte(treeJSON), "tree", s.JSON))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		paths, _, err := discovery.DecodeTree(body)
		if err != nil {
			return
		}
		if jsonbound.Check(body, jsonbound.Limits{MaxDepth: 16}) != nil {
			t.Fatal("a body over the bounds decoded")
		}
		if len(paths) > len(body) {
			t.Fatalf("%d paths from %d bytes", len(paths), len(body))
		}
	})
}
