package webhook

import (
	"slices"
	"strings"

	"github.com/skillreg/skillreg/gitref"
)

// Target is one git source as the webhook sees it: its name, and the
// repository and pin config validated when it was loaded.
type Target struct {
	Source string      // the source's name
	Repo   gitref.Repo // the source's remote
	Pin    gitref.Pin  // how the source chooses its commit
}

// Sources lists the current git sources. It is asked on every delivery, so
// a configuration reload takes effect at once.
type Sources interface {
	Targets() []Target
}

const (
	headsPrefix = "refs/heads/"
	tagsPrefix  = "refs/tags/"
)

// repository is what a payload says about its repository, reduced to what
// matching needs.
type repository struct {
	fullName      string
	urls          []string // clone, ssh, git, html and svn URLs as sent
	defaultBranch string   // "" when the payload does not say
}

// spellings returns the URLs under which the payload names its
// repository: the clone, ssh, git, html and svn URLs, and full_name on the
// GitHub host.
func (r repository) spellings(host string) []string {
	out := slices.Clone(r.urls)
	if name := strings.Trim(r.fullName, "/"); name != "" && host != "" {
		out = append(out, host+"/"+name)
	}
	return out
}

// sameRepo returns the targets whose repository is the payload's, as
// gitref.Repo.Match (the one test of it) decides.
func sameRepo(targets []Target, repo repository, host string) []Target {
	spellings := repo.spellings(host)
	var out []Target
	for _, t := range targets {
		if slices.ContainsFunc(spellings, t.Repo.Match) {
			out = append(out, t)
		}
	}
	return out
}

// refAffects reports whether a change of the full ref name moves target t.
// defaultBranch is the repository's default branch, "" when unknown (then a
// default-pinned source is synced for any branch: a sync that finds its
// commit unchanged costs one ref listing).
func refAffects(t Target, ref, defaultBranch string) bool {
	return t.Pin.MovedBy(ref, defaultBranch)
}

// names returns the sorted, distinct source names of targets.
func names(targets []Target) []string {
	out := make([]string, 0, len(targets))
	for _, t := range targets {
		out = append(out, t.Source)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
