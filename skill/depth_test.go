package skill

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// nestedFlow is a frontmatter whose key x holds a flow list nested depth
// levels (the frontmatter mapping is one more).
func nestedFlow(depth int) []byte {
	return md("name: a\ndescription: d\nx: " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n")
}

// nestedBlock nests block mappings depth levels under x.
func nestedBlock(depth int) []byte {
	var b strings.Builder
	b.WriteString("name: a\ndescription: d\n")
	for i := range depth {
		b.WriteString(strings.Repeat(" ", i) + "x:\n")
	}
	b.WriteString(strings.Repeat(" ", depth) + "z: 1\n")
	return md(b.String())
}

// nestedCompact nests block lists on one line ("- - - a").
func nestedCompact(depth int) []byte {
	return md("name: a\ndescription: d\nx:\n  " + strings.Repeat("- ", depth) + "a\n")
}

func TestFrontmatterDepth(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"flow 63", nestedFlow(MaxFrontmatterDepth - 1), true},
		{"flow 64", nestedFlow(MaxFrontmatterDepth), false},
		{"block 63", nestedBlock(MaxFrontmatterDepth - 1), true},
		{"block 64", nestedBlock(MaxFrontmatterDepth), false},
		{"compact 63", nestedCompact(MaxFrontmatterDepth - 1), true},
		{"compact 64", nestedCompact(MaxFrontmatterDepth), false},
		{"flow 1500", nestedFlow(1500), false},
		{"flow 30000", nestedFlow(30000), false}, // past yaml.v3's own 10,000
		{"compact 20000", nestedCompact(20000), false},
		{"mixed", md("name: a\ndescription: d\nx:\n  - {a: [" + strings.Repeat("{b: [", 40) + "1" + strings.Repeat("]}", 40) + "]}\n"), false},
	} {
		fm, _, err := ParseSkillMD(c.data)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if len(fm.JSON) == 0 {
				t.Errorf("%s: no JSON", c.name)
			}
			continue
		}
		var p *Problem
		if !errors.As(err, &p) || p.Rule != RuleFrontmatter {
			t.Errorf("%s: %v, want rule frontmatter", c.name, err)
		}
		if _, err := ReadFrontmatter(c.data); err == nil {
			t.Errorf("%s: ReadFrontmatter accepted it", c.name)
		}
	}
}

// TestFrontmatterWorstCaseMemory parses the costliest frontmatter blocks
// that fit the 64 KiB limit (deep flow, deep compact lists, an alias bomb)
// and bounds what each allocates: a bound on bytes, not on time.
func TestFrontmatterWorstCaseMemory(t *testing.T) {
	fill := func(unit string) string { return strings.Repeat(unit, (MaxFrontmatterBytes-64)/len(unit)) }
	half := (MaxFrontmatterBytes - 64) / 2
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for c := 'b'; c <= 'z'; c++ {
		bomb += string(c) + ": &" + string(c) + " [" + strings.Repeat("*"+string(c-1)+", ", 9) + "*" + string(c-1) + "]\n"
	}
	for _, c := range []struct{ name, front string }{
		{"flow", "x: " + strings.Repeat("[", half) + strings.Repeat("]", half) + "\n"},
		{"flow maps", "x: " + strings.Repeat("{a: ", half/4) + "1" + strings.Repeat("}", half/4) + "\n"},
		{"compact lists", "x:\n  " + fill("- ") + "a\n"},
		{"alias bomb", bomb},
		{"many keys", fill("k: v\n")[:0] + manyKeys()},
	} {
		data := md("name: a\ndescription: d\n" + c.front)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err := ParseSkillMD(data)
		runtime.ReadMemStats(&after)
		if err == nil && c.name != "many keys" {
			t.Errorf("%s: accepted", c.name)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 48<<20 {
			t.Errorf("%s: parsing %d bytes allocated %d MiB", c.name, len(data), got>>20)
		}
	}
}

func manyKeys() string {
	var b strings.Builder
	for i := 0; b.Len() < MaxFrontmatterBytes-200; i++ {
		b.WriteString("k")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(string(rune('a'+i%26)) + itoa(i) + ": v\n")
	}
	return b.String()
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}
