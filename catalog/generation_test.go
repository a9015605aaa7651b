package catalog

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
)

var genFiles = map[string]string{
	"a/SKILL.md": md("a", "Alpha."), "a/ref.md": "alpha",
	"b/SKILL.md": md("b", "Beta."),
}

// TestGenerationName: a generation's name is what it holds, whoever built
// it and however (in one go, or source by source from another
// generation), and anything a listing renders changes it.
func TestGenerationName(t *testing.T) {
	build := func(edit func(s *Snapshot)) *Catalog {
		one, two := snapOf(t, "one", genFiles), snapOf(t, "two", genFiles)
		one.Kind, one.Repository, one.Ref, one.Commit = KindGit, "https://example.com/one.git", "branch:main", strings.Repeat("a", 40)
		if edit != nil {
			edit(one)
		}
		return NewCatalog(7, time.Now(), []*Snapshot{two, one})
	}
	base := build(nil).Name()
	if len(base) != nameLen || !validName(base) {
		t.Fatalf("name %q", base)
	}
	if got := build(nil).Name(); got != base {
		t.Fatalf("same content, another name: %s %s", got, base)
	}
	// Numbers, times and stats are the process's, not the content's.
	other := build(func(s *Snapshot) { s.IndexedAt = time.Unix(1, 0); s.Stats.Hashed = 99 })
	other.Gen = 1
	if other.Name() != base {
		t.Fatal("indexing time or generation number changed the name")
	}
	// Built from an empty catalog source by source: the same name.
	c := NewCatalog(0, time.Now(), nil)
	for _, s := range build(nil).sources {
		c = c.With(c.Gen+1, time.Now(), s)
	}
	if c.Name() != base {
		t.Fatalf("built by With: %s, want %s", c.Name(), base)
	}
	if w := c.Without(9, time.Now(), "two"); w.Name() == base || w.Name() != NewCatalog(1, time.Now(), w.sources).Name() {
		t.Fatal("Without: wrong name")
	}
	for name, edit := range map[string]func(s *Snapshot){
		"commit":     func(s *Snapshot) { s.Commit = strings.Repeat("b", 40) },
		"pin":        func(s *Snapshot) { s.Ref = "tag:v1" },
		"repository": func(s *Snapshot) { s.Repository = "https://example.com/other.git" },
		"kind":       func(s *Snapshot) { s.Kind = KindDir },
		"path":       func(s *Snapshot) { s.Path = "skills" },
		"tag":        func(s *Snapshot) { s.Tag = strings.Repeat("c", 40) },
		"signature":  func(s *Snapshot) { s.Signature = &sigverify.Signature{Verified: true, Type: "ssh", Key: "SHA256:x"} },
		"file digest": func(s *Snapshot) {
			sk := *s.Skills[0]
			sk.Files = append(sk.Files[:0:0], sk.Files...)
			sk.Files[0].Digest = skill.Sum{1}
			s.Skills = append(s.Skills[:0:0], &sk)
		},
		"exec bit": func(s *Snapshot) {
			sk := *s.Skills[0]
			sk.Files = append(sk.Files[:0:0], sk.Files...)
			sk.Files[0].Exec = true
			s.Skills = append(s.Skills[:0:0], &sk)
		},
		"skill left out": func(s *Snapshot) { s.Skills = s.Skills[:1] },
		"exclusion": func(s *Snapshot) {
			s.Excluded = append(s.Excluded, skill.Exclusion{Path: "c", File: "c/SKILL.md", Problem: skill.Problem{Rule: skill.RuleYAML, Detail: "x"}})
		},
	} {
		if got := build(edit).Name(); got == base {
			t.Errorf("%s changed, same name", name)
		}
	}
	// Local handles of the bytes never reach a listing.
	handles := build(func(s *Snapshot) {
		sk := *s.Skills[0]
		sk.Files = append(sk.Files[:0:0], sk.Files...)
		sk.Files[0].ID, sk.Files[0].Key = "/elsewhere/a/SKILL.md", "k"
		s.Skills = append([]*skill.Skill{&sk}, s.Skills[1:]...)
	})
	if handles.Name() != base {
		t.Error("a file's local handles changed the name")
	}
}

func TestDecodeCursor(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	name := NewCatalog(0, time.Now(), nil).Name()
	for _, c := range []Cursor{{name, 0}, {name, 200}, {name, 1 << 40}, {"kburkwg1", 200}} {
		got, err := DecodeCursor(c.Encode())
		if err != nil || got != c {
			t.Errorf("round trip of %+v: %+v %v", c, got, err)
		}
	}
	for _, bad := range []string{
		"", "!!", "a", enc(name), enc(name + "."), enc("." + "200"), enc(name + ".-1"), enc(name + ".+1"),
		enc(name + ".01"), enc(name + ".1.2"), enc(name + ".1x"), enc(name + ".99999999999999999999"),
		enc("a/b.1"), enc("a=b.1"), enc("a b.1"), enc(strings.Repeat("a", 44) + ".1"), enc(name + "\x00.1"),
		enc(name+".1") + "=", enc(name + ".1")[:4] + "\n" + enc(name + ".1")[4:], strings.Repeat("A", 65), enc(name + ".1")[:len(enc(name+".1"))-1] + "!",
	} {
		if c, err := DecodeCursor(bad); !errors.Is(err, ErrBadCursor) {
			t.Errorf("DecodeCursor(%q) = %+v, %v; want ErrBadCursor", bad, c, err)
		}
	}
}

// FuzzDecodeCursor: whatever a client sends as a cursor is either refused
// with ErrBadCursor or decodes to a cursor that encodes back to exactly it
// (one spelling per cursor), with a well-formed name and offset.
func FuzzDecodeCursor(f *testing.F) {
	name := NewCatalog(0, time.Now(), nil).Name()
	for _, s := range []string{"", "!!", Cursor{name, 200}.Encode(), Cursor{"x", 0}.Encode(), base64.RawURLEncoding.EncodeToString([]byte("kburkwg1.200"))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("DecodeCursor(%q): %v", s, err)
			}
			return
		}
		if c.Offset < 0 || !validName(c.Generation) {
			t.Fatalf("DecodeCursor(%q) = %+v", s, c)
		}
		if e := c.Encode(); e != s {
			t.Fatalf("DecodeCursor(%q) = %+v, which encodes as %q", s, c, e)
		}
	})
}

// TestResumeByName: a Live resumes a cursor by its generation's name,
// current or retained, and refuses it once the generation is no longer
// retained (the error every face maps to "catalog changed").
func TestResumeByName(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLive(LiveOptions{Retain: time.Minute, Now: func() time.Time { return now }})
	swapIn(l, snapOf(t, "one", genFiles))
	first := l.Current()
	c := first.Cursor(1)
	swapIn(l, snapOf(t, "two", genFiles))
	if got, ok := l.Resume(c); !ok || got != first {
		t.Fatal("retained generation not resumed by name")
	}
	if got, ok := l.Resume(l.Current().Cursor(0)); !ok || got != l.Current() {
		t.Fatal("current generation not resumed by name")
	}
	// Another Live holding the same content resumes it too.
	m := NewLive(LiveOptions{})
	swapIn(m, snapOf(t, "one", genFiles))
	if got, ok := m.Resume(c); !ok || got != m.Current() {
		t.Fatal("another holder of the same generation did not resume it")
	}
	now = now.Add(2 * time.Minute)
	swapIn(l, snapOf(t, "three", genFiles))
	if _, ok := l.Resume(c); ok {
		t.Fatal("a generation no longer retained resumed")
	}
}

// TestChangeHashesWhatChanged: a generation made by a change to one skill
// of a source takes the sums of the skills it shares with the one before
// (the same skill values) from it and hashes only the changed skill, and
// still gets the name a generation built from scratch gets. A planted sum
// shows which were carried over.
func TestChangeHashesWhatChanged(t *testing.T) {
	files := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		files[n+"/SKILL.md"] = md(n, "Skill "+n+".")
	}
	one := snapOf(t, "one", files)
	prev := NewCatalog(1, time.Now(), []*Snapshot{one, snapOf(t, "two", genFiles)})
	changed := snapOf(t, "one", map[string]string{"c/SKILL.md": md("c", "Changed.")})
	next := one.Replace([]string{"c"}, changed.Skills, nil, changed.Stats, time.Now())

	want := NewCatalog(2, time.Now(), prev.sources).With(3, time.Now(), next).Name()
	if got := prev.With(2, time.Now(), next).Name(); got != want {
		t.Fatalf("built from the generation before: %s, from scratch: %s", got, want)
	}
	if scratch := NewCatalog(2, time.Now(), []*Snapshot{next, prev.sources[1]}).Name(); scratch != want {
		t.Fatalf("built at once: %s, source by source: %s", scratch, want)
	}

	planted := skillSum{0xfe}
	for i := range prev.sums[0] {
		prev.sums[0][i] = planted
	}
	c := prev.With(2, time.Now(), next)
	for i, sk := range next.Skills {
		got := c.sums[0][i]
		if sk.Path == "c" {
			if got == planted {
				t.Error("the changed skill's sum was carried over")
			}
			continue
		}
		if got != planted {
			t.Errorf("skill %s was hashed again: its value is the one the generation before holds", sk.Path)
		}
	}
}

// TestRetainCount: within Retain, only the newest RetainCount superseded
// generations stay readable; a cursor of an older one is refused like one
// past Retain.
func TestRetainCount(t *testing.T) {
	l := NewLive(LiveOptions{Retain: time.Hour, RetainCount: 2})
	var cursors []Cursor
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		swapIn(l, snapOf(t, n, genFiles))
		cursors = append(cursors, l.Current().Cursor(1))
	}
	if got := len(l.Retained()); got != 3 {
		t.Fatalf("%d generations readable, want the current one and 2 superseded", got)
	}
	for i, c := range cursors {
		_, ok := l.Resume(c)
		if want := i >= len(cursors)-3; ok != want {
			t.Errorf("generation %d of %d: resumed %v, want %v", i+1, len(cursors), ok, want)
		}
	}
	if d := NewLive(LiveOptions{}); d.o.RetainCount != DefaultRetainCount {
		t.Errorf("default RetainCount %d", d.o.RetainCount)
	}
}
