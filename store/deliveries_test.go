package store

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestDeliveryLog(t *testing.T) {
	s, _ := openTemp(t, Options{MaxDeliveries: 5})
	if seen, err := s.SeenDelivery(""); seen || err != nil {
		t.Fatalf("empty id: seen=%v err=%v", seen, err)
	}
	var all []Delivery
	for i := range 8 {
		d := Delivery{
			ID: fmt.Sprintf("id-%d", i%6), Event: "push", Repo: "acme/skills",
			At: when.Add(time.Duration(i) * time.Second), Outcome: "accepted",
			Redelivery: i >= 6, Sources: []string{"a", "b"},
		}
		if i == 3 {
			d.ID, d.Sources, d.Action = "", nil, "published" // GitHub sent no id
		}
		if err := s.RecordDelivery(d); err != nil {
			t.Fatal(err)
		}
		all = append(all, d)
	}
	s = reopen(t, s)
	got, err := s.RecentDeliveries(0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Delivery{all[7], all[6], all[5], all[4], all[3]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recent:\n got %+v\nwant %+v", got, want)
	}
	if got, _ := s.RecentDeliveries(2); !reflect.DeepEqual(got, want[:2]) {
		t.Fatalf("recent 2: %+v", got)
	}
	// id-0 and id-1 were redelivered (entries 6 and 7), so they are still
	// in the log though their first entries were dropped; id-2 is gone.
	for id, want := range map[string]bool{"id-0": true, "id-1": true, "id-2": false, "id-4": true, "id-5": true, "nope": false} {
		if seen, err := s.SeenDelivery(id); err != nil || seen != want {
			t.Fatalf("seen %s: %v (err %v), want %v", id, seen, err, want)
		}
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestDeliveryLogDefaultBound(t *testing.T) {
	s, _ := openTemp(t, Options{})
	s.db.NoSync = true // a thousand commits; durability is not under test
	for i := range DefaultMaxDeliveries + 10 {
		if err := s.RecordDelivery(Delivery{ID: fmt.Sprint(i), At: when}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.RecentDeliveries(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != DefaultMaxDeliveries || got[0].ID != fmt.Sprint(DefaultMaxDeliveries+9) || got[len(got)-1].ID != "10" {
		t.Fatalf("kept %d deliveries, newest %s, oldest %s", len(got), got[0].ID, got[len(got)-1].ID)
	}
	if seen, _ := s.SeenDelivery("9"); seen {
		t.Fatal("a dropped delivery is still seen")
	}
}
