package gitstore

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
)

// deltaRepo builds a history whose objects delta well (a long file edited
// a little in every commit) and repacks it so git stores deltas. (packdb's
// tests build the same history to index its packs directly.)
func deltaRepo(t *testing.T) (*gittest.Repo, []string) {
	t.Helper()
	srv := gittest.NewServer(t)
	r := srv.CreateRepo("deltas")
	var lines []string
	for i := range 300 {
		lines = append(lines, fmt.Sprintf("line %d of a long document that changes slowly", i))
	}
	var commits []string
	for c := range 6 {
		lines[c*40] = fmt.Sprintf("edited in commit %d", c)
		files := map[string]string{"doc.txt": strings.Join(lines, "\n")}
		for d := range 5 {
			files[fmt.Sprintf("dir%d/copy.txt", d)] = strings.Join(lines[d:], "\n")
		}
		r.WriteFiles(files)
		commits = append(commits, r.Commit(fmt.Sprint("c", c)))
	}
	r.Push("main")
	r.GitBare("repack", "-a", "-d", "-f", "--depth=50", "--window=50", "--quiet")
	return r, commits
}

// TestDeltifiedServer syncs from a server whose packs are full of deltas
// (as hosted services' are), first whole, then incrementally.
func TestDeltifiedServer(t *testing.T) {
	t.Parallel()
	r, commits := deltaRepo(t)
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
		data, err := exec.Command("git", "-C", r.BareDir(), "cat-file", "blob", f[2]).Output()
		if err != nil {
			t.Fatal(err)
		}
		out[path] = string(data)
	}
	return out
}
