package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/internal/testkit"
)

// TestDiscoveredSourcesInheritVerify: a github: template's verify is every
// discovered source's: of two repositories it finds, the one whose head is
// signed by an allowed signer (real ssh-keygen signatures) is served with
// its verified signature in the provenance, and the unsigned one is not
// served at all, stalled as unverified.
func TestDiscoveredSourcesInheritVerify(t *testing.T) {
	alice := sigtest.NewSSHKey(t, "alice")
	gh := fakegithub.New(fakegithub.Options{})
	t.Cleanup(gh.Close)
	git := gittest.NewServer(t)
	heads := map[string]string{}
	for _, r := range []struct {
		name   string
		signed bool
	}{{"acme/signed", true}, {"acme/unsigned", false}} {
		remote := git.CreateRepo(strings.ReplaceAll(r.name, "/", "-"))
		skill := strings.TrimPrefix(r.name, "acme/")
		remote.WriteFiles(map[string]string{"skills/" + skill + "/SKILL.md": testkit.SkillMD(skill)})
		if r.signed {
			heads[r.name] = sigtest.Commit(remote, alice, "signed by alice")
		} else {
			heads[r.name] = remote.Commit("unsigned")
		}
		remote.Push("main")
		gh.AddRepo(fakegithub.Repo{FullName: r.name, Topics: []string{"agent-skills"}, CloneURL: remote.URL(),
			Files: []string{"skills/" + skill + "/SKILL.md"}})
	}
	dir := t.TempDir()
	signers := sigtest.WriteAllowedSigners(t, dir, alice.AllowedSigner("alice@example.com"))
	d := startDaemon(t, "data_dir: "+t.TempDir()+"\n"+
		"github:\n  api_url: "+gh.URL+"/\n"+
		"sources:\n"+
		"  - name: acme\n    github: {owner: acme, topic: agent-skills}\n    path: skills\n    poll: 0\n"+
		"    verify: {mode: head, ssh_allowed_signers: "+signers+"}\n", dir)

	state := func(name string) catalog.State {
		for _, st := range d.Registry.States() {
			if st.Source == name {
				return st
			}
		}
		return catalog.State{}
	}
	waitUntil(t, func() bool {
		_, ok := d.Registry.Current().Snapshot("acme-signed")
		return ok && state("acme-unsigned").Attempted
	})
	cs := connect(t, d.URL, "2025-11-25")
	entries, _ := listAll(t, cs)
	var uris []string
	for _, e := range entries {
		uris = append(uris, e.URI)
		p := e.Meta.Provenance
		if p.Commit != heads["acme/signed"] || p.Signature == nil || !p.Signature.Verified ||
			p.Signature.Key != alice.Fingerprint || p.Signature.Signer != "alice@example.com" {
			t.Errorf("%s provenance: commit %s signature %+v", e.URI, p.Commit, p.Signature)
		}
	}
	if want := []string{"skill://acme-signed/signed/SKILL.md"}; !slices.Equal(uris, want) {
		t.Errorf("serving %q, want %q", uris, want)
	}
	if snap, ok := d.Registry.Current().Snapshot("acme-unsigned"); ok {
		t.Errorf("the unsigned repository is served: %s", snap.Commit)
	}
	if st := state("acme-unsigned"); st.LastResult != catalog.ResultStalled || st.Stalled != catalog.StallUnverified ||
		!strings.Contains(st.LastError, heads["acme/unsigned"][:12]+": unsigned") {
		t.Errorf("the unsigned repository's state: %+v", st)
	}
	if st := state("acme-signed"); st.Stalled != "" {
		t.Errorf("the signed repository's state: %+v", st)
	}
}
