package web

import (
	"testing"
	"time"
)

// TestSourcesPagePeers: /sources shows the relay to viewers who see every
// source (instance id, each peer address with its stats, the relays
// received), never to one limited to some sources, nor on a source's own
// page; without peers nor relays received there is no section.
func TestSourcesPagePeers(t *testing.T) {
	at := newClock().Now().Add(-time.Minute)
	peers := Peers{
		Relaying: true,
		Instance: "0123456789abcdef0123456789abcdef",
		List: []Peer{
			{Peer: "dns:skillreg-headless:8080", URL: "http://10.0.0.11:8080", Sent: 3, LastResult: "ok", LastAt: at},
			{Peer: "dns:skillreg-headless:8080", URL: "http://10.0.0.12:8080", Self: true, LastResult: "self", LastAt: at},
			{Peer: "http://10.0.0.13:8080", URL: "http://10.0.0.13:8080", Failed: 2, LastResult: "failed", LastAt: at, LastError: "dial tcp 10.0.0.13:8080: <refused>"},
		},
		Dropped:  1,
		Received: map[string]uint64{"accepted": 4, "duplicate": 2},
	}
	f := newFixture(t, defaultSources(), func(o *Options) {
		authOptions(o)
		o.Peers = func() Peers { return peers }
	})
	_, body := f.get(t, "/sources", f.login(t, "tok-all"))
	mustContain(t, "peers", body,
		`id="sr-peers"`, `<code class="digest">0123456789abcdef0123456789abcdef</code>`,
		`<code>dns:skillreg-headless:8080</code>`, `<code>http://10.0.0.11:8080</code>`,
		`<code>http://10.0.0.12:8080</code> <span class="badge">this replica</span>`,
		`<span class="outcome ok">ok</span>`, `<span class="outcome bad">failed</span>`,
		`dial tcp 10.0.0.13:8080: &lt;refused&gt;`,
		"1 deliveries were relayed to no peer",
		`<code>accepted</code> 4, <code>duplicate</code> 2`,
	)
	assertInert(t, "peers", body)
	_, body = f.get(t, "/sources", f.login(t, "tok-team"))
	mustNotContain(t, "a viewer of some sources", body, `id="sr-peers"`, "10.0.0.11")
	_, body = f.get(t, "/sources/team", f.login(t, "tok-all"))
	mustNotContain(t, "a source's page", body, `id="sr-peers"`)

	peers = Peers{Instance: "x"}
	_, body = f.get(t, "/sources", f.login(t, "tok-all"))
	mustNotContain(t, "no peers", body, `id="sr-peers"`)
}
