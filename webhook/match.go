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

// keys returns the normalised forms (gitref.Key) under which the payload's
// repository can be recognised.
func (r repository) keys(host string) []string {
	var keys []string
	for _, u := range r.urls {
		if k := gitref.Key(u); k != "" {
			keys = append(keys, k)
		}
	}
	if name := strings.Trim(r.fullName, "/"); name != "" && host != "" {
		if k := gitref.Key(host + "/" + name); k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// sameRepo returns the targets whose repository is the payload's: one of
// the payload's spellings has the target's key.
func sameRepo(targets []Target, repo repository, host string) []Target {
	keys := repo.keys(host)
	if len(keys) == 0 {
		return nil
	}
	var out []Target
	for _, t := range targets {
		if t.Repo.IsZero() {
			continue
		}
		if _, ok := slices.BinarySearch(keys, t.Repo.Key()); ok {
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
