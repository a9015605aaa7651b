package webhook_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/webhook"
)

const (
	peerSecret    = "the replicas' secret"
	oldPeerSecret = "the replicas' previous secret"
	selfID        = "0123456789abcdef0123456789abcdef"
	peerID        = "fedcba9876543210fedcba9876543210"
)

// relaySig computes the relay signature independently of the peers
// package: HMAC-SHA256 of from \n event \n delivery \n body.
func relaySig(key, from, event, id string, body []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(from + "\n" + event + "\n" + id + "\n"))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// recRelay records what the handler hands to the peers.
type recRelay struct {
	mu   sync.Mutex
	sent []string // "event id content-type body"
}

func (r *recRelay) Send(event, delivery, contentType string, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, event+" "+delivery+" "+contentType+" "+string(body))
}

func (r *recRelay) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent)
}

// relayRig is a rig whose handler takes relays, with only peer secrets
// unless withSecrets says otherwise.
type relayRig struct {
	*rig
	relay    *recRelay
	mu       sync.Mutex
	received map[string]int // relay outcome -> count
}

func newRelayRig(t *testing.T, opts ...rigOption) *relayRig {
	rr := &relayRig{relay: &recRelay{}, received: map[string]int{}}
	base := func(o *webhook.Options, _ *rig) {
		o.Secrets = nil
		o.PeerSecrets = []string{oldPeerSecret, peerSecret}
		o.Instance = selfID
		o.Relay = rr.relay
		o.RelayMetrics = func(outcome string) {
			rr.mu.Lock()
			rr.received[outcome]++
			rr.mu.Unlock()
		}
	}
	rr.rig = newRig(t, append([]rigOption{base}, opts...)...)
	return rr
}

func (rr *relayRig) outcomes(outcome string) int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.received[outcome]
}

// relayed is a delivery as a peer relays it, signed with key.
func relayed(event, id, from, key string, body []byte) delivery {
	return delivery{event: event, id: id, body: body, signature: ptr(""), header: map[string]string{
		"X-Skillreg-Relay-From":          from,
		"X-Skillreg-Relay-Signature-256": relaySig(key, from, event, id, body),
	}}
}

func (r *rig) sendFull(t *testing.T, d delivery) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(d.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", d.event)
	if d.id != "" {
		req.Header.Set("X-GitHub-Delivery", d.id)
	}
	if d.signature == nil {
		req.Header.Set("X-Hub-Signature-256", sign(secret, d.body))
	}
	for k, v := range d.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header, b.String()
}

// TestRelayApplied: a relay signed with a peer secret (either of two, for
// rotation) is applied without any webhook secret, recorded, answered
// with its outcome in X-Skillreg-Relay-Outcome, and never relayed again;
// the same delivery id relayed again is not applied again.
func TestRelayApplied(t *testing.T) {
	rr := newRelayRig(t)
	body := load(t, "push.json")
	status, h, reply := rr.sendFull(t, relayed("push", "d-1", peerID, peerSecret, body))
	if status != http.StatusAccepted || h.Get("X-Skillreg-Relay-Outcome") != webhook.OutcomeAccepted || !strings.Contains(reply, `"main-branch"`) {
		t.Fatalf("relay: %d %q %s", status, h.Get("X-Skillreg-Relay-Outcome"), reply)
	}
	if got := rr.syncer.total(); got != 2 {
		t.Fatalf("%d syncs asked for, want 2 (default, main-branch)", got)
	}
	if ds, _ := rr.log.Recent(0); len(ds) != 1 || ds[0].ID != "d-1" || ds[0].Outcome != webhook.OutcomeAccepted {
		t.Fatalf("delivery log: %+v", ds)
	}
	if sent := rr.relay.all(); len(sent) != 0 {
		t.Fatalf("a relayed delivery was relayed again: %q", sent)
	}

	// Again, from another peer, signed with the old secret: not applied.
	status, h, reply = rr.sendFull(t, relayed("push", "d-1", "another-peer", oldPeerSecret, body))
	if status != http.StatusOK || h.Get("X-Skillreg-Relay-Outcome") != webhook.OutcomeDuplicate || !strings.Contains(reply, `"redelivery":true`) {
		t.Fatalf("second relay of d-1: %d %q %s", status, h.Get("X-Skillreg-Relay-Outcome"), reply)
	}
	if got := rr.syncer.total(); got != 2 {
		t.Fatalf("%d syncs after the duplicate, want still 2", got)
	}
	// A new id signed with the old secret is applied.
	if status, _, _ := rr.sendFull(t, relayed("push", "d-2", peerID, oldPeerSecret, body)); status != http.StatusAccepted {
		t.Fatalf("relay signed with the old secret: %d", status)
	}
	if rr.outcomes(webhook.OutcomeAccepted) != 2 || rr.outcomes(webhook.OutcomeDuplicate) != 1 {
		t.Fatalf("relay metrics: %v", rr.received)
	}
}

// TestRelayOfAGitHubDeliverySeen: a delivery GitHub sent this replica
// first, relayed back by a peer, is not applied twice.
func TestRelayOfAGitHubDeliverySeen(t *testing.T) {
	rr := newRelayRig(t, func(o *webhook.Options, _ *rig) { o.Secrets = []string{secret} })
	body := load(t, "release-published.json")
	if status, _ := rr.send(t, delivery{event: "release", id: "r-1", body: body}); status != http.StatusAccepted {
		t.Fatalf("GitHub's delivery: %d", status)
	}
	puts := rr.releases.putCount()
	status, h, _ := rr.sendFull(t, relayed("release", "r-1", peerID, peerSecret, body))
	if status != http.StatusOK || h.Get("X-Skillreg-Relay-Outcome") != webhook.OutcomeDuplicate || rr.releases.putCount() != puts {
		t.Fatalf("relay of a delivery seen: %d %q, puts %d -> %d", status, h.Get("X-Skillreg-Relay-Outcome"), puts, rr.releases.putCount())
	}
}

// TestRelaySelf: a relay from this replica's own instance id is answered
// "self" and neither applied nor recorded.
func TestRelaySelf(t *testing.T) {
	rr := newRelayRig(t)
	status, h, _ := rr.sendFull(t, relayed("push", "d-1", selfID, peerSecret, load(t, "push.json")))
	if status != http.StatusOK || h.Get("X-Skillreg-Relay-Outcome") != webhook.OutcomeSelf {
		t.Fatalf("own relay: %d %q", status, h.Get("X-Skillreg-Relay-Outcome"))
	}
	if rr.syncer.total() != 0 {
		t.Fatal("own relay applied")
	}
	if ds, _ := rr.log.Recent(0); len(ds) != 0 {
		t.Fatalf("own relay recorded: %+v", ds)
	}
}

// TestRelayRefused: every relay that is not signed as the contract says
// with a peer secret is answered 401, applies nothing and is not recorded;
// so is a GitHub delivery on a replica with only peer secrets, and a relay
// on a replica without peer secrets.
func TestRelayRefused(t *testing.T) {
	body := load(t, "push.json")
	good := relayed("push", "d-1", peerID, peerSecret, body)
	with := func(edit func(d *delivery)) delivery {
		d := good
		d.header = map[string]string{}
		for k, v := range good.header {
			d.header[k] = v
		}
		edit(&d)
		return d
	}
	cases := map[string]delivery{
		"wrong secret":     relayed("push", "d-1", peerID, "not the secret", body),
		"webhook secret":   relayed("push", "d-1", peerID, secret, body),
		"other sender":     with(func(d *delivery) { d.header["X-Skillreg-Relay-From"] = "another-peer" }),
		"other event":      with(func(d *delivery) { d.event = "release" }),
		"other delivery":   with(func(d *delivery) { d.id = "d-2" }),
		"other body":       with(func(d *delivery) { d.body = append(slices.Clone(body), ' ') }),
		"no signature":     with(func(d *delivery) { delete(d.header, "X-Skillreg-Relay-Signature-256") }),
		"no sender":        with(func(d *delivery) { delete(d.header, "X-Skillreg-Relay-From") }),
		"sender not an id": relayed("push", "d-1", "peer one", peerSecret, body),
		"sender too long":  relayed("push", "d-1", strings.Repeat("a", 65), peerSecret, body),
		"truncated signature": with(func(d *delivery) {
			d.header["X-Skillreg-Relay-Signature-256"] = good.header["X-Skillreg-Relay-Signature-256"][:70]
		}),
		"github signature too": with(func(d *delivery) {
			d.signature = nil
			d.header["X-Skillreg-Relay-Signature-256"] = "sha256=" + strings.Repeat("0", 64)
		}),
		"github's only": {event: "push", id: "d-1", body: body},
	}
	rr := newRelayRig(t)
	for name, d := range cases {
		status, h, reply := rr.sendFull(t, d)
		if status != http.StatusUnauthorized || reply != "" {
			t.Errorf("%s: %d %q", name, status, reply)
		}
		if name != "github's only" && h.Get("X-Skillreg-Relay-Outcome") != webhook.OutcomeUnauthorized {
			t.Errorf("%s: outcome header %q", name, h.Get("X-Skillreg-Relay-Outcome"))
		}
	}
	if rr.syncer.total() != 0 {
		t.Fatalf("%d syncs asked for by refused relays", rr.syncer.total())
	}
	if ds, _ := rr.log.Recent(0); len(ds) != 0 {
		t.Fatalf("refused relays recorded: %+v", ds)
	}
	// A good relay still works afterwards: nothing above marked d-1 seen.
	if status, _, _ := rr.sendFull(t, good); status != http.StatusAccepted {
		t.Fatalf("good relay after the refused ones: %d", status)
	}

	// Without peer secrets, a perfectly signed relay is refused.
	plain := newRig(t)
	if status, _, _ := plain.sendFull(t, good); status != http.StatusUnauthorized || plain.syncer.total() != 0 {
		t.Fatalf("relay to a replica without peer secrets: %d", status)
	}
}

// TestRelayNeedsADeliveryID: a relay without X-GitHub-Delivery could not
// be applied once only: refused.
func TestRelayNeedsADeliveryID(t *testing.T) {
	rr := newRelayRig(t)
	status, h, _ := rr.sendFull(t, relayed("push", "", peerID, peerSecret, load(t, "push.json")))
	if status != http.StatusBadRequest || h.Get("X-Skillreg-Relay-Outcome") != webhook.OutcomeNoID || rr.syncer.total() != 0 {
		t.Fatalf("relay without an id: %d %q", status, h.Get("X-Skillreg-Relay-Outcome"))
	}
}

// TestGitHubDeliveriesAreRelayed: a delivery from GitHub that asks for
// work is handed to the relay as it came (redeliveries too, since the
// peers apply an id once); one that asks for nothing is not.
func TestGitHubDeliveriesAreRelayed(t *testing.T) {
	rr := newRelayRig(t, func(o *webhook.Options, _ *rig) { o.Secrets = []string{secret} })
	body := load(t, "push.json")
	if status, _ := rr.send(t, delivery{event: "push", id: "g-1", body: body}); status != http.StatusAccepted {
		t.Fatalf("push: %d", status)
	}
	if status, _ := rr.send(t, delivery{event: "push", id: "g-1", body: body}); status != http.StatusOK {
		t.Fatalf("redelivery: %d", status)
	}
	if status, _ := rr.send(t, delivery{event: "ping", id: "g-2", body: load(t, "ping.json")}); status != http.StatusOK {
		t.Fatalf("ping: %d", status)
	}
	if status, _ := rr.send(t, delivery{event: "issues", id: "g-3", body: load(t, "issues-opened.json")}); status != http.StatusNoContent {
		t.Fatalf("issues: %d", status)
	}
	want := "push g-1 application/json " + string(body)
	if sent := rr.relay.all(); len(sent) != 2 || sent[0] != want || sent[1] != want {
		t.Fatalf("relayed %d deliveries, want the push twice", len(sent))
	}
}

// TestNewWithOnlyPeerSecrets: the endpoint exists with a peer secret
// alone (a replica that GitHub never calls), and GitHub's deliveries are
// then refused.
func TestNewWithOnlyPeerSecrets(t *testing.T) {
	if _, err := webhook.New(webhook.Options{PeerSecrets: []string{"", ""}}); err == nil {
		t.Fatal("New with empty peer secrets only: no error")
	}
	if _, err := webhook.New(webhook.Options{PeerSecrets: []string{"p"}}); err != nil {
		t.Fatal(err)
	}
}

// FuzzRelayHeaders: whatever the relay headers, delivery id, event and
// body, the handler does not panic, answers a documented status, and
// applies (2xx) only a relay whose signature is the peer secret's.
func FuzzRelayHeaders(f *testing.F) {
	body := []byte(`{"ref":"refs/heads/master","repository":{"full_name":"Codertocat/Hello-World","clone_url":"https://github.com/Codertocat/Hello-World.git"}}`)
	f.Add(peerID, relaySig(peerSecret, peerID, "push", "d-1", body), "push", "d-1", body)
	f.Add(selfID, relaySig(peerSecret, selfID, "push", "d-1", body), "push", "d-1", body)
	f.Add(peerID, relaySig(peerSecret, peerID, "push", "", body), "push", "", body)
	f.Add("", relaySig(peerSecret, "", "push", "d-1", body), "push", "d-1", body)
	f.Add(peerID, "sha256=", "push", "d-1", body)
	f.Add(peerID+"\n", "sha1=00", "ping", "x", []byte("{}"))
	f.Add(strings.Repeat("a", 65), relaySig(peerSecret, strings.Repeat("a", 65), "push", "d", body), "push", "d", body)

	h, err := webhook.New(webhook.Options{PeerSecrets: []string{peerSecret}, Instance: selfID, Sources: codertocat, Syncer: &countingSyncer{}, Releases: &countingReleases{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(h.Close)
	e := echo.New()
	h.Register(e)
	allowed := map[int]bool{200: true, 202: true, 204: true, 400: true, 401: true, 415: true}
	f.Fuzz(func(t *testing.T, from, sig, event, id string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, webhook.Path, bytes.NewReader(body))
		// Values net/http could not send are not the handler's to see.
		for _, v := range []string{from, sig, event, id} {
			if strings.ContainsAny(v, "\r\n\x00") {
				return
			}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Skillreg-Relay-From", from)
		req.Header.Set("X-Skillreg-Relay-Signature-256", sig)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("status %d", rec.Code)
		}
		// What net/http would carry: header values trimmed.
		from, sig, event, id = req.Header.Get("X-Skillreg-Relay-From"), req.Header.Get("X-Skillreg-Relay-Signature-256"), req.Header.Get("X-GitHub-Event"), req.Header.Get("X-GitHub-Delivery")
		// The hex digits may be of either case; the prefix may not.
		signed := strings.HasPrefix(sig, "sha256=") && strings.EqualFold(sig, relaySig(peerSecret, from, event, id, body))
		if rec.Code/100 == 2 && !signed {
			t.Fatalf("status %d for a relay not signed with the peer secret", rec.Code)
		}
	})
}
