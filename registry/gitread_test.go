package registry

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	skillcorpus "github.com/skillreg/skillreg/internal/corpus"
)

// A git file is allocated once per read: the bytes read from the pack and
// checked against the blob id are the bytes served (and cached), not a
// copy of them. The publish digests and the search builder read every file
// of a generation this way, and 10,000 random reads of a 10,000-skill git
// source allocated each file twice, 24 MB more for the collector.
func TestGitReadAllocatesTheFileOnce(t *testing.T) {
	f := newGitFixture(t, Options{})
	big := strings.Repeat("0123456789abcdef", 16<<10) // 256 KiB
	f.remote.WriteFiles(map[string]string{"skills/a/big.md": big})
	f.remote.Commit("a big reference")
	f.remote.Push("main")
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")})
	mustSync(t, f.reg, "s")
	ref := mustFile(t, f.reg, "skill://s/a/big.md")
	live := f.reg.Live()
	const reads = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range reads {
		data, err := live.ReadFileCold(context.Background(), ref) // never from the content cache
		if err != nil || string(data) != big {
			t.Fatalf("read: %d bytes, %v", len(data), err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / reads; per > uint64(len(big))*3/2 {
		t.Errorf("a read of a %d KiB git file allocated %d KiB", len(big)>>10, per>>10)
	}
}

// TestGitReadsIntoOneBuffer: a pass over every file of a git source that
// reads each into one reused buffer (archive digests, ReadFileColdInto)
// allocates well under the bytes it reads: each blob is inflated from its
// pack into the caller's buffer, not into a new slice per blob (at
// 100,000 skills that was 300,000 blobs' bytes allocated beside the
// search build, on top of the peak). Counted in bytes allocated
// (runtime.MemStats), which do not depend on timing.
func TestGitReadsIntoOneBuffer(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled pack readers: allocations are not what they are")
	}
	const n = 200
	f := newGitFixture(t, Options{})
	if _, _, err := skillcorpus.Write(filepath.Join(f.remote.WorkDir(), "skills", "scale"), skillcorpus.Options{Skills: n, Shape: skillcorpus.Scale}); err != nil {
		t.Fatal(err)
	}
	f.remote.Commit("corpus")
	f.remote.Push("main")
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")})
	mustSync(t, f.reg, "s")
	ctx := context.Background()
	live := f.reg.Live()
	live.SetContentCacheBytes(-1) // every file read from its pack
	cat := live.Current()
	live.WaitSearch(context.Background(), cat) // the sync's search build, joined: not counted here
	var files []catalog.FileRef
	var fileBytes int64
	for _, ref := range cat.All(catalog.Filter{}) {
		for i := range ref.Skill.Files {
			file := &ref.Skill.Files[i]
			files = append(files, catalog.FileRef{Ref: ref, File: file, URI: ref.Snap.FileURI(ref.Skill, file)})
			fileBytes += file.Size
		}
	}
	if len(files) < 3*n {
		t.Fatalf("%d files, want at least %d", len(files), 3*n)
	}
	buf := make([]byte, 0, 64<<10)
	read := func() {
		for _, file := range files {
			b, err := live.ReadFileColdInto(ctx, file, buf)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(b)) != file.File.Size {
				t.Fatalf("%s: %d bytes, want %d", file.URI, len(b), file.File.Size)
			}
		}
	}
	read() // the pools warm up
	const runs = 3
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		read()
	}
	runtime.ReadMemStats(&after)
	per := int64(after.TotalAlloc-before.TotalAlloc) / runs
	t.Logf("reading %d files (%d bytes) of a git source into one buffer allocates %d bytes", len(files), fileBytes, per)
	if per > fileBytes/4 {
		t.Fatalf("reading %d file bytes of a git source into one buffer allocates %d bytes: want at most a quarter, each blob inflated into the buffer", fileBytes, per)
	}
}
