package publish

import (
	"testing"

	"github.com/skillreg/skillreg/registry"
)

// TestDigestsGoAroundTheContentCache: building a generation's view reads
// every new file for its CRCs and archive digests, which at scale is many
// times the content cache; over a catalog that reads cold, those reads add
// nothing to the cache, and the archives still match their digests.
func TestDigestsGoAroundTheContentCache(t *testing.T) {
	f := newFixture(t, defaultSources(), func(o *Options) {
		live := o.Catalog.(*registry.Registry).Live()
		live.SetContentCacheBytes(1 << 20)
		o.Catalog = live
	})
	f.h.Warm()
	if b, n := f.reg.Live().ContentCacheStats(); n != 0 {
		t.Fatalf("digesting the view cached %d files (%d bytes)", n, b)
	}
	idx := f.v2("/.well-known/agent-skills/index.json")
	if len(idx.Skills) == 0 {
		t.Fatal("empty index")
	}
	for _, e := range idx.Skills {
		if a := f.get(e.URL); a.code != 200 || digestOf(a.body) != e.Digest {
			t.Fatalf("%s: GET %s = %d, digest %s, want %s", e.Name, e.URL, a.code, digestOf(a.body), e.Digest)
		}
	}
}
