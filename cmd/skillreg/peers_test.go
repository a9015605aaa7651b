package main

import (
	"encoding/json"
	"net/http"
	"testing"
)

// readyInstance is the instance_id /readyz shows.
func readyInstance(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		ID string `json:"instance_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// TestReplicasHaveTheirOwnInstanceIDs: startReplicas' daemons each show
// an instance id of their own on /readyz, and one stops while the others
// go on serving.
func TestReplicasHaveTheirOwnInstanceIDs(t *testing.T) {
	rs := startReplicas(t, 3, "", "")
	ids := map[string]bool{}
	for _, r := range rs {
		id := readyInstance(t, r.URL)
		if len(id) != 32 || ids[id] {
			t.Fatalf("instance ids: %q after %v", id, ids)
		}
		ids[id] = true
	}
	rs[0].Stop()
	rs[0].Stop() // twice is harmless
	if _, err := http.Get(rs[0].URL + "/readyz"); err == nil {
		t.Fatal("a stopped replica still answers")
	}
	if id := readyInstance(t, rs[1].URL); !ids[id] {
		t.Fatalf("replica 1 now shows %q", id)
	}
}
