package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/config"
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

// relayMetric is one series of url's /metrics (0 when absent).
func relayMetric(t *testing.T, url, series string) float64 {
	t.Helper()
	return metricValue(t, scrape(t, url), series)
}

// TestWebhookRelayedToReplica: two replicas with poll: 0 over one git
// source; a push and one webhook delivery to A, and B serves the new
// digest, told by A's relay alone. A finds its own address among the
// peers and stops sending to it; B records the delivery and never relays
// it back; with B stopped, A still answers GitHub and counts the failure.
func TestWebhookRelayedToReplica(t *testing.T) {
	t.Setenv("SKILLREG_WEBHOOK_SECRET", testSecret)
	remote := gitRemote(t)
	rs := startReplicas(t, 2, teamSource(remote), "")
	a, b := rs[0], rs[1]
	csB := connect(t, b.URL, "2025-11-25")
	const uri, file = "skill://team/deploy/SKILL.md", "skill://team/deploy/references/run.md"
	before := gitEntryDigest(t, csB, uri, file)

	remote.WriteFiles(map[string]string{"skills/deploy/references/run.md": "changed by a push\n"})
	remote.Commit("change")
	remote.Push("main")
	body := payload(t, "push.json", "acme/team-skills", remote.URL(), onMain)
	start := time.Now()
	if status, reply := deliver(t, a.URL, "push", "d-1", body); status != http.StatusAccepted {
		t.Fatalf("push delivery to A: %d %s", status, reply)
	}
	waitUntil(t, func() bool { return gitEntryDigest(t, csB, uri, file) != before })
	t.Logf("webhook to A, new digest served by B after %v", time.Since(start))

	waitUntil(t, func() bool {
		return relayMetric(t, a.URL, `skillreg_relays_sent_total{result="ok"}`) == 1 &&
			relayMetric(t, a.URL, `skillreg_relays_sent_total{result="self"}`) == 1
	})
	if got := relayMetric(t, b.URL, `skillreg_relays_received_total{outcome="accepted"}`); got != 1 {
		t.Fatalf("B counted %v accepted relays, want 1", got)
	}
	if got := relayMetric(t, a.URL, `skillreg_peers_known`); got != 1 {
		t.Fatalf("A knows %v peers, want 1 (B; itself found)", got)
	}
	if got := relayMetric(t, b.URL, `skillreg_relays_sent_total{result="ok"}`); got != 0 {
		t.Fatalf("B relayed a relayed delivery: %v", got)
	}
	ds := b.recentDeliveries(10)
	if len(ds) != 1 || ds[0].ID != "d-1" || ds[0].Outcome != "accepted" {
		t.Fatalf("B's delivery log: %+v", ds)
	}
	resp, err := http.Get(a.URL + "/sources")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"Relay to peers", a.instance, b.URL, `<span class="badge">this replica</span>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("A's /sources lacks %q", want)
		}
	}

	// B down: A answers GitHub as before and counts the failure. (An
	// open session's stream would hold B's shutdown for its grace.)
	csB.Close()
	b.Stop()
	if status, reply := deliver(t, a.URL, "push", "d-2", body); status != http.StatusAccepted {
		t.Fatalf("push delivery to A with B down: %d %s", status, reply)
	}
	waitUntil(t, func() bool { return relayMetric(t, a.URL, `skillreg_relays_sent_total{result="failed"}`) == 1 })
}

// TestPeersReload: a reload that changes nothing of the relay keeps it
// (and its stats); one that changes peers makes a new one, which relays;
// one that removes peers relays no more.
func TestPeersReload(t *testing.T) {
	t.Setenv("SKILLREG_WEBHOOK_SECRET", testSecret)
	remote := gitRemote(t)
	rs := startReplicas(t, 2, teamSource(remote), "")
	a, b := rs[0], rs[1]
	cfgOf := func(yaml string) *config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml), "")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listen, cfg.DataDir = a.running().cfg.Listen, a.running().cfg.DataDir
		return cfg
	}
	running := a.running().cfg
	secretFile := running.PeersSecretFile
	first := a.running().peers.relay
	if first == nil {
		t.Fatal("no relay with peers configured")
	}
	same := teamSource(remote) + "peers:\n  - " + a.URL + "\n  - " + b.URL + "\npeers_secret_file: " + secretFile + "\n"
	if err := a.Reload(cfgOf(same)); err != nil {
		t.Fatal(err)
	}
	if a.running().peers.relay != first {
		t.Fatal("a reload that changed nothing of the relay replaced it")
	}

	onlyB := teamSource(remote) + "peers:\n  - " + b.URL + "\npeers_secret_file: " + secretFile + "\n"
	if err := a.Reload(cfgOf(onlyB)); err != nil {
		t.Fatal(err)
	}
	second := a.running().peers.relay
	if second == first || second == nil {
		t.Fatal("a reload that changed peers kept the relay")
	}
	body := payload(t, "push.json", "acme/team-skills", remote.URL(), func(m map[string]any) {
		m["ref"] = "refs/heads/main"
		m["repository"].(map[string]any)["default_branch"] = "main"
	})
	if status, reply := deliver(t, a.URL, "push", "r-1", body); status != http.StatusAccepted {
		t.Fatalf("delivery: %d %s", status, reply)
	}
	waitUntil(t, func() bool { return relayMetric(t, b.URL, `skillreg_relays_received_total{outcome="accepted"}`) == 1 })
	if st := second.Stats(); len(st) != 1 || st[0].URL != b.URL || st[0].Sent != 1 {
		t.Fatalf("the new relay's stats: %+v", st)
	}

	// Without peers (the peer secret stays: A still takes relays).
	if err := a.Reload(cfgOf(teamSource(remote) + "peers_secret_file: " + secretFile + "\n")); err != nil {
		t.Fatal(err)
	}
	if a.running().peers.relay != nil {
		t.Fatal("a relay without peers")
	}
	if status, _ := deliver(t, a.URL, "push", "r-2", body); status != http.StatusAccepted {
		t.Fatalf("delivery without peers: %d", status)
	}
	if got := relayMetric(t, a.URL, `skillreg_relays_sent_total{result="ok"}`); got != 1 {
		t.Fatalf("relays sent after peers were removed: %v, want still 1", got)
	}
	if got := relayMetric(t, a.URL, `skillreg_peers_known`); got != 0 {
		t.Fatalf("peers known without peers: %v", got)
	}
}
