package store

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// After Load the pages of the skill records it copied are no longer
// resident in this process: a restart's peak is its decoded heap, not
// that plus the file.
func TestLoadReleasesMappedPages(t *testing.T) {
	s, path := openTemp(t, Options{})
	snap := corpusSnapshot(t, "src", 300)
	if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	var used int64
	if err := s.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, load(t, s)["src"].Snapshot, snap)
	rss := mappedRSS(t, path)
	if rss*2 > used {
		t.Fatalf("after Load %d KiB of the file's %d KiB of pages are resident in the process", rss>>10, used>>10)
	}
}

// mappedRSS is how many bytes of the mappings of path are resident in
// this process (/proc/self/smaps).
func mappedRSS(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	defer f.Close()
	var rss int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = strings.HasSuffix(line, " "+path)
			continue
		}
		if in && len(fields) == 3 && fields[0] == "Rss:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			rss += kb << 10
		}
	}
	return rss
}
