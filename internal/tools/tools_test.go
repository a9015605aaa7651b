package tools

import (
	"path/filepath"
	"testing"

	"github.com/skillreg/skillreg/internal/testkit"
)

func TestFind(t *testing.T) {
	root := t.TempDir()
	t.Setenv("SKILLREG_TOOLS", root)
	if got, want := Dir(), filepath.Join(root, "npm"); got != want {
		t.Fatalf("Dir() = %s, want %s", got, want)
	}
	testkit.WriteFiles(t, root, map[string]string{"npm/node_modules/x/package.json": "{}"})
	p := filepath.Join(root, "npm", "node_modules", "x", "package.json")
	if got := Find(t, "node_modules/x/package.json"); got != p {
		t.Fatalf("Find = %s, want %s", got, p)
	}
	if got := NodeModules(t, "x"); got != filepath.Join(root, "npm", "node_modules") {
		t.Fatalf("NodeModules = %s", got)
	}
}
