package config

import (
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/skillreg/skillreg/gitref"
)

// GitHubSource is a source template: instead of one repository, every
// repository of an owner on the GitHub host that matches, each one a git
// source of its own with the template's ref, path, poll, timeout, auth,
// public and verify settings. The template's name is the group's: access
// rules and clients that name it see every repository it discovers.
type GitHubSource struct {
	// Owner is the organisation or user whose repositories are listed.
	Owner string `yaml:"owner"`
	// Topic, when set, is a topic a repository must carry.
	Topic string `yaml:"topic"`
	// Include and Exclude are globs on repository names (path.Match
	// syntax, case-insensitive): with Include, a repository must match
	// one; matching an Exclude leaves it out.
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
	// Archived and Forks include archived repositories and forks, which
	// are left out by default.
	Archived bool `yaml:"archived"`
	Forks    bool `yaml:"forks"`
}

// DefaultDiscoveryPoll is github.discovery_poll's default: how often each
// template's owner is listed again.
const DefaultDiscoveryPoll = 10 * time.Minute

// MinDiscoveryPoll bounds github.discovery_poll from below: a listing
// costs a request per page (a 304 is free, but still a round trip).
const MinDiscoveryPoll = 10 * time.Second

// GitHub owner logins: letters, digits and single hyphens, at most 39.
var ownerRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}$`)

// validateDiscovery checks a source template (s.GitHub set) and the
// discovery settings; it also parses the template's pin. Its errors name
// the key.
func (c *Config) validateDiscovery(at string, s *Source, bad func(format string, args ...any)) {
	g := s.GitHub
	if s.Dir != "" || s.URL != "" {
		bad("%s: set exactly one of dir, url and github", at)
	}
	if !ownerRE.MatchString(g.Owner) {
		bad("%s.github.owner: %q is not a GitHub organisation or user login", at, g.Owner)
	}
	if g.Topic != "" && (len(g.Topic) > 50 || strings.ToLower(g.Topic) != g.Topic || strings.ContainsAny(g.Topic, " /")) {
		bad("%s.github.topic: %q is not a GitHub topic (lowercase letters, digits and hyphens, at most 50)", at, g.Topic)
	}
	for key, globs := range map[string][]string{"include": g.Include, "exclude": g.Exclude} {
		for i, glob := range globs {
			if _, err := path.Match(glob, ""); err != nil || glob == "" || strings.Contains(glob, "/") {
				bad("%s.github.%s[%d]: %q is not a glob on repository names, such as skills-*", at, key, i, glob)
			}
		}
	}
	var err error
	if s.Pin, err = s.Ref.pin(); err != nil {
		bad("%s.ref: %v", at, err)
	} else if s.Pin.Kind == gitref.Commit {
		bad("%s.ref.commit: a commit names one repository's history; a template takes a branch, tag, semver or release", at)
	}
	if s.Path != "" {
		p := path.Clean(strings.ReplaceAll(s.Path, "\\", "/"))
		if path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			bad("%s.path: %q must be a directory inside the repository", at, s.Path)
		}
	}
	if a := s.Auth; a != nil && (a.TokenEnv == "") == (a.TokenFile == "") {
		bad("%s.auth: set exactly one of token_env and token_file", at)
	}
	if c.GitHub.DiscoveryPoll == 0 {
		c.GitHub.DiscoveryPoll = Duration(DefaultDiscoveryPoll)
	}
	if c.GitHub.DiscoveryPoll.D() < MinDiscoveryPoll {
		bad("github.discovery_poll: %s is below the minimum %s", c.GitHub.DiscoveryPoll.D(), MinDiscoveryPoll)
	}
}
