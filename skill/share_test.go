package skill

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// TestShareJSONSearchesLinearly: pointing a frontmatter's strings into its
// JSON searches a bounded multiple of the JSON however many fields it
// has. 4,000 tags (in the JSON's order) are all shared within one pass of
// it; 2,000 metadata entries out of the JSON's order (the frontmatter
// keeps them sorted by key) stop at the bound, where each used to search
// the whole JSON.
func TestShareJSONSearchesLinearly(t *testing.T) {
	parse := func(lines func(b *strings.Builder)) *Frontmatter {
		t.Helper()
		var b strings.Builder
		b.WriteString("---\nname: many\ndescription: Many fields.\n")
		lines(&b)
		b.WriteString("---\nbody\n")
		fm, _, err := ParseSkillMD([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		return fm
	}
	tags := parse(func(b *strings.Builder) {
		b.WriteString("tags:\n")
		for i := range 4000 {
			fmt.Fprintf(b, "  - t%04d\n", 4000-i)
		}
	})
	js := unsafe.String(unsafe.SliceData(tags.JSON), len(tags.JSON))
	if len(tags.Tags) != 4000 {
		t.Fatalf("%d tags", len(tags.Tags))
	}
	for _, tag := range tags.Tags {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(tag))); p < uintptr(unsafe.Pointer(unsafe.StringData(js))) || p >= uintptr(unsafe.Pointer(unsafe.StringData(js)))+uintptr(len(js)) {
			t.Fatalf("tag %q is a copy beside the JSON", tag)
		}
	}
	if n := tags.shareJSON(); n > len(js) {
		t.Errorf("sharing 4,000 tags in the JSON's order searched %d bytes, more than the JSON's %d", n, len(js))
	}

	meta := parse(func(b *strings.Builder) {
		b.WriteString("metadata:\n")
		for i := range 2000 {
			fmt.Fprintf(b, "  k%04d: v%04d\n", 2000-i, i)
		}
	})
	if len(meta.Metadata) != 2000 {
		t.Fatalf("%d metadata entries", len(meta.Metadata))
	}
	if n, most := meta.shareJSON(), shareLimit(len(meta.JSON))+2*len(meta.JSON); n > most {
		t.Errorf("sharing 2,000 metadata entries searched %d bytes, more than %d (the bound and one field)", n, most)
	}
}
