package config

import (
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/gitref"
)

func TestGitHubTemplate(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
github:
  discovery_poll: 2m
sources:
  - name: acme
    github: {owner: acme, topic: agent-skills, include: ["skills-*", "*-skills"], exclude: ["*-sandbox"], forks: true}
    ref: {release: latest}
    path: skills
    auth: {token_env: ACME_TOKEN}
    public: true
clients:
  - name: team
    token_sha256: `+strings.Repeat("a", 64)+`
    sources: [acme]
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sources[0]
	if g := s.GitHub; g == nil || g.Owner != "acme" || g.Topic != "agent-skills" || len(g.Include) != 2 || !g.Forks || g.Archived {
		t.Fatalf("github %+v", s.GitHub)
	}
	if s.Pin.Kind != gitref.Release || s.Poll.D() != DefaultGitPoll || c.GitHub.DiscoveryPoll.D() != 2*time.Minute {
		t.Errorf("pin %v poll %v discovery_poll %v", s.Pin, s.Poll.D(), c.GitHub.DiscoveryPoll.D())
	}
	c, err = Parse([]byte("sources:\n  - name: acme\n    github: {owner: acme}\n"), "")
	if err != nil || c.GitHub.DiscoveryPoll.D() != DefaultDiscoveryPoll {
		t.Errorf("default discovery_poll: %v, %v", err, c)
	}
}

func TestGitHubTemplateErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ yaml, want string }{
		{"sources:\n  - name: a\n    github: {owner: acme}\n    url: https://example.com/x.git\n", `line 2: sources[0]: set exactly one of dir, url and github`},
		{"sources:\n  - name: a\n    github: {owner: acme}\n    dir: " + dir + "\n", `sources[0]: set exactly one of dir, url and github`},
		{"sources:\n  - name: a\n    github: {}\n", `sources[0].github.owner: "" is not a GitHub organisation or user login`},
		{"sources:\n  - name: a\n    github: {owner: acme/skills}\n", `sources[0].github.owner: "acme/skills"`},
		{"sources:\n  - name: a\n    github: {owner: acme, topic: Agent Skills}\n", `sources[0].github.topic`},
		{"sources:\n  - name: a\n    github: {owner: acme, include: [\"[\"]}\n", `sources[0].github.include[0]: "["`},
		{"sources:\n  - name: a\n    github: {owner: acme, exclude: [\"acme/x\"]}\n", `sources[0].github.exclude[0]`},
		{"sources:\n  - name: a\n    github: {owner: acme, colour: red}\n", `line 3: unknown key "colour"`},
		{"sources:\n  - name: a\n    github: {owner: acme}\n    ref: {commit: " + strings.Repeat("a", 40) + "}\n", `sources[0].ref.commit: a commit names one repository's history`},
		{"sources:\n  - name: a\n    github: {owner: acme}\n    path: ../x\n", `sources[0].path: "../x" must be a directory inside the repository`},
		{"sources:\n  - name: a\n    github: {owner: acme}\n    auth: {}\n", `sources[0].auth: set exactly one of token_env and token_file`},
		{"github:\n  discovery_poll: 1s\nsources:\n  - name: a\n    github: {owner: acme}\n", `github.discovery_poll: 1s is below the minimum 10s`},
		{"sources:\n  - name: a\n", `set one of dir (a local directory), url (a git repository) and github (discovered repositories)`},
	} {
		_, err := Parse([]byte(c.yaml), dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}
