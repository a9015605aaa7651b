//go:build linux

package registry

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/skillreg/skillreg/internal/testkit"
)

// TestNotifierCostsPerDirectory: a watched directory costs the notifier
// about 70 bytes, not the path of it twice over in two maps (fsnotify's
// 195 bytes a directory, 58 MB at 100,000 skills with every directory
// watched). The watches are recorded as Add records them, with the
// descriptors the kernel would hand out, so the test does not spend the
// machine's inotify watches.
func TestNotifierCostsPerDirectory(t *testing.T) {
	const skills = 20_000
	needWatches(t, t.TempDir()) // an inotify instance
	root := "/srv/skills/a-fairly-long-root-like-the-bench-one/corpus"
	nt, err := newNotifier(root)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	w := nt.(*inotifyWatcher)
	paths := make([]string, 0, 3*skills)
	for i := range skills {
		s := fmt.Sprintf("%s/group-%03d/skill-%06d", root, i%50, i)
		paths = append(paths, s, s+"/references", s+"/scripts")
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	h0 := heap()
	w.mu.Lock()
	for i, p := range paths {
		n, ok := w.nodeLocked(p, true)
		if !ok {
			t.Fatalf("%s: outside the root", p)
		}
		w.watchedLocked(n, int32(i+1))
	}
	w.mu.Unlock()
	per := int64(heap()-h0) / int64(len(paths))
	runtime.KeepAlive(paths)
	t.Logf("%d bytes a watched directory", per)
	if per > 90 {
		t.Errorf("a watched directory costs %d bytes, more than 90", per)
	}
	// Every watched directory is still named by its path (the groups are
	// on the way to them, not watched).
	got := w.WatchList()
	slices.Sort(got)
	want := slices.Clone(paths)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("watch list of %d paths differs from the %d watched", len(got), len(want))
	}
}

// TestNotifierNamesEvents: the notifier reports a change beneath the root
// by its whole path, with fsnotify's ops; a directory removed or unwatched
// leaves the watch list, and a directory renamed away stops reporting
// under its old name.
func TestNotifierNamesEvents(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{"g/s/references/guide.md": "a", "g/s/SKILL.md": "b", "g/t/x": "c"})
	needWatches(t, root)
	nt, err := newNotifier(root)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	for _, d := range []string{"", "g", "g/s", "g/s/references", "g/t"} {
		if err := nt.Add(filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nt.Add(filepath.Dir(root)); err == nil {
		t.Error("a directory outside the root was watched")
	}
	next := func(what string) fsnotify.Event {
		t.Helper()
		select {
		case ev := <-nt.Events():
			return ev
		case err := <-nt.Errors():
			t.Fatalf("%s: error %v", what, err)
		case <-time.After(30 * time.Second): // a lost event, not a slow machine
			t.Fatalf("%s: no event", what)
		}
		return fsnotify.Event{}
	}
	expect := func(what, name string, op fsnotify.Op) {
		t.Helper()
		for {
			ev := next(what)
			if ev.Name == name && ev.Has(op) {
				return
			}
			t.Logf("%s: skipped %v", what, ev)
		}
	}
	testkit.WriteFiles(t, root, map[string]string{"g/s/references/guide.md": "changed"})
	expect("write", filepath.Join(root, "g/s/references/guide.md"), fsnotify.Write)
	if err := os.Mkdir(filepath.Join(root, "g/s/new"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect("mkdir", filepath.Join(root, "g/s/new"), fsnotify.Create)
	if err := os.Rename(filepath.Join(root, "g/t"), filepath.Join(root, "g/u")); err != nil {
		t.Fatal(err)
	}
	expect("rename from", filepath.Join(root, "g/t"), fsnotify.Rename)
	expect("rename to", filepath.Join(root, "g/u"), fsnotify.Create)
	if err := os.RemoveAll(filepath.Join(root, "g/s/references")); err != nil {
		t.Fatal(err)
	}
	expect("remove", filepath.Join(root, "g/s/references"), fsnotify.Remove)
	if err := nt.Remove(filepath.Join(root, "g/s")); err != nil {
		t.Fatal(err)
	}
	if err := nt.Remove(filepath.Join(root, "g/s")); err == nil {
		t.Error("a watch removed twice")
	}
	testkit.WriteFiles(t, root, map[string]string{"g/u/x": "moved", "g/s/SKILL.md": "unwatched", "g/mark": "m"})
	// g/u is the old g/t's watch: renamed away, it no longer reports.
	// g/s is unwatched; g's own event comes last.
	for {
		ev := next("after")
		if ev.Name == filepath.Join(root, "g/mark") {
			break
		}
		if ev.Name == filepath.Join(root, "g/t/x") || ev.Name == filepath.Join(root, "g/s/SKILL.md") {
			t.Errorf("event of an unwatched directory: %v", ev)
		}
	}
	testkit.WaitUntil(t, "the watch list without the removed, unwatched and renamed", func() bool {
		got := nt.WatchList()
		slices.Sort(got)
		return slices.Equal(got, []string{root, filepath.Join(root, "g")})
	})
	if err := nt.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-nt.Events(); ok {
		t.Error("events after Close")
	}
}

// FuzzParseInotify: the decoder of a read from the inotify descriptor
// never reads past what it was given, and an event it returns is one the
// bytes hold.
func FuzzParseInotify(f *testing.F) {
	ev := func(wd int32, mask uint32, name string, pad int) []byte {
		b := make([]byte, 16+len(name)+pad)
		putEvent(b, wd, mask, uint32(len(name)+pad))
		copy(b[16:], name)
		return b
	}
	f.Add(ev(1, 2, "", 0))
	f.Add(append(ev(1, 0x100, "guide.md", 8), ev(2, 0x4000, "", 0)...))
	f.Add(ev(3, 2, "x", 15)[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		_ = parseInotify(b, func(e rawEvent) bool {
			total += 16 + len(e.name)
			if total > len(b) {
				t.Fatalf("events of %d bytes from %d", total, len(b))
			}
			return true
		})
	})
}

func putEvent(b []byte, wd int32, mask, n uint32) {
	binary.NativeEndian.PutUint32(b[0:], uint32(wd))
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[12:], n)
}
