// Package layout checks that the code keeps the layout the README's
// Development table describes: every package has a row, a package imports
// only packages in rows below its own, and every import outside the
// standard library is one its row's "may import" cell names.
package layout

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/skillreg/skillreg/"

var (
	rowRE  = regexp.MustCompile("^\\| `([a-z0-9/._]+)` \\|")
	codeRE = regexp.MustCompile("`([^`]+)`")
)

// row is one line of the Development table.
type row struct {
	pkg string
	// may is the "may import" cell as written.
	may string
}

// rows returns the Development table's rows in order, top first.
func rows(t *testing.T) []row {
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []row
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
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
				cells := strings.Split(strings.Trim(line, "| "), " | ")
				out = append(out, row{pkg: m[1], may: cells[len(cells)-1]})
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// rowOf returns the index of the row that describes pkg: its own, or
// "internal/..." for the test parts.
func rowOf(rows []row, pkg string) int {
	for i, r := range rows {
		if r.pkg == pkg {
			return i
		}
	}
	if strings.HasPrefix(pkg, "internal/") {
		for i, r := range rows {
			if r.pkg == "internal/..." {
				return i
			}
		}
	}
	return -1
}

// isLibrary reports whether an import path is outside the standard
// library and the module: its first element has a dot (a host name).
func isLibrary(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return strings.Contains(first, ".")
}

// allowance is what a "may import" cell lets a package import.
type allowance struct {
	anything bool
	pkgs     map[string]bool // the module's packages, by row name
	libs     []string        // module or package paths of libraries
}

// allows reports whether imp (a full import path) is allowed.
func (a allowance) allows(imp string) bool {
	if a.anything {
		return true
	}
	if dep, ok := strings.CutPrefix(imp, module); ok {
		return a.pkgs[dep]
	}
	if !isLibrary(imp) {
		return true // the standard library
	}
	for _, l := range a.libs {
		if imp == l || strings.HasPrefix(imp, l+"/") {
			return true
		}
	}
	return false
}

// allowances parses every row's "may import" cell. Each `quoted` name in
// a cell is a package of the table or a library's module (or package)
// path; the words around them are commentary. "everything below" allows
// the rows below and every library they may import; "anything" allows
// anything (the test parts). The standard library is always allowed.
func allowances(t *testing.T, table []row) []allowance {
	t.Helper()
	out := make([]allowance, len(table))
	for i := len(table) - 1; i >= 0; i-- {
		r := table[i]
		a := allowance{pkgs: map[string]bool{}}
		if strings.HasPrefix(r.may, "anything") {
			a.anything = true
			out[i] = a
			continue
		}
		for _, m := range codeRE.FindAllStringSubmatch(r.may, -1) {
			name := m[1]
			switch {
			case isLibrary(name):
				a.libs = append(a.libs, name)
			case rowOf(table, name) >= 0 && table[rowOf(table, name)].pkg == name:
				a.pkgs[name] = true
			default:
				t.Errorf("the row of %s names %q in its may-import cell: neither a package of the table nor a module path", r.pkg, name)
			}
		}
		if strings.Contains(r.may, "everything below") {
			for j := i + 1; j < len(table); j++ {
				if strings.HasPrefix(table[j].pkg, "internal/") || table[j].pkg == "deploy" {
					continue
				}
				a.pkgs[table[j].pkg] = true
				a.libs = append(a.libs, out[j].libs...)
			}
		}
		slices.Sort(a.libs)
		a.libs = slices.Compact(a.libs)
		out[i] = a
	}
	return out
}

func TestImportsPointDown(t *testing.T) {
	t.Parallel()
	table := rows(t)
	if len(table) < 10 {
		t.Fatalf("found %d rows in the README's Development table; has its heading moved?", len(table))
	}
	may := allowances(t, table)
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
			if !may[from].allows(imp) {
				t.Errorf("%s imports %s, which its row's may-import cell does not name", pkg, imp)
			}
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

// TestAllowances checks the cell reading on cells of the shapes the
// table uses.
func TestAllowances(t *testing.T) {
	table := []row{
		{pkg: "cmd/skillreg", may: "everything below"},
		{pkg: "mcp", may: "`catalog`, `github.com/modelcontextprotocol/go-sdk` (as sdk)"},
		{pkg: "catalog", may: "`skill`, `golang.org/x/sync/singleflight`"},
		{pkg: "skill", may: "stdlib"},
		{pkg: "internal/...", may: "anything; only tests import it"},
	}
	may := allowances(t, table)
	for _, c := range []struct {
		row  int
		imp  string
		want bool
	}{
		{0, module + "mcp", true},
		{0, module + "skill", true},
		{0, "github.com/modelcontextprotocol/go-sdk/mcp", true},
		{0, "golang.org/x/sync/singleflight", true},
		{0, "golang.org/x/sync/errgroup", false},
		{0, "github.com/labstack/echo/v4", false},
		{1, module + "catalog", true},
		{1, module + "skill", false},
		{1, "github.com/modelcontextprotocol/go-sdk/jsonrpc", true},
		{1, "github.com/modelcontextprotocol/go-sdk-fork/mcp", false},
		{1, "net/http", true},
		{2, "golang.org/x/sync/singleflight", true},
		{2, "golang.org/x/sync", false},
		{3, "gopkg.in/yaml.v3", false},
		{3, "strings", true},
		{4, "gopkg.in/yaml.v3", true},
	} {
		if got := may[c.row].allows(c.imp); got != c.want {
			t.Errorf("%s may import %s: %v, want %v", table[c.row].pkg, c.imp, got, c.want)
		}
	}
}
