package registry

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/store"
)

// verifyWith builds a source's verify from keyrings and allowed_signers
// lines, as cmd/skillreg does from the configured files.
func verifyWith(t *testing.T, mode catalog.VerifyMode, keyrings [][]byte, signers ...string) *catalog.Verify {
	t.Helper()
	keys, err := sigverify.Parse(keyrings, []byte(strings.Join(signers, "")))
	if err != nil {
		t.Fatal(err)
	}
	return &catalog.Verify{Mode: mode, Keys: keys, KeysID: keys.ID()}
}

// verified is a source of the fixture's repository with verify set.
func (f *gitFixture) verified(pin gitref.Pin, v *catalog.Verify) catalog.Source {
	src := f.source("team", pin, "skills")
	src.Git.Verify = v
	return src
}

// servedCommit is the commit the catalog serves for a source ("" for none).
func servedCommit(r *Registry, name string) string {
	if s, ok := r.Current().Snapshot(name); ok {
		return s.Commit
	}
	return ""
}

// wantUnverified checks that a sync failed as unverified, with the
// reason naming what it should, and that the state says so.
func wantUnverified(t *testing.T, r *Registry, err error, reason string) {
	t.Helper()
	var ue *UnverifiedError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnverified) {
		t.Fatalf("sync error %v, want an UnverifiedError", err)
	}
	st := stateOf(r, "team")
	if st.LastResult != catalog.ResultStalled || st.Stalled != catalog.StallUnverified || !strings.HasPrefix(st.LastError, "unverified: ") ||
		!strings.Contains(st.LastError, reason) || st.Hint == "" || !st.NextRetry.IsZero() {
		t.Fatalf("state after an unverified commit: result %q stalled %q error %q hint %q next retry %v, want stalled unverified naming %q",
			st.LastResult, st.Stalled, st.LastError, st.Hint, st.NextRetry, reason)
	}
}

// TestVerifyHeadSSH: with verify mode head, a commit signed by an allowed
// signer is served with its signature (in the snapshot, the provenance
// and the state); an unsigned commit, one signed by a key no line lists,
// and one signed outside its signer's valid-after/valid-before are never
// indexed: the last verified commit stays served and the source is
// stalled as unverified, saying who signed with which key.
func TestVerifyHeadSSH(t *testing.T) {
	t.Parallel()
	f := newGitFixture(t, Options{})
	alice, mallory := sigtest.NewSSHKey(t, "alice"), sigtest.NewSSHKey(t, "mallory")
	v := verifyWith(t, catalog.VerifyHead, nil, alice.AllowedSigner("alice@example.com"))
	r := f.reg
	r.SetSources([]catalog.Source{f.verified(gitref.Pin{Kind: gitref.Branch, Value: "main"}, v)})

	// The fixture's first commit is unsigned: nothing is served.
	wantUnverified(t, r, r.SyncNow(context.Background(), "team"), "unsigned")
	if c := servedCommit(r, "team"); c != "" {
		t.Fatalf("an unsigned commit is served: %s", c)
	}

	good := sigtest.Commit(f.remote, alice, "signed by alice")
	f.remote.Push("main")
	mustSync(t, r, "team")
	snap, _ := r.Current().Snapshot("team")
	want := sigverify.Signature{Verified: true, Type: sigverify.TypeSSH, Key: alice.Fingerprint, Signer: "alice@example.com"}
	if snap.Commit != good || snap.Signature == nil || *snap.Signature != want {
		t.Fatalf("served %s with signature %+v, want %s with %+v", snap.Commit, snap.Signature, good, want)
	}
	if p := snap.Provenance(snap.Skills[0]); p.Signature == nil || *p.Signature != want {
		t.Fatalf("provenance signature %+v", p.Signature)
	}
	if st := stateOf(r, "team"); st.Verify != "head" || st.Signature == nil || *st.Signature != want || st.LastResult != catalog.ResultUpdated {
		t.Fatalf("state %+v", st)
	}

	for _, c := range []struct {
		name   string
		commit func() string
		reason string
	}{
		{"unsigned", func() string { return f.remote.Commit("unsigned") }, "commit"},
		{"unknown key", func() string { return sigtest.Commit(f.remote, mallory, "by mallory") }, "ssh key " + mallory.Fingerprint + " (no allowed signer)"},
	} {
		f.remote.WriteFiles(map[string]string{"skills/c/SKILL.md": testkit.SkillMD("c")})
		bad := c.commit()
		f.remote.Push("main")
		err := r.SyncNow(context.Background(), "team")
		wantUnverified(t, r, err, c.reason)
		if !strings.Contains(stateOf(r, "team").LastError, bad[:12]) {
			t.Errorf("%s: the reason does not name the commit %s: %q", c.name, bad[:12], stateOf(r, "team").LastError)
		}
		if got := servedCommit(r, "team"); got != good {
			t.Fatalf("%s: serving %s, want the last verified %s", c.name, got, good)
		}
		if got := skillNames(r.Current(), "team"); strings.Contains(got, "c") {
			t.Fatalf("%s: the unverified commit's skill is served: %s", c.name, got)
		}
		f.remote.Reset(good)
		f.remote.ForcePush("main")
	}

	// An allowed signer whose line expired before the commit, or starts
	// after it (checked against the committer time, as git does).
	for _, c := range []struct{ name, option string }{
		{"expired", `valid-before="20200101"`},
		{"not yet valid", `valid-after="29990101"`},
	} {
		r.SetSources([]catalog.Source{f.verified(gitref.Pin{Kind: gitref.Branch, Value: "main"}, v)})
		mustSync(t, r, "team")
		if servedCommit(r, "team") != good {
			t.Fatalf("%s: the good commit is not served before the reload", c.name)
		}
		windowed := verifyWith(t, catalog.VerifyHead, nil, alice.AllowedSigner("alice@example.com", c.option))
		r.SetSources([]catalog.Source{f.verified(gitref.Pin{Kind: gitref.Branch, Value: "main"}, windowed)})
		// The reload checked the served commit again at once.
		st := stateOf(r, "team")
		if st.Stalled != catalog.StallUnverified || !strings.Contains(st.LastError, alice.Fingerprint) || servedCommit(r, "team") != "" {
			t.Fatalf("%s: after the reload: stalled %q error %q serving %q", c.name, st.Stalled, st.LastError, servedCommit(r, "team"))
		}
		wantUnverified(t, r, r.SyncNow(context.Background(), "team"), "by alice@example.com (not verified)")
		if !errors.Is(r.SyncNow(context.Background(), "team"), sigverify.ErrNotValid) {
			t.Fatalf("%s: the error does not wrap sigverify.ErrNotValid", c.name)
		}
	}
}

// TestVerifyHeadOpenPGP: an OpenPGP signature by a key of the keyring
// verifies (its fingerprint and user id recorded); one by a key outside
// it does not.
func TestVerifyHeadOpenPGP(t *testing.T) {
	t.Parallel()
	f := newGitFixture(t, Options{})
	bob := sigtest.NewGPGKey(t, "Bob <bob@example.com>", sigtest.GPGOptions{SigningSubkey: true})
	eve := sigtest.NewGPGKey(t, "Eve <eve@example.com>", sigtest.GPGOptions{})
	r := f.reg
	r.SetSources([]catalog.Source{f.verified(gitref.Pin{Kind: gitref.Branch, Value: "main"}, verifyWith(t, catalog.VerifyHead, [][]byte{bob.Public}))})

	good := sigtest.Commit(f.remote, bob, "signed by bob")
	f.remote.Push("main")
	mustSync(t, r, "team")
	snap, _ := r.Current().Snapshot("team")
	want := sigverify.Signature{Verified: true, Type: sigverify.TypeOpenPGP, Key: bob.Fingerprint, Signer: bob.UserID}
	if snap.Commit != good || snap.Signature == nil || *snap.Signature != want {
		t.Fatalf("served %s with %+v, want %s with %+v", snap.Commit, snap.Signature, good, want)
	}

	sigtest.Commit(f.remote, eve, "signed by eve")
	f.remote.Push("main")
	wantUnverified(t, r, r.SyncNow(context.Background(), "team"), "openpgp key")
	if !errors.Is(r.SyncNow(context.Background(), "team"), sigverify.ErrUnknownKey) {
		t.Fatal("the error does not wrap sigverify.ErrUnknownKey")
	}
	if servedCommit(r, "team") != good {
		t.Fatalf("serving %s, want the last verified %s", servedCommit(r, "team"), good)
	}
}

// TestVerifyTagModes: a tag pin whose annotated tag is signed but whose
// commit is not serves under mode tag only; one whose commit is signed
// but whose tag is not serves under mode head only; tag-and-head needs
// both; a lightweight tag never satisfies a tag mode.
func TestVerifyTagModes(t *testing.T) {
	t.Parallel()
	f := newGitFixture(t, Options{})
	alice := sigtest.NewSSHKey(t, "alice")
	line := alice.AllowedSigner("alice@example.com")
	pin := gitref.Pin{Kind: gitref.Tag, Value: "v1.0.0"}

	// The fixture's commit is unsigned; its tag is signed.
	unsignedCommit := f.remote.Head()
	signedTag := sigtest.Tag(f.remote, alice, "v1.0.0")
	// A signed commit under an unsigned annotated tag, and a lightweight tag.
	signedCommit := sigtest.Commit(f.remote, alice, "signed")
	f.remote.Push("main")
	f.remote.Tag("v2.0.0", true)
	unsignedTag := f.remote.Git("rev-parse", "refs/tags/v2.0.0")
	f.remote.Tag("light", false)

	for _, c := range []struct {
		name   string
		mode   catalog.VerifyMode
		tag    string
		serves string // "" for unverified
		reason string // what the reason names then
	}{
		{"signed tag, unsigned head: tag", catalog.VerifyTag, "v1.0.0", unsignedCommit, ""},
		{"signed tag, unsigned head: head", catalog.VerifyHead, "v1.0.0", "", "commit " + unsignedCommit[:12] + ": unsigned"},
		{"signed tag, unsigned head: tag-and-head", catalog.VerifyTagAndHead, "v1.0.0", "", "commit " + unsignedCommit[:12] + ": unsigned"},
		{"unsigned tag, signed head: tag", catalog.VerifyTag, "v2.0.0", "", "tag " + unsignedTag[:12] + ": unsigned"},
		{"unsigned tag, signed head: head", catalog.VerifyHead, "v2.0.0", signedCommit, ""},
		{"unsigned tag, signed head: tag-and-head", catalog.VerifyTagAndHead, "v2.0.0", "", "tag " + unsignedTag[:12] + ": unsigned"},
		{"lightweight tag: tag", catalog.VerifyTag, "light", "", "lightweight tag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := New(Options{Git: f.reg.o.Git})
			pin.Value = c.tag
			reg.SetSources([]catalog.Source{f.verified(pin, verifyWith(t, c.mode, nil, line))})
			err := reg.SyncNow(context.Background(), "team")
			if c.serves == "" {
				wantUnverified(t, reg, err, c.reason)
				if got := servedCommit(reg, "team"); got != "" {
					t.Fatalf("serving %s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			snap, _ := reg.Current().Snapshot("team")
			if snap.Commit != c.serves || snap.Signature == nil || !snap.Signature.Verified || snap.Signature.Key != alice.Fingerprint {
				t.Fatalf("served %s signature %+v, want %s signed by alice", snap.Commit, snap.Signature, c.serves)
			}
			if c.tag == "v1.0.0" && snap.Tag != signedTag {
				t.Fatalf("snapshot tag %q, want %s", snap.Tag, signedTag)
			}
		})
	}
}

// TestVerifyRestartAndReload: every start checks the stored commit again
// with the keys configured then, and so does a reload that changes the
// keys: a commit that no longer verifies is not served (the source
// stalled as unverified at once, before any network call), and one that
// does is served with its signature, which the store kept.
func TestVerifyRestartAndReload(t *testing.T) {
	t.Parallel()
	f := newGitFixture(t, Options{})
	alice, bob := sigtest.NewSSHKey(t, "alice"), sigtest.NewSSHKey(t, "bob")
	pin := gitref.Pin{Kind: gitref.Branch, Value: "main"}
	byAlice := verifyWith(t, catalog.VerifyHead, nil, alice.AllowedSigner("alice@example.com"))
	byBob := verifyWith(t, catalog.VerifyHead, nil, bob.AllowedSigner("bob@example.com"))
	good := sigtest.Commit(f.remote, alice, "signed by alice")
	f.remote.Push("main")

	dbPath := filepath.Join(t.TempDir(), "skillreg.db")
	open := func(v *catalog.Verify) (*Registry, *store.Store, RestoreReport) {
		st, err := store.Open(dbPath, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := New(Options{Git: f.reg.o.Git, Store: st})
		r.SetSources([]catalog.Source{f.verified(pin, v)})
		ps, err := st.Load()
		if err != nil {
			t.Fatal(err)
		}
		rep, err := r.Restore(context.Background(), ps)
		if err != nil {
			t.Fatal(err)
		}
		return r, st, rep
	}

	r, st, _ := open(byAlice)
	mustSync(t, r, "team")
	st.Close()

	// A restart with the same keys serves the stored commit, signed.
	r, st, rep := open(byAlice)
	snap, ok := r.Current().Snapshot("team")
	if !ok || snap.Commit != good || snap.Signature == nil || snap.Signature.Signer != "alice@example.com" || len(rep.Restored) != 1 {
		t.Fatalf("restart with alice's key: restored %v dropped %v, serving %+v", rep.Restored, rep.Dropped, snap)
	}
	if s := stateOf(r, "team"); s.Signature == nil || s.Signature.Key != alice.Fingerprint {
		t.Fatalf("restored state signature %+v", s.Signature)
	}

	// A reload that trusts only bob: the served commit is checked at once.
	r.SetSources([]catalog.Source{f.verified(pin, byBob)})
	if c := servedCommit(r, "team"); c != "" {
		t.Fatalf("after rotating to bob's key, alice's commit %s is still served", c)
	}
	if s := stateOf(r, "team"); s.Stalled != catalog.StallUnverified || !strings.Contains(s.LastError, alice.Fingerprint+" (no allowed signer)") {
		t.Fatalf("after the reload: stalled %q error %q", s.Stalled, s.LastError)
	}
	// Back to alice: the sync serves it again.
	r.SetSources([]catalog.Source{f.verified(pin, byAlice)})
	mustSync(t, r, "team")
	if c := servedCommit(r, "team"); c != good {
		t.Fatalf("after trusting alice again, serving %q", c)
	}
	// Verify dropped: the commit stays served, no longer claiming a
	// signature; verify back: the signature is found again, at once.
	r.SetSources([]catalog.Source{f.source("team", pin, "skills")})
	if snap, ok := r.Current().Snapshot("team"); !ok || snap.Commit != good || snap.Signature != nil {
		t.Fatalf("without verify: serving %+v", snap)
	}
	r.SetSources([]catalog.Source{f.verified(pin, byAlice)})
	if snap, ok := r.Current().Snapshot("team"); !ok || snap.Signature == nil || snap.Signature.Key != alice.Fingerprint {
		t.Fatalf("verify again: serving %+v", snap)
	}
	st.Close()

	// A restart that trusts only bob serves nothing, stalled before any
	// network call.
	f.srv.ResetRequests()
	r, st, rep = open(byBob)
	defer st.Close()
	if c := servedCommit(r, "team"); c != "" || !strings.Contains(rep.Dropped["team"], "unverified") {
		t.Fatalf("restart with bob's key: serving %q, dropped %v", c, rep.Dropped)
	}
	if s := stateOf(r, "team"); s.Stalled != catalog.StallUnverified || !strings.Contains(s.LastError, alice.Fingerprint) {
		t.Fatalf("restart with bob's key: stalled %q error %q", s.Stalled, s.LastError)
	}
	if n := f.srv.Requests(); n.RefListings != 0 || n.Fetches != 0 {
		t.Fatalf("the restart's check asked the remote: %+v", n)
	}
}

// TestVerifyTagRemadeOnSameCommit: a verified source pinned to a tag
// notices a tag re-made on the same commit (here: unsigned): the sync
// does not stop early as "unchanged", it checks the new tag object.
func TestVerifyTagRemadeOnSameCommit(t *testing.T) {
	t.Parallel()
	f := newGitFixture(t, Options{})
	alice := sigtest.NewSSHKey(t, "alice")
	sigtest.Tag(f.remote, alice, "v1.0.0")
	r := f.reg
	r.SetSources([]catalog.Source{f.verified(gitref.Pin{Kind: gitref.Tag, Value: "v1.0.0"}, verifyWith(t, catalog.VerifyTag, nil, alice.AllowedSigner("alice@example.com")))})
	mustSync(t, r, "team")
	commit := servedCommit(r, "team")
	// A prune keeps the served tag object (the restart checks it again).
	snap, _ := r.Current().Snapshot("team")
	if keep := r.keptCommits(f.remote.URL()); snap.Tag == "" || !slices.Contains(keep, snap.Tag) || !slices.Contains(keep, commit) {
		t.Fatalf("a prune would keep %v, not the served commit %s and tag %s", keep, commit, snap.Tag)
	}

	f.remote.Tag("v1.0.0", true) // moved (forced) to an unsigned tag object, same commit
	wantUnverified(t, r, r.SyncNow(context.Background(), "team"), "unsigned")
	if got := servedCommit(r, "team"); got != commit {
		t.Fatalf("serving %q, want the last verified %s", got, commit)
	}
}

// FuzzTagTarget: the headers of any tag object parse without a panic,
// and what they name is what an "object" and a "type" line of the
// headers say.
func FuzzTagTarget(f *testing.F) {
	f.Add([]byte("object 0123456789012345678901234567890123456789\ntype commit\ntag v1\ntagger A <a@b> 1 +0000\n\nmsg\n"))
	f.Add([]byte("type tag\nobject x\n\nobject y\n"))
	f.Add([]byte(""))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, typ := tagTarget(data)
		headers, _, _ := strings.Cut(string(data), "\n\n")
		if obj != "" && !strings.Contains("\n"+headers+"\n", "\nobject "+obj+"\n") {
			t.Fatalf("object %q is not a header line of %q", obj, data)
		}
		if typ != "" && !strings.Contains("\n"+headers+"\n", "\ntype "+typ+"\n") {
			t.Fatalf("type %q is not a header line of %q", typ, data)
		}
	})
}
