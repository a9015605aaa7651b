package publish

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skillreg/skillreg/catalog"
)

// holdingCatalog holds the first file read for a digest until released.
type holdingCatalog struct {
	*countingCatalog
	first   atomic.Bool
	held    chan struct{} // closed once the first read is held
	release chan struct{}
}

func (c *holdingCatalog) ReadFileCold(ctx context.Context, f catalog.FileRef) ([]byte, error) {
	if c.first.CompareAndSwap(false, true) {
		close(c.held)
		<-c.release
	}
	return c.countingCatalog.ReadFileCold(ctx, f)
}

// TestWarmsDoNotPileUp: a generation swapped in while a Warm still
// builds the view of the one before is built after it, by that Warm, from
// its digests: only what changed is read again. A build of its own beside
// the first, with no view to take digests from, would read every file
// again, and one more for each swap meanwhile: at 100,000 skills, views
// piled up past a gigabyte.
func TestWarmsDoNotPileUp(t *testing.T) {
	var hc *holdingCatalog
	f := newFixture(t, defaultSources(), func(o *Options) {
		hc = &holdingCatalog{
			countingCatalog: &countingCatalog{Catalog: o.Catalog, reads: map[string]int{}},
			held:            make(chan struct{}),
			release:         make(chan struct{}),
		}
		o.Catalog = hc
	})
	warmed := make(chan struct{})
	go func() { f.h.Warm(); close(warmed) }()
	<-hc.held // the first generation's view is being built
	old := f.reg.Current()
	// A new file: the first generation's files stay readable as it states
	// them. Two swaps, each warmed.
	for i, name := range []string{"more.md", "most.md"} {
		if err := os.WriteFile(filepath.Join(f.dirs["team"], "deploy", "references", name), []byte("# More\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		f.sync("team")
		if f.reg.Current() == old {
			t.Fatalf("no new generation after change %d", i)
		}
		f.h.Warm()
	}
	close(hc.release)
	<-warmed
	reads := hc.take()
	if len(reads) == 0 {
		t.Fatal("nothing read")
	}
	for uri, n := range reads {
		u, err := catalog.ParseURI(uri)
		if err != nil {
			t.Fatal(err)
		}
		want := 1 // its skill archive, digested once for both views
		if u.Source == "team" && strings.HasPrefix(u.Path, "deploy/") && u.Path != "deploy/references/more.md" && u.Path != "deploy/references/most.md" {
			want = 2 // the changed skill's, once a view
		}
		if n != want {
			t.Errorf("%s read %d times, want %d", uri, n, want)
		}
	}
	cur := f.reg.Current()
	if v := f.h.view(context.Background()); v.cat != cur {
		t.Fatalf("view of generation %d, want %d", v.cat.Gen, cur.Gen)
	}
	if reads := hc.take(); len(reads) != 0 {
		t.Fatalf("the newest generation was not warmed: its first request read %d files", len(reads))
	}
}
