package search_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/corpus"
)

// taskWords are ways users name each task of the generated corpus.
var taskWords = map[string][]string{
	"troubleshooting": {"troubleshoot", "troubleshooting", "fix problems with"}, "performance-tuning": {"tune", "performance tuning", "make faster"},
	"upgrade": {"upgrade", "upgrading"}, "migration": {"migrate", "migration"}, "monitoring": {"monitor", "monitoring", "dashboards for"},
	"hardening": {"harden", "security hardening", "lock down"}, "backup-restore": {"back up", "backup and restore", "restore"},
	"testing": {"test", "tests for", "testing"}, "code-review": {"review", "code review of"}, "local-setup": {"local setup", "set up locally"},
	"ci-pipeline": {"ci pipeline", "continuous integration for"}, "cost-optimization": {"reduce cost", "cost optimization"},
	"runbook": {"runbook", "on-call for"}, "capacity-planning": {"capacity planning", "plan capacity"}, "documentation": {"document", "docs for"},
	"debugging": {"debug", "debugging"}, "best-practices": {"best practices", "conventions for"}, "deployment": {"deploy", "deployment of"},
	"configuration": {"configure", "configuration"}, "audit": {"audit", "compliance audit"}, "alerting": {"alerts for", "alerting"},
	"onboarding": {"onboarding", "learn"}, "refactoring": {"refactor", "refactoring"}, "design": {"design", "architecture of"},
}

// typo makes one edit inside w: a deletion, a transposition or a
// substitution.
func typo(r *rand.Rand, w string) string {
	if len(w) < 5 {
		return w
	}
	i := 1 + r.IntN(len(w)-2)
	switch r.IntN(3) {
	case 0:
		return w[:i] + w[i+1:]
	case 1:
		return w[:i] + string(w[i+1]) + string(w[i]) + w[i+2:]
	}
	return w[:i] + "e" + w[i+1:]
}

// generatedQueries builds queries mechanically from the skills' technology,
// subject and task: words shuffled, some dropped, some cut to a prefix or
// given a typo. Many are ambiguous once a word is dropped, so the figures
// are lower than the hand-written set's; they guard against regressions
// and against tuning the ranking to the hand-written queries.
func generatedQueries(skills []corpus.RealisticSkill, n int) []qualityQuery {
	r := rand.New(rand.NewPCG(9, 9))
	var out []qualityQuery
	for _, i := range r.Perm(len(skills))[:n] {
		s := skills[i]
		if s.Deprecated || s.Aspect == "" {
			continue
		}
		tw := taskWords[s.Task]
		words := []string{tw[r.IntN(len(tw))], strings.ReplaceAll(s.Tech, "-", " ")}
		aspect := strings.Fields(s.Aspect)
		for _, w := range aspect {
			switch {
			case len(aspect) > 1 && r.IntN(4) == 0:
				continue
			case r.IntN(6) == 0:
				w = typo(r, w)
			case len(w) > 5 && r.IntN(8) == 0:
				w = w[:len(w)-2]
			}
			words = append(words, w)
		}
		r.Shuffle(len(words), func(a, b int) { words[a], words[b] = words[b], words[a] })
		out = append(out, qualityQuery{strings.Join(words, " "), s.Name})
	}
	return out
}

func TestGeneratedQueries(t *testing.T) {
	skills, docs := generated(t)
	queries := generatedQueries(skills, 400)
	p1, in5 := quality(t, split(docs, 4), queries, false)
	t.Logf("%d generated queries: P@1 %.3f, in top 5 %.3f", len(queries), p1, in5)
	if !raceEnabled { // the peer's scans take long under the race detector and test nothing of ours
		peerP1, peerIn5 := peerQuality(docs, queries)
		t.Logf("FastMCP scoring on the same queries: P@1 %.3f, in top 5 %.3f", peerP1, peerIn5)
	}
	if in5 < 0.9 {
		t.Errorf("wanted skill in the top 5 for %.3f of the generated queries, want at least 0.9", in5)
	}
}
