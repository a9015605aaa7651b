package publish

import (
	"context"
	"testing"
	"unicode/utf16"
)

// TestViewBuildAllocations: the view of a generation whose skills the view
// before already digested (every sync's) allocates per skill what the view
// keeps and its indexes, not a layout of the "-all" archive (at 100,000
// skills that was 300,000 layout files and names on every sync), a
// formatted key or a rune copy of each description. Counted in
// allocations, which do not depend on timing.
func TestViewBuildAllocations(t *testing.T) {
	const n = 300
	reg := corpusRegistry(t, n)
	h, err := New(Options{Catalog: reg.Live()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prev := h.view(ctx)
	cat := reg.Live().Current()
	var v *view
	allocs := testing.AllocsPerRun(5, func() { v = h.buildView(ctx, cat, prev) })
	if len(v.byZip) != n {
		t.Fatalf("%d skills digested, want %d", len(v.byZip), n)
	}
	per := allocs / n
	t.Logf("a view build from the one before: %.1f allocations a skill", per)
	const bound = 5
	if per > bound {
		t.Fatalf("a view build from the one before makes %.1f allocations a skill, want at most %d", per, bound)
	}
}

// TestKeysWithoutLayouts: the keys hashed without a layout are the keys of
// the layouts.
func TestKeysWithoutLayouts(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	v := f.h.view(context.Background())
	for _, src := range []string{"team", "other"} {
		if got, want := allLayoutKey(v.pluginMembers(src)), layoutKey(v.allLayout(src)); got != want {
			t.Errorf("%s: all-layout key %x, want %x", src, got, want)
		}
	}
	for _, s := range []string{"", "plain", "naïve café", "emoji 😀 and 𝄞", "bad \xff\xfe utf-8", "\xed\xa0\x80 surrogate"} {
		if got, want := utf16Len(s), len(utf16.Encode([]rune(s))); got != want {
			t.Errorf("utf16Len(%q) = %d, want %d", s, got, want)
		}
	}
}
