package webhook_test

import (
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/webhook"
)

func ids(ds []webhook.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func TestMemoryLog(t *testing.T) {
	l := webhook.NewMemoryLog(3)
	if recent, _ := l.Recent(10); len(recent) != 0 {
		t.Fatalf("new log has %v", recent)
	}
	for _, id := range []string{"a", "b", "c", "d", "a"} {
		if err := l.Record(webhook.Delivery{ID: id, Sources: []string{"s-" + id}}); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true, "": false, "zz": false} {
		if got, err := l.Seen(id); err != nil || got != want {
			t.Errorf("Seen(%q) = %v, %v; want %v", id, got, err, want)
		}
	}
	all, _ := l.Recent(0)
	if got := ids(all); !slices.Equal(got, []string{"a", "d", "c"}) {
		t.Errorf("Recent(0) = %v, want newest first [a d c]", got)
	}
	two, _ := l.Recent(2)
	if got := ids(two); !slices.Equal(got, []string{"a", "d"}) {
		t.Errorf("Recent(2) = %v", got)
	}
	// The result is a copy.
	two[0].Sources[0] = "changed"
	again, _ := l.Recent(1)
	if again[0].Sources[0] != "s-a" {
		t.Errorf("Recent shares memory with the log")
	}

	// An id recorded twice stays seen until both entries are evicted.
	l = webhook.NewMemoryLog(3)
	for _, id := range []string{"x", "x", "y", "z"} {
		l.Record(webhook.Delivery{ID: id})
	}
	if seen, _ := l.Seen("x"); !seen {
		t.Errorf("x forgotten while one entry remains")
	}
	l.Record(webhook.Delivery{ID: "w"})
	if seen, _ := l.Seen("x"); seen {
		t.Errorf("x still seen after both entries were evicted")
	}

	// Deliveries without an id are kept but never seen.
	l.Record(webhook.Delivery{Event: "push"})
	if seen, _ := l.Seen(""); seen {
		t.Errorf("empty id seen")
	}
}

func TestMemoryLogDefaultSize(t *testing.T) {
	l := webhook.NewMemoryLog(0)
	for i := range webhook.DefaultLogSize + 10 {
		l.Record(webhook.Delivery{ID: strconv.Itoa(i)})
	}
	all, _ := l.Recent(0)
	if len(all) != webhook.DefaultLogSize || all[0].ID != strconv.Itoa(webhook.DefaultLogSize+9) {
		t.Errorf("kept %d, newest %q", len(all), all[0].ID)
	}
	if seen, _ := l.Seen("9"); seen {
		t.Errorf("evicted id still seen")
	}
}

func TestMemoryLogConcurrent(t *testing.T) {
	l := webhook.NewMemoryLog(50)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := strconv.Itoa(g*1000 + i)
				l.Record(webhook.Delivery{ID: id})
				l.Seen(id)
				l.Recent(5)
			}
		})
	}
	wg.Wait()
	if all, _ := l.Recent(0); len(all) != 50 {
		t.Errorf("kept %d, want 50", len(all))
	}
}
