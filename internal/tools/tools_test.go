package tools

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFind(t *testing.T) {
	root := t.TempDir()
	t.Setenv("SKILLREG_TOOLS", root)
	if got, want := Dir(), filepath.Join(root, "npm"); got != want {
		t.Fatalf("Dir() = %s, want %s", got, want)
	}
	p := filepath.Join(root, "npm", "node_modules", "x", "package.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Find(t, "node_modules/x/package.json"); got != p {
		t.Fatalf("Find = %s, want %s", got, p)
	}
	if got := NodeModules(t, "x"); got != filepath.Join(root, "npm", "node_modules") {
		t.Fatalf("NodeModules = %s", got)
	}
}
