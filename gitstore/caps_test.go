package gitstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/skillreg/skillreg/gitref"
)

// memRemote is an in-memory remote: it advertises main at one commit and
// answers every fetch with that commit's pack, counting both. No socket,
// no process: a synctest bubble's clock advances over it.
type memRemote struct {
	head     plumbing.Hash
	pack     []byte
	listings atomic.Int32
	fetches  atomic.Int32
}

func (m *memRemote) NewUploadPackSession(*transport.Endpoint, transport.AuthMethod) (transport.UploadPackSession, error) {
	return memSession{m}, nil
}

func (m *memRemote) NewReceivePackSession(*transport.Endpoint, transport.AuthMethod) (transport.ReceivePackSession, error) {
	return nil, errors.New("read-only")
}

type memSession struct{ m *memRemote }

func (s memSession) AdvertisedReferences() (*packp.AdvRefs, error) {
	return s.AdvertisedReferencesContext(context.Background())
}

func (s memSession) AdvertisedReferencesContext(context.Context) (*packp.AdvRefs, error) {
	s.m.listings.Add(1)
	ar := packp.NewAdvRefs()
	head := s.m.head
	ar.Head = &head
	ar.References["refs/heads/main"] = head
	return ar, nil
}

func (s memSession) UploadPack(_ context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error) {
	s.m.fetches.Add(1)
	return packp.NewUploadPackResponseWithPackfile(req, io.NopCloser(bytes.NewReader(s.m.pack))), nil
}

func (memSession) Close() error { return nil }

// commitPack returns a commit holding one file and a pack of it (commit,
// tree, blob), made with go-git in memory.
func commitPack(t *testing.T, content string) (plumbing.Hash, []byte) {
	t.Helper()
	st := memory.NewStorage()
	put := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		obj := st.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	io.WriteString(w, content)
	w.Close()
	blobID, err := st.SetEncodedObject(blob)
	if err != nil {
		t.Fatal(err)
	}
	treeID := put(&object.Tree{Entries: []object.TreeEntry{{Name: "SKILL.md", Mode: filemode.Regular, Hash: blobID}}})
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	commitID := put(&object.Commit{Author: sig, Committer: sig, Message: content, TreeHash: treeID})
	var pack bytes.Buffer
	if _, err := packfile.NewEncoder(&pack, st, false).Encode([]plumbing.Hash{commitID, treeID, blobID}, 0); err != nil {
		t.Fatal(err)
	}
	return commitID, pack.Bytes()
}

// TestListingCapabilitiesExpire: a Fetch right after a listing reuses the
// listing's capabilities (one round trip fewer per sync); one that comes
// capsFresh later lists again first. The minute passes on synctest's
// clock, over an in-memory remote.
func TestListingCapabilitiesExpire(t *testing.T) {
	t.Parallel()
	c1, p1 := commitPack(t, "one\n")
	c2, p2 := commitPack(t, "two\n")
	synctest.Test(t, func(t *testing.T) {
		pool := newPool(t, t.TempDir())
		repo, err := pool.Repo("https://git.example.com/skills.git")
		if err != nil {
			t.Fatal(err)
		}
		remote := &memRemote{head: c1, pack: p1}
		repo.transport = remote
		ctx := context.Background()

		refs, err := repo.ListRemote(ctx, Auth{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := refs.Resolve(gitref.Pin{})
		if err != nil || res.Commit != c1.String() {
			t.Fatalf("Resolve: %+v, %v", res, err)
		}
		time.Sleep(capsFresh - time.Second)
		if err := repo.Fetch(ctx, res, Auth{}); err != nil {
			t.Fatal(err)
		}
		if l, f := remote.listings.Load(), remote.fetches.Load(); l != 1 || f != 1 {
			t.Fatalf("a fetch within %v of the listing: %d listings, %d fetches; want 1 and 1", capsFresh, l, f)
		}

		remote.head, remote.pack = c2, p2
		time.Sleep(2 * time.Second) // the listing is now older than capsFresh
		if err := repo.Fetch(ctx, Resolved{Commit: c2.String(), Ref: "refs/heads/main"}, Auth{}); err != nil {
			t.Fatal(err)
		}
		if l, f := remote.listings.Load(), remote.fetches.Load(); l != 2 || f != 2 {
			t.Fatalf("a fetch %v after the listing: %d listings, %d fetches; want 2 and 2", capsFresh+time.Second, l, f)
		}
		if !repo.HasCommit(c1.String()) || !repo.HasCommit(c2.String()) {
			t.Fatalf("held: %v", repo.Commits())
		}
	})
}
