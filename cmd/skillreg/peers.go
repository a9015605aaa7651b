package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sync"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/peers"
	"github.com/skillreg/skillreg/web"
	"github.com/skillreg/skillreg/webhook"
)

// peerRuntime is a runtime's part of the relay to the other replicas:
// the peer secrets the webhook handler checks relays against, and the
// relay that sends GitHub's deliveries on (nil without peers).
type peerRuntime struct {
	secrets []string
	relay   *peers.Relay
	// key is a digest of what relay was made from: a reload that
	// changes none of it keeps the relay, with its stats.
	key [32]byte
}

// buildPeers reads the peer secrets and makes the relay of cfg's peers,
// or keeps the running one when nothing it was made from changed. The
// relay starts nothing until a delivery (or Start) asks.
func (d *Daemon) buildPeers(cfg *config.Config) (*peerRuntime, error) {
	text, err := cfg.PeersSecretText()
	if err != nil {
		return nil, err
	}
	pr := &peerRuntime{secrets: webhook.ParseSecrets(text)}
	if len(cfg.PeerAddrs) == 0 {
		return pr, nil
	}
	if len(pr.secrets) == 0 {
		return nil, fmt.Errorf("peers: no peer secret in %s or peers_secret_file", cfg.PeersSecretEnv)
	}
	ca, err := cfg.PeersCA()
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if cfg.TLS.Enabled() {
		scheme = "https" // replicas share one configuration: the peers serve TLS too
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", scheme, pr.secrets[0])
	if cfg.PeersCAFile != "" {
		pem, err := os.ReadFile(cfg.PeersCAFile) // checked at load: under 1 MiB
		if err != nil {
			return nil, fmt.Errorf("peers_ca_file: %w", err)
		}
		h.Write(pem)
	}
	list := make([]peers.Peer, len(cfg.PeerAddrs))
	for i, p := range cfg.PeerAddrs {
		list[i] = peers.Peer{URL: p.URL, DNSName: p.DNSName, Port: p.Port}
		fmt.Fprintf(h, "%s\x00", p)
	}
	copy(pr.key[:], h.Sum(nil))
	if rt := d.running(); rt != nil && rt.peers != nil && rt.peers.relay != nil && rt.peers.key == pr.key {
		pr.relay = rt.peers.relay
		return pr, nil
	}
	pr.relay, err = peers.New(peers.Options{
		Self:      d.instance,
		Secret:    []byte(pr.secrets[0]),
		Peers:     list,
		DNSScheme: scheme,
		RootCAs:   ca,
		Logger:    d.log,
		Metrics:   d.metrics.RelaySent,
	})
	if err != nil {
		return nil, fmt.Errorf("peers: %w", err)
	}
	return pr, nil
}

// installPeers makes rt's relay the one /metrics and /sources read, and
// lets go of the one it replaced (after its relays in flight, each
// bounded by the relay's timeout). A delivery still inside the replaced
// webhook handler may hand it one more: dropped and counted.
func (d *Daemon) installPeers(rt, old *runtimeConfig) {
	d.secrets.Add(rt.peers.secrets...)
	if rt.peers.relay != nil {
		d.metrics.SetPeersKnown(rt.peers.relay.Known)
		if old == nil || old.peers.relay != rt.peers.relay {
			d.log.Info("relaying webhook deliveries to peers", "peers", len(rt.cfg.PeerAddrs), "instance", d.instance)
		}
	} else {
		d.metrics.SetPeersKnown(nil)
	}
	if old != nil && old.peers.relay != nil && old.peers.relay != rt.peers.relay {
		d.drains.Go(old.peers.relay.Close)
	}
}

// closePeers stops the running relay after its relays in flight; call it
// once no webhook handler takes deliveries.
func (d *Daemon) closePeers() {
	if rt := d.running(); rt != nil && rt.peers != nil && rt.peers.relay != nil {
		rt.peers.relay.Close()
	}
}

// relayCounts are the relays received, by outcome, for /sources (the
// metrics keep their own).
type relayCounts struct {
	mu sync.Mutex
	n  map[string]uint64
}

func (r *relayCounts) add(outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]uint64{}
	}
	r.n[outcome]++
}

func (r *relayCounts) snapshot() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]uint64, len(r.n))
	for k, v := range r.n {
		out[k] = v
	}
	return out
}

// relayReceived counts a relay from a peer (webhook.Options.RelayMetrics).
func (d *Daemon) relayReceived(outcome string) {
	d.metrics.RelayReceived(outcome)
	d.relaysIn.add(outcome)
}

// peersWeb shows the relay to the sources page (which has no relay
// section without peers or a peer secret, unless relays were received).
func (d *Daemon) peersWeb() func() web.Peers {
	return func() web.Peers {
		rt := d.running()
		p := web.Peers{Instance: d.instance, Received: d.relaysIn.snapshot(), Relaying: rt.peers.relay != nil || len(rt.peers.secrets) > 0}
		if rt.peers.relay != nil {
			for _, s := range rt.peers.relay.Stats() {
				p.List = append(p.List, web.Peer(s))
			}
			p.Dropped = rt.peers.relay.Dropped()
		}
		return p
	}
}
