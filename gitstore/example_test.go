package gitstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
)

// Example syncs one commit of a repository the way the registry does:
// open a pool, list the remote's refs, resolve a pin, fetch the commit
// (only what is new), walk its tree and read a file, all from the bare
// object store, without a working tree.
func Example() {
	dir, err := os.MkdirTemp("", "gitstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	remote := makeRemote(dir) // a bare repository with one skill

	pool, err := gitstore.NewPool(filepath.Join(dir, "stores"), gitstore.PoolOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	repo, err := pool.Repo("file://" + remote)
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	refs, err := repo.ListRemote(ctx, gitstore.Auth{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("default branch:", refs.DefaultBranch())
	res, err := refs.Resolve(gitref.Pin{Kind: gitref.Branch, Value: "main"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resolved:", res.Ref, res.Commit[:12])

	if err := repo.Fetch(ctx, res, gitstore.Auth{}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", repo.HasCommit(res.Commit))

	entries, err := repo.Walk(res.Commit, "skills")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Mode, e.Path)
	}
	data, err := repo.ReadBlob(entries[0].Blob)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(data))

	// Output:
	// default branch: main
	// resolved: refs/heads/main 77950ff09224
	// held: true
	// 100644 hello/SKILL.md
	// 100755 hello/run.sh
	// ---
	// name: hello
	// description: Says hello.
	// ---
}

// makeRemote makes a bare repository under dir with the git CLI and
// returns its path. Fixed names and dates give its commit the same id on
// every run; the machine's git configuration is kept out.
func makeRemote(dir string) string {
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "skills.git")
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=Example", "GIT_AUTHOR_EMAIL=example@example.com", "GIT_AUTHOR_DATE=2026-01-01T12:00:00Z",
			"GIT_COMMITTER_NAME=Example", "GIT_COMMITTER_EMAIL=example@example.com", "GIT_COMMITTER_DATE=2026-01-01T12:00:00Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q", "-b", "main", work)
	files := map[string]string{
		"skills/hello/SKILL.md": "---\nname: hello\ndescription: Says hello.\n---\n",
		"skills/hello/run.sh":   "#!/bin/sh\necho hello\n",
	}
	for name, content := range files {
		p := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			log.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			log.Fatal(err)
		}
	}
	git("-C", work, "add", "-A")
	git("-C", work, "commit", "-q", "-m", "a skill")
	git("clone", "-q", "--bare", work, bare)
	return bare
}
