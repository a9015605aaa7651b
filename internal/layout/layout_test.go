// Package layout checks that the code keeps the layout the README's
// Development table describes: every package has a row, and a package
// imports only packages in rows below its own.
package layout

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/skillreg/skillreg/"

var rowRE = regexp.MustCompile("^\\| `([a-z0-9/._]+)` \\|")

// rows returns the Development table's package names in order, top first.
func rows(t *testing.T) []string {
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "## Development":
			in = true
		case in && strings.HasPrefix(line, "## "):
			return out
		case in && strings.HasPrefix(line, "See `../shared/DESIGN.md`"):
			return out
		case in:
			if m := rowRE.FindStringSubmatch(line); m != nil {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// rowOf returns the index of the row that describes pkg: its own, or
// "internal/..." for the test parts.
func rowOf(rows []string, pkg string) int {
	for i, r := range rows {
		if r == pkg {
			return i
		}
	}
	if strings.HasPrefix(pkg, "internal/") {
		for i, r := range rows {
			if r == "internal/..." {
				return i
			}
		}
	}
	return -1
}

func TestImportsPointDown(t *testing.T) {
	t.Parallel()
	table := rows(t)
	if len(table) < 10 {
		t.Fatalf("found %d rows in the README's Development table; has its heading moved?", len(table))
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		from := rowOf(table, pkg)
		if from < 0 {
			t.Errorf("package %s has no row in the README's Development table", pkg)
			continue
		}
		if strings.HasPrefix(pkg, "internal/") {
			continue // test parts may import anything
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			to := rowOf(table, dep)
			switch {
			case strings.HasPrefix(dep, "internal/"):
				t.Errorf("%s imports %s: only tests and the bench may import internal packages", pkg, dep)
			case to < 0:
				t.Errorf("%s imports %s, which has no row", pkg, dep)
			case to <= from:
				t.Errorf("%s imports %s, whose row is not below its own (%d <= %d): the arrow points up", pkg, dep, to, from)
			}
		}
	}
}
