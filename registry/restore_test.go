package registry

import (
	"context"
	"errors"
	"testing"

	"github.com/skillreg/skillreg/catalog"
)

// TestRestoreStopsWithItsContext: a restore whose context ends (a signal
// during a slow start) stops, serves nothing and says why, instead of
// checking every stored file first.
func TestRestoreStopsWithItsContext(t *testing.T) {
	r1, root := newDirRegistry(t, Options{})
	snap, _ := r1.Current().Snapshot("local")
	stored := *snap
	ps := []catalog.Persisted{{Snapshot: &stored, State: stateOf(r1, "local")}}

	r2 := New(Options{})
	r2.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := r2.Restore(ctx, ps)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Restore under an ended context = %+v, %v; want context.Canceled", rep, err)
	}
	if n := r2.Current().Len(catalog.Filter{}); n != 0 || r2.Current().Gen != 0 {
		t.Fatalf("a stopped restore served %d skills (generation %d)", n, r2.Current().Gen)
	}

	// The same records under a live context are served.
	r3 := New(Options{})
	r3.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	stored2 := *snap
	rep, err = r3.Restore(context.Background(), []catalog.Persisted{{Snapshot: &stored2, State: ps[0].State}})
	if err != nil || len(rep.Restored) != 1 || r3.Current().Len(catalog.Filter{}) != 2 {
		t.Fatalf("restore: %+v, %v, %d skills", rep, err, r3.Current().Len(catalog.Filter{}))
	}
}
