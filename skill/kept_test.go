package skill

import (
	"context"
	"runtime"
	"testing"
	"unsafe"

	"github.com/skillreg/skillreg/internal/corpus"
)

// TestFrontmatterSharesJSON: the string fields of a parsed frontmatter
// are the bytes of its JSON where the JSON holds them as they are, not
// copies kept beside it; a value the JSON escapes is still itself.
func TestFrontmatterSharesJSON(t *testing.T) {
	md := "---\nname: pdf\ndescription: Fill PDF forms.\nlicense: MIT\nversion: 1.2.0\ntags: [docs, forms]\nmetadata:\n  owner: \"team \\\"a\\\"\"\n---\nbody\n"
	fm, _, err := ParseSkillMD([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(fm.JSON)))
	hi := lo + uintptr(len(fm.JSON))
	inside := func(what, s string) {
		t.Helper()
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p < lo || p+uintptr(len(s)) > hi {
			t.Errorf("%s %q is a copy beside the JSON %s", what, s, fm.JSON)
		}
	}
	inside("name", fm.Name)
	inside("description", fm.Description)
	inside("version", fm.Version)
	inside("metadata key", fm.Metadata[0].Key)
	for _, tag := range fm.Tags {
		inside("tag", tag)
	}
	if v, _ := fm.Metadata.Get("owner"); v != `team "a"` {
		t.Errorf("metadata owner %q, want %q", v, `team "a"`)
	}
	if fm.Name != "pdf" || fm.Description != "Fill PDF forms." || fm.Version != "1.2.0" || len(fm.Tags) != 2 || fm.Tags[1] != "forms" {
		t.Errorf("fields %+v", fm)
	}
}

// TestIndexKeepsLittlePerSkill counts the heap an index of skills of the
// scale shape (three files each) keeps while its result lives: what every
// skill of a catalog costs the daemon for as long as it is served. Each
// file's digest is its 32 bytes inside the File, and the frontmatter's
// strings share its JSON: 954-975 bytes a skill here. With digests as
// 71-byte strings it kept 1,276, and with the decoder's copies of the
// frontmatter's strings beside the JSON 1,051.
func TestIndexKeepsLittlePerSkill(t *testing.T) {
	const n = 1000
	dir := t.TempDir()
	if _, _, err := corpus.Write(dir, corpus.Options{Skills: n, Shape: corpus.Scale}); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := Index(context.Background(), DirTree{Root: dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(res.Skills) != n {
		t.Fatalf("%d skills, want %d", len(res.Skills), n)
	}
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("an index of %d skills keeps %d bytes a skill", n, per)
	const bound = 1020
	if per > bound {
		t.Errorf("an index keeps %d bytes a skill, want at most %d", per, bound)
	}
	runtime.KeepAlive(res)
}
