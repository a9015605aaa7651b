package registry

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
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
