package gitstore

import (
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
)

// TestDeltifiedServer syncs from a server whose packs are full of deltas
// (as hosted services' are), first whole, then incrementally.
func TestDeltifiedServer(t *testing.T) {
	t.Parallel()
	r, commits := gittest.DeltaRepo(t)
	pool := newPool(t, t.TempDir())
	repo, err := pool.Repo(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	first := resolveFetch(t, repo, commits[1])
	want := snapshotCLI(t, r, commits[1])
	if got := snapshot(t, repo, first, ""); !equalMaps(got, want) {
		t.Fatal("deltified initial snapshot differs")
	}
	last := resolveFetch(t, repo, commits[len(commits)-1])
	if got := snapshot(t, repo, last, ""); !equalMaps(got, snapshotCLI(t, r, last)) {
		t.Fatal("deltified incremental snapshot differs")
	}
	if err := repo.Prune(t.Context(), []string{last}); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, repo, last, ""); !equalMaps(got, snapshotCLI(t, r, last)) {
		t.Fatal("snapshot after prune differs")
	}
}

func resolveFetch(t *testing.T, repo *Repo, commit string) string {
	t.Helper()
	if err := repo.Fetch(t.Context(), Resolved{Commit: commit}, Auth{}); err != nil {
		t.Fatal(err)
	}
	return commit
}

// snapshotCLI lists a commit's files with the git CLI, the reference.
func snapshotCLI(t *testing.T, r *gittest.Repo, commit string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(r.GitBare("ls-tree", "-r", commit), "\n") {
		meta, path, _ := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		data, err := gitCmd("-C", r.BareDir(), "cat-file", "blob", f[2]).Output()
		if err != nil {
			t.Fatal(err)
		}
		out[path] = string(data)
	}
	return out
}
