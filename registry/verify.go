package registry

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/sigverify"
)

// The verify step: a source with catalog.GitSource.Verify serves only a
// commit (or a tag) signed by one of its keys. It runs after the fetch and
// before the walk, so a commit that does not verify is never walked,
// indexed, stored or served: the sync is stalled (StallUnverified), and
// the last verified snapshot stays served. What it checks is read from the
// object store (gitstore's ReadObject checks each object against its id),
// so it checks exactly the bytes that are then walked and served.
//
// A sync of an unchanged commit stops before the fetch, so the served
// commit is checked again from the store where a sync would skip it: at
// every start (Restore) and at a reload that changes the source's verify
// or its keys (SetSources). If it no longer verifies, the source serves
// nothing and is stalled.

// ErrUnverified is the error of a commit or tag that does not carry a
// valid signature by the source's keys (a stall: nothing retried until
// the remote or the keys change).
var ErrUnverified = errors.New("unverified")

// UnverifiedError says which object failed and what is known of its
// signature (who signed, with which key, or that nothing did).
type UnverifiedError struct {
	Kind      sigverify.Kind // the object that failed: commit or tag
	ID        string
	Signature sigverify.Signature
	Err       error // sigverify's error (ErrUnsigned, ErrUnknownKey, ...), or why the tag cannot be checked
}

// Error reads "unverified: commit 1a2b3c4d5e6f: ssh key SHA256:… (no
// allowed signer)".
func (e *UnverifiedError) Error() string {
	msg := "unverified: " + string(e.Kind) + " " + shortCommit(e.ID) + ": " + e.Signature.String()
	if e.Err != nil && !errors.Is(e.Err, sigverify.ErrUnsigned) { // "unsigned" says it all
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap matches ErrUnverified and sigverify's sentinel.
func (e *UnverifiedError) Unwrap() []error { return []error{ErrUnverified, e.Err} }

// objectReader is what the verify step needs of an object store.
type objectReader interface {
	ReadObject(id string) (kind string, data []byte, err error)
}

// verifyResolved checks what a git source is about to serve: commit, and
// tag (the annotated tag object the pin resolved through, "" for none).
// It returns the signature a snapshot records (the commit's in the head
// modes, the tag's in mode tag), nil when the source has no verify. An
// error reading the store is returned as it is (not ErrUnverified: a
// resync repairs it).
func verifyResolved(src *catalog.Source, repo objectReader, commit, tag string) (*sigverify.Signature, error) {
	v := src.Git.Verify
	if v == nil {
		return nil, nil
	}
	if v.Keys == nil {
		return nil, &UnverifiedError{Kind: sigverify.Commit, ID: commit, Err: errors.New("no trusted keys loaded")}
	}
	var shown *sigverify.Signature
	if v.Mode.Tag() {
		sig, err := verifyTag(v.Keys, repo, commit, tag)
		if err != nil {
			return nil, err
		}
		shown = &sig
	}
	if v.Mode.Commit() {
		sig, err := verifyObject(v.Keys, repo, sigverify.Commit, commit)
		if err != nil {
			return nil, err
		}
		shown = &sig
	}
	if shown == nil {
		return nil, &UnverifiedError{Kind: sigverify.Commit, ID: commit, Err: fmt.Errorf("unknown verify mode %q", v.Mode)}
	}
	return shown, nil
}

// errNoTagObject: a tag mode's pin resolved through a lightweight tag,
// which carries no signature.
var errNoTagObject = errors.New("the pin resolved through a lightweight tag: no tag object to verify")

// errNoTagRecorded: a served snapshot records no tag object to check
// again (a lightweight tag, or stored by a version that did not record
// tags).
var errNoTagRecorded = errors.New("the served snapshot records no annotated tag (a lightweight tag, or stored before tags were recorded); the resync checks the tag")

// verifyTag checks the annotated tag object behind the pin: it must name
// the commit itself (a tag of a tag could not be proven) and carry a
// signature by a trusted key.
func verifyTag(keys *sigverify.Keys, repo objectReader, commit, tag string) (sigverify.Signature, error) {
	if tag == "" {
		return sigverify.Signature{}, &UnverifiedError{Kind: sigverify.Tag, ID: commit, Err: errNoTagObject}
	}
	data, err := readObject(repo, sigverify.Tag, tag)
	if err != nil {
		return sigverify.Signature{}, err
	}
	if obj, typ := tagTarget(data); obj != commit || typ != "commit" {
		return sigverify.Signature{}, &UnverifiedError{Kind: sigverify.Tag, ID: tag,
			Err: fmt.Errorf("the tag names %s %s, not commit %s", typ, shortCommit(obj), shortCommit(commit))}
	}
	sig, err := keys.Verify(sigverify.Tag, data)
	if err != nil {
		return sig, &UnverifiedError{Kind: sigverify.Tag, ID: tag, Signature: sig, Err: err}
	}
	return sig, nil
}

// verifyObject checks one commit's (or tag's) signature.
func verifyObject(keys *sigverify.Keys, repo objectReader, kind sigverify.Kind, id string) (sigverify.Signature, error) {
	data, err := readObject(repo, kind, id)
	if err != nil {
		return sigverify.Signature{}, err
	}
	sig, err := keys.Verify(kind, data)
	if err != nil {
		return sig, &UnverifiedError{Kind: kind, ID: id, Signature: sig, Err: err}
	}
	return sig, nil
}

// readObject reads an object of the given kind from the store.
func readObject(repo objectReader, kind sigverify.Kind, id string) ([]byte, error) {
	got, data, err := repo.ReadObject(id)
	if err != nil {
		return nil, err // "read object <id> in <url>: ..." already
	}
	if got != string(kind) {
		return nil, &UnverifiedError{Kind: kind, ID: id, Err: fmt.Errorf("the object is a %s, not a %s", got, kind)}
	}
	return data, nil
}

// tagTarget returns what an annotated tag object names: its "object" and
// "type" headers.
func tagTarget(data []byte) (object, typ string) {
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		if len(line) == 0 {
			break // the end of the headers
		}
		if v, ok := bytes.CutPrefix(line, []byte("object ")); ok && object == "" {
			object = string(v)
		} else if v, ok := bytes.CutPrefix(line, []byte("type ")); ok && typ == "" {
			typ = string(v)
		}
		data = rest
	}
	return object, typ
}

// reverify checks a served (or restored) snapshot of a git source again
// from the object store, against the source's verify as configured now.
// It returns the snapshot to serve: snap itself when nothing changed, a
// copy with the signature the check found (or none, for a source no
// longer verified) otherwise. An *UnverifiedError means it must not be
// served; another error, that the store cannot tell (the object is gone:
// a resync fetches it again).
func (r *Registry) reverify(src *catalog.Source, snap *catalog.Snapshot) (*catalog.Snapshot, error) {
	if src.Git == nil || snap.Kind != catalog.KindGit {
		return snap, nil
	}
	var sig *sigverify.Signature
	if v := src.Git.Verify; v != nil && v.Mode.Tag() && snap.Tag == "" {
		// Nothing to check from the store; the sync that follows
		// resolves the pin again and serves the commit if its tag
		// verifies.
		return nil, &UnverifiedError{Kind: sigverify.Tag, ID: snap.Commit, Err: errNoTagRecorded}
	}
	if src.Git.Verify != nil {
		repo, err := r.gitRepo(src.Git.Repo.URL())
		if err != nil {
			return nil, err
		}
		if sig, err = verifyResolved(src, repo, snap.Commit, snap.Tag); err != nil {
			return nil, err
		}
	}
	if sameSignature(sig, snap.Signature) {
		return snap, nil
	}
	next := *snap
	next.Signature = sig
	return catalog.NewSnapshot(&next, snap.Tree()), nil
}

func sameSignature(a, b *sigverify.Signature) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// unverifiedLocked records, in the state of a source whose stored or
// served snapshot no longer verifies, the stall a sync would: nothing is
// served, and the state says why.
func (r *Registry) unverifiedLocked(run *sourceRun, err error, now time.Time) catalog.State {
	st := &run.state
	msg := r.cleanError(err.Error())
	if !(st.LastResult == catalog.ResultStalled && st.Stalled == catalog.StallUnverified && st.LastError == msg) {
		st.Failures++
	}
	st.LastResult, st.Stalled = catalog.ResultStalled, catalog.StallUnverified
	st.Hint = catalog.StallUnverified.Hint(run.src.Poll > 0)
	st.LastError, st.LastErrorAt, st.LastEnd = msg, now, now
	st.NextRetry = time.Time{}
	st.Signature = nil
	st.Commit, st.Skills, st.Excluded = "", 0, 0
	return *st
}

// verifyChanged reports whether a reload changed what a git source's
// commits are verified against (the mode, the keys, verify itself).
func verifyChanged(old, new catalog.Source) bool {
	if old.Git == nil || new.Git == nil {
		return false
	}
	return !old.Git.Verify.Equal(new.Git.Verify)
}

// reverifyServed checks the snapshot a reconfigured source serves against
// its new verify (SetSources, after a reload changed it): one that no
// longer verifies leaves the catalog and the store, and the source is
// stalled; one that does is served with the signature found now. A store
// that cannot tell (the object is gone) leaves the snapshot to the
// resync that follows.
func (r *Registry) reverifyServed(name string, snap *catalog.Snapshot) {
	r.mu.Lock()
	run, ok := r.sources[name]
	r.mu.Unlock()
	if !ok {
		return
	}
	run.syncMu.Lock() // no sync of the new configuration swaps meanwhile
	defer run.syncMu.Unlock()
	src := run.src
	next, err := r.reverify(&src, snap)
	var unverified *UnverifiedError
	switch {
	case errors.As(err, &unverified):
		r.log.Error("the served commit does not verify with the reloaded keys; serving nothing for the source", "source", name,
			"commit", snap.Commit, "reason", string(catalog.StallUnverified), "err", r.cleanError(err.Error()))
		r.dropSource(name)
		r.mu.Lock()
		if run.removed {
			r.mu.Unlock()
			return
		}
		st := r.unverifiedLocked(run, err, r.o.Now())
		r.mu.Unlock()
		r.saveState(run, st)
		return
	case err != nil:
		r.log.Warn("cannot check the served commit again; the resync decides", "source", name, "err", err)
		return
	case next == snap:
		r.mu.Lock()
		run.state.Signature = snap.Signature
		r.mu.Unlock()
		return
	}
	swapped := false
	r.swap(func(c *catalog.Catalog, gen uint64, now time.Time) *catalog.Catalog {
		if cur, ok := c.Snapshot(name); !ok || cur != snap || r.removed(run) {
			return nil
		}
		swapped = true
		return c.With(gen, now, next)
	})
	if !swapped {
		return
	}
	r.mu.Lock()
	run.state.Signature = next.Signature
	st := run.state
	r.mu.Unlock()
	if r.o.Store != nil {
		r.storeMu.Lock()
		defer r.storeMu.Unlock()
		if !r.removed(run) {
			if err := r.storeSnapshot(next, st); err != nil {
				r.log.Error("store the served snapshot's signature", "source", name, "err", err)
			}
		}
	}
}

// saveState stores a source's state, unless the source was removed.
func (r *Registry) saveState(run *sourceRun, st catalog.State) {
	if r.o.Store == nil {
		return
	}
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	if r.removed(run) {
		return
	}
	st.Watch = catalog.Watch{}
	if err := r.o.Store.SaveState(st); err != nil {
		r.log.Error("save source state", "source", run.src.Name, "err", err)
	}
}
