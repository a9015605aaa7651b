package gittest

import (
	"fmt"
	"strings"
	"testing"
)

// DeltaRepo builds, on a new server, a history whose objects delta well (a
// long file edited a little in each of 6 commits, and 5 near-copies of
// it) and repacks it so git stores deltas. It returns the repository and
// its commits, oldest first.
func DeltaRepo(tb testing.TB) (*Repo, []string) {
	tb.Helper()
	r := NewServer(tb).CreateRepo("deltas")
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
