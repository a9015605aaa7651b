package gitstore

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/gitref"
)

// gitID is git's object id of content of the given type.
func gitID(kind string, data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", kind, len(data))
	h.Write(data)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestAnnotatedTagFetchedAndRead: a tag pin through an annotated tag
// resolves to the commit with the tag object's id, the fetch brings the
// tag object, and ReadObject returns the exact bytes git hashed (the
// commit, its tree, the tag), each of its kind.
func TestAnnotatedTagFetchedAndRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"a/SKILL.md": "---\nname: a\n---\n"})
	commit := f.remote.Commit("one")
	f.remote.Push("main")
	f.remote.Tag("v1.0.0", true)
	f.remote.Tag("light", false)
	wantTag := f.remote.Git("rev-parse", "refs/tags/v1.0.0")

	res := syncPin(t, f.repo, gitref.Pin{Kind: gitref.Tag, Value: "v1.0.0"})
	if res.Commit != commit || res.Tag != wantTag {
		t.Fatalf("resolved %+v, want commit %s tag %s", res, commit, wantTag)
	}
	if light := resolve(t, f.repo, gitref.Pin{Kind: gitref.Tag, Value: "light"}); light.Tag != "" || light.Commit != commit {
		t.Fatalf("lightweight tag resolved to %+v", light)
	}
	if sem := resolve(t, f.repo, gitref.Pin{Kind: gitref.Semver, Value: "^1"}); sem.Tag != wantTag {
		t.Fatalf("semver pin resolved to %+v, want tag %s", sem, wantTag)
	}
	if br := resolve(t, f.repo, gitref.Pin{Kind: gitref.Branch, Value: "main"}); br.Tag != "" {
		t.Fatalf("branch pin has a tag: %+v", br)
	}

	for _, want := range []struct{ id, kind string }{{wantTag, "tag"}, {commit, "commit"}} {
		kind, data, err := f.repo.ReadObject(want.id)
		if err != nil {
			t.Fatalf("ReadObject(%s): %v", want.kind, err)
		}
		if kind != want.kind || gitID(kind, data) != want.id {
			t.Fatalf("ReadObject(%s) = %s, id %s", want.id, kind, gitID(kind, data))
		}
		if cli := f.remote.Git("cat-file", want.kind, want.id); strings.TrimSpace(string(data)) != cli {
			t.Fatalf("ReadObject(%s) differs from git cat-file:\n%s\n---\n%s", want.kind, data, cli)
		}
	}
	tree := f.remote.Git("rev-parse", commit+"^{tree}")
	if kind, data, err := f.repo.ReadObject(tree); err != nil || kind != "tree" || gitID(kind, data) != tree {
		t.Fatalf("ReadObject(tree) = %s, %v", kind, err)
	}
	if _, _, err := f.repo.ReadObject(strings.Repeat("0", 40)); !errors.Is(err, ErrObjectNotFound) {
		t.Fatalf("ReadObject(missing) = %v, want ErrObjectNotFound", err)
	}
	if _, _, err := f.repo.ReadObject("HEAD"); !errors.Is(err, ErrObjectNotFound) {
		t.Fatalf("ReadObject(HEAD) = %v, want ErrObjectNotFound", err)
	}

	// Held commit, tag not yet in the store: a fetch brings the tag.
	f.remote.Git("tag", "-a", "-m", "second", "v1.0.1", commit)
	f.remote.Git("push", "--quiet", f.remote.BareDir(), "refs/tags/v1.0.1:refs/tags/v1.0.1")
	second := syncPin(t, f.repo, gitref.Pin{Kind: gitref.Tag, Value: "v1.0.1"})
	if second.Tag == "" || second.Tag == wantTag {
		t.Fatalf("second tag resolved to %+v", second)
	}
	if kind, _, err := f.repo.ReadObject(second.Tag); err != nil || kind != "tag" {
		t.Fatalf("the second tag was not fetched with a held commit: %s, %v", kind, err)
	}

	// Prune keeps the tag objects named beside their commit.
	if err := f.repo.Prune(context.Background(), []string{commit, wantTag}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.repo.ReadObject(wantTag); err != nil {
		t.Fatalf("the kept tag is gone after a prune: %v", err)
	}
	if _, _, err := f.repo.ReadObject(second.Tag); !errors.Is(err, ErrObjectNotFound) {
		t.Fatalf("the tag not kept survived the prune: %v", err)
	}
}
