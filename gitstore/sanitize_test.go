package gitstore

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestSanitizeKeepsEverySentinel: an error whose remote part is cleaned
// still matches the package's error value it wraps, for every value the
// package declares (read from errors.go, so a new one cannot be missed).
func TestSanitizeKeepsEverySentinel(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			for _, id := range v.Names {
				if strings.HasPrefix(id.Name, "Err") {
					declared[id.Name] = true
				}
			}
		}
		return true
	})
	if len(declared) == 0 {
		t.Fatal("no Err values found in errors.go")
	}
	byName := map[string]error{}
	for _, s := range sentinels {
		for name := range declared {
			if s.Error() == errorText(name) {
				byName[name] = s
			}
		}
	}
	for name := range declared {
		s, ok := byName[name]
		if !ok {
			t.Errorf("%s is not in sentinels: a sanitised error loses it", name)
			continue
		}
		// Remote text with a control character forces a cleaned copy.
		raw := fmt.Errorf("fetch https://example.com/r.git: %w: remote said \x1b[31mno", s)
		clean := sanitize(raw, len("fetch https://example.com/r.git"), Auth{})
		if clean == raw {
			t.Fatalf("%s: nothing was cleaned", name)
		}
		if !errors.Is(clean, s) {
			t.Errorf("sanitised %s no longer matches it: %v", name, clean)
		}
	}
}

// errorText is the message of the package's error value named name.
func errorText(name string) string {
	for _, e := range []struct {
		name string
		err  error
	}{
		{"ErrInvalidPin", ErrInvalidPin}, {"ErrInvalidURL", ErrInvalidURL}, {"ErrRefNotFound", ErrRefNotFound},
		{"ErrRepoNotFound", ErrRepoNotFound}, {"ErrAuth", ErrAuth}, {"ErrNetwork", ErrNetwork},
		{"ErrPathNotFound", ErrPathNotFound}, {"ErrObjectNotFound", ErrObjectNotFound}, {"ErrCorrupt", ErrCorrupt},
		{"ErrBadTree", ErrBadTree}, {"ErrTooLarge", ErrTooLarge}, {"ErrStorage", ErrStorage}, {"ErrClosed", ErrClosed},
	} {
		if e.name == name {
			return e.err.Error()
		}
	}
	return ""
}
