package gitstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore/packdb"
)

func (r *Repo) session(auth Auth) (transport.UploadPackSession, error) {
	ep, err := transport.NewEndpoint(r.url)
	if err != nil {
		return nil, err
	}
	return r.transport.NewUploadPackSession(ep, auth.method(r.scheme))
}

// Fetch makes res.Commit and its whole tree present in the store. When the
// store already holds it, nothing touches the network. Otherwise it asks
// for that one commit at depth 1, telling the server which commits it
// holds (as "have" and as "shallow"), so that the server sends only the
// objects none of them has: a one-file push costs a few kilobytes whatever
// the repository's size, and a force-push or moved tag still gets every
// object it needs, because the server never assumes the store holds
// history it does not. Calls are serialised per repository. Every error
// starts "fetch <commit> from <url>", so callers add only what the
// repository does not know (the source, say).
func (r *Repo) Fetch(ctx context.Context, res Resolved, auth Auth) error {
	if err := r.usable(); err != nil {
		return fmt.Errorf("fetch %s from %s: %w", res.Commit, r.url, err)
	}
	if !gitref.IsCommitID(res.Commit) {
		return fmt.Errorf("fetch from %s: %w: commit %q is not 40 lowercase hex digits", r.url, ErrInvalidPin, res.Commit)
	}
	if res.Tag != "" && !gitref.IsCommitID(res.Tag) {
		return fmt.Errorf("fetch from %s: %w: tag object %q is not 40 lowercase hex digits", r.url, ErrInvalidPin, res.Tag)
	}
	if !r.suspect.Load() && r.holds(res) {
		return nil
	}
	if err := r.lock(ctx); err != nil {
		return fmt.Errorf("fetch %s from %s: %w", res.Commit, r.url, err)
	}
	defer r.unlock()
	if r.suspect.Load() {
		if err := r.repairLocked(); err != nil {
			return fmt.Errorf("fetch %s from %s: %w", res.Commit, r.url, err)
		}
	}
	if r.holds(res) { // fetched by the call we waited for
		return nil
	}
	start := time.Now()
	n, err := r.fetchLocked(ctx, res, auth)
	if err != nil {
		return err
	}
	r.log.Debug("fetched", "commit", res.Commit, "ref", res.Ref, "pack_bytes", n, "dur", time.Since(start))
	return nil
}

func (r *Repo) fetchLocked(ctx context.Context, res Resolved, auth Auth) (int64, error) {
	if c := r.caps.Load(); c != nil && time.Since(c.at) < capsFresh {
		n, err := r.fetchWith(ctx, res, auth, c.caps)
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrAuth) || errors.Is(err, ErrRefNotFound) ||
			errors.Is(err, ErrTooLarge) || errors.Is(err, ErrCorrupt) {
			return n, err
		}
		// Anything else (a redirect only the listing follows, a server
		// that changed) gets one more try the long way.
		r.log.Debug("fetch without a fresh listing failed; listing again", "err", err)
	}
	return r.fetchWith(ctx, res, auth, nil)
}

// fetchWith runs one fetch; with caps nil it lists the remote's refs first
// to learn its capabilities.
func (r *Repo) fetchWith(ctx context.Context, res Resolved, auth Auth, caps *capability.List) (int64, error) {
	op := "fetch " + res.Commit + " from"
	fail := func(err error) (int64, error) { return 0, r.remoteError(ctx, op, err, auth) }
	want := plumbing.NewHash(res.Commit)

	sess, err := r.session(auth)
	if err != nil {
		return fail(err)
	}
	defer sess.Close()
	if caps == nil {
		ar, err := sess.AdvertisedReferencesContext(ctx)
		if err != nil {
			return fail(err)
		}
		caps = ar.Capabilities
		r.caps.Store(&capsSnapshot{caps: caps, at: time.Now()})
	}
	req := packp.NewUploadPackRequestFromCapabilities(caps)
	req.Wants = []plumbing.Hash{want}
	if res.Tag != "" {
		// The tag object is a ref tip the server advertised: wanted
		// beside its commit, it comes in the same pack (a few hundred
		// bytes), and nothing else does.
		req.Wants = append(req.Wants, plumbing.NewHash(res.Tag))
	}
	if err := req.Capabilities.Set(capability.Shallow); err != nil {
		return fail(err)
	}
	req.Depth = packp.DepthCommits(1)
	if caps.Supports(capability.NoProgress) {
		_ = req.Capabilities.Set(capability.NoProgress)
	}
	held := r.Commits()
	if len(held) > 0 {
		for _, c := range held {
			h := plumbing.NewHash(c)
			req.Haves = append(req.Haves, h)
			req.Shallows = append(req.Shallows, h)
		}
		// go-git drops thin-pack from what the server advertises because
		// it cannot store thin packs itself; ingestPack can. git's
		// pack-objects leaves out the objects of the "have" commits at
		// depth 1 only when the pack may be thin (it always advertises
		// thin-pack), so without it every update resends the whole tree.
		_ = req.Capabilities.Set(capability.ThinPack)
	}

	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return fail(err)
	}
	defer resp.Close()
	var body io.Reader = resp
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		body = sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		body = sideband.NewDemuxer(sideband.Sideband, resp)
	}
	pack, fresh, n, err := r.ingestPack(ctx, body, len(held) > 0)
	if err != nil {
		if ctx.Err() != nil {
			return fail(err)
		}
		return 0, sanitize(fmt.Errorf("%s %s: %w", op, r.url, err), len(op)+1+len(r.url), auth)
	}

	// The pack must hold the commit and its whole tree: check before the
	// commit counts as held, so HasCommit never promises a broken tree.
	if err := r.db.Reload(map[string]*packdb.Index{pack: fresh}); err != nil {
		return 0, fmt.Errorf("%s %s: %w", op, r.url, err)
	}
	if err := r.checkComplete(want, fresh); err != nil {
		r.log.Warn("fetched pack does not complete the commit", "commit", res.Commit, "pack", pack, "err", err)
		return 0, fmt.Errorf("%s %s: %w: the pack does not complete the commit: %w", op, r.url, ErrNetwork, err)
	}
	if err := r.checkTag(res); err != nil {
		return 0, fmt.Errorf("%s %s: %w", op, r.url, err)
	}
	if err := r.addHeld(res.Commit); err != nil {
		return 0, fmt.Errorf("%s %s: %w", op, r.url, err)
	}
	return n, nil
}

// holds reports whether the store holds what a fetch of res brings: the
// commit with its whole tree, and the tag object when there is one.
func (r *Repo) holds(res Resolved) bool {
	return r.HasCommit(res.Commit) && (res.Tag == "" || r.hasObject(res.Tag))
}

// checkTag checks that the fetched tag object is there. What it names is
// the verifier's to judge (a tag of a tag is valid git).
func (r *Repo) checkTag(res Resolved) error {
	if res.Tag == "" {
		return nil
	}
	kind, _, err := r.readObject(res.Tag)
	if err != nil {
		return fmt.Errorf("%w: the pack does not hold tag object %s: %w", ErrNetwork, res.Tag, err)
	}
	if kind != plumbing.TagObject.String() {
		return fmt.Errorf("%w: the remote advertised %s as a tag, but it is a %s", ErrNetwork, res.Tag, kind)
	}
	return nil
}

// netReader marks failures to read the remote's answer as ErrNetwork, to
// tell them from local disk failures while the pack is being stored.
type netReader struct{ r io.Reader }

func (n netReader) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: reading the pack: %w", ErrNetwork, err)
	}
	return k, err
}

// checkComplete checks that every object of the commit's tree is present,
// decoding (and verifying) the trees that the fetched pack brought. A tree
// the pack did not bring is one the server left out because a held commit
// reaches it, and held commits are complete, so it is only looked up: the
// check costs in proportion to the change, not to the tree.
func (r *Repo) checkComplete(commit plumbing.Hash, fresh *packdb.Index) error {
	s, err := r.db.Snapshot()
	if err != nil {
		return err
	}
	defer s.Release()
	w := walker{r: r, s: s}
	tree, err := w.commitTree(commit)
	if err != nil {
		return err
	}
	// The trees visited are bits by their position in the fresh index, and
	// blobs are looked up each time they are named: a map of every object
	// of the commit (600,000 at 100,000 skills) cost 40 MB at the peak of
	// an initial sync, for lookups that cost a binary search.
	visited := make([]uint64, (fresh.Count()+63)/64)
	must := func(id plumbing.Hash) error {
		if !s.Has(id) {
			return fmt.Errorf("%w: %s", ErrObjectNotFound, id)
		}
		return nil
	}
	var visit func(tree plumbing.Hash, depth int) error
	visit = func(tree plumbing.Hash, depth int) error {
		if depth > maxDepth {
			return fmt.Errorf("%w: directories nested deeper than %d", ErrTooLarge, maxDepth)
		}
		i, in := fresh.Position(tree)
		if !in {
			return must(tree)
		}
		if visited[i/64]&(1<<(i%64)) != 0 {
			return nil
		}
		visited[i/64] |= 1 << (i % 64)
		raw, err := w.tree(tree)
		if err != nil {
			return err
		}
		return eachTreeEntry(tree, raw, func(_ []byte, m Mode, id plumbing.Hash) error {
			switch m {
			case modeDir:
				return visit(id, depth+1)
			case ModeSubmodule:
				return nil
			}
			return must(id)
		})
	}
	return visit(tree, 0)
}

// closure returns the ids of the given commits and every tree and blob
// they reach (gitlinks excluded: they name commits of other repositories).
// Trees are decoded and verified; blobs are only looked up.
func (r *Repo) closure(s *packdb.Snapshot, commits []plumbing.Hash) (map[plumbing.Hash]plumbing.ObjectType, error) {
	seen := map[plumbing.Hash]plumbing.ObjectType{}
	w := walker{r: r, s: s}
	must := func(id plumbing.Hash) error {
		if !s.Has(id) {
			return fmt.Errorf("%w: %s", ErrObjectNotFound, id)
		}
		return nil
	}
	var visit func(tree plumbing.Hash, depth int) error
	visit = func(tree plumbing.Hash, depth int) error {
		if _, ok := seen[tree]; ok {
			return nil
		}
		if depth > maxDepth {
			return fmt.Errorf("%w: directories nested deeper than %d", ErrTooLarge, maxDepth)
		}
		raw, err := w.tree(tree)
		if err != nil {
			return err
		}
		seen[tree] = plumbing.TreeObject
		return eachTreeEntry(tree, raw, func(_ []byte, m Mode, id plumbing.Hash) error {
			switch m {
			case modeDir:
				return visit(id, depth+1)
			case ModeSubmodule:
				return nil
			}
			if _, ok := seen[id]; ok {
				return nil
			}
			if err := must(id); err != nil {
				return err
			}
			seen[id] = plumbing.BlobObject
			return nil
		})
	}
	for _, c := range commits {
		tree, err := w.commitTree(c)
		if err != nil {
			return nil, err
		}
		seen[c] = plumbing.CommitObject
		if err := visit(tree, 0); err != nil {
			return nil, err
		}
	}
	return seen, nil
}

// addHeld records commit as held: its ref first (durably), then the
// shallow file, then memory.
func (r *Repo) addHeld(commit string) error {
	if err := writeFileAtomic(filepath.Join(r.dir, filepath.FromSlash(commitRefDir), commit), []byte(commit+"\n")); err != nil {
		return err
	}
	r.mu.Lock()
	r.held[commit] = true
	r.mu.Unlock()
	return r.writeShallow()
}

// writeShallow lists every held commit as shallow, which is what they are:
// the store holds their trees, never their parents. git's tools read the
// file; this package's fetches send the same list to the server.
func (r *Repo) writeShallow() error {
	held := r.Commits()
	var b strings.Builder
	for _, c := range held {
		b.WriteString(c)
		b.WriteByte('\n')
	}
	return writeFileAtomic(filepath.Join(r.dir, "shallow"), []byte(b.String()))
}

// ingestPack stores a pack read from src and returns its name, its index
// and the bytes received; see packdb.DB.Ingest. The remote's bytes are
// bounded by MaxPackBytes, and a pack that does not parse is the remote's
// fault: ErrNetwork.
func (r *Repo) ingestPack(ctx context.Context, src io.Reader, mayBeThin bool) (string, *packdb.Index, int64, error) {
	max := r.opts.MaxPackBytes
	lr := &io.LimitedReader{R: netReader{src}, N: max + 1}
	// Trees go straight into the tree cache: the completeness check and
	// the caller's first Walk then read none of them back.
	onTree := func(id plumbing.Hash, data []byte) {
		if checkTree(id, data) == nil {
			r.trees.put(id, data)
		}
	}
	name, idx, err := r.db.Ingest(ctx, lr, packdb.IngestOptions{Thin: mayBeThin, OnTree: onTree})
	n := max + 1 - lr.N
	switch {
	case n > max:
		return "", nil, n, fmt.Errorf("%w: the pack exceeds %d bytes", ErrTooLarge, max)
	case errors.Is(err, packdb.ErrMalformed):
		return "", nil, n, fmt.Errorf("%w: %w", ErrNetwork, err)
	case err != nil:
		// A full disk while the pack is stored, say.
		return "", nil, n, storageErr(err)
	}
	return name, idx, n, nil
}
