package packdb

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"

	"github.com/skillreg/skillreg/internal/gittest"
)

// gitCmd is the git CLI with the machine's git configuration kept out,
// for the tests that run git themselves (pack-objects, index-pack,
// verify-pack, cat-file) to check the package against it.
func gitCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), gittest.Env()...)
	return cmd
}

// packObjects runs git pack-objects in the bare repository with revs on
// stdin and returns the pack.
func packObjects(t *testing.T, r *gittest.Repo, revs string, args ...string) []byte {
	t.Helper()
	cmd := gitCmd(append([]string{"-C", r.BareDir(), "pack-objects", "--stdout", "--revs", "--quiet"}, args...)...)
	cmd.Stdin = strings.NewReader(revs)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pack-objects: %v: %s", err, stderr.String())
	}
	return out.Bytes()
}

// gitIndex indexes the pack with git index-pack and returns id -> entry.
func gitIndex(t *testing.T, pack []byte, extra ...string) (map[plumbing.Hash]idxfile.Entry, error) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "x.pack")
	if err := os.WriteFile(p, pack, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := gitCmd(append([]string{"index-pack", "-o", filepath.Join(dir, "x.idx")}, append(extra, p)...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git index-pack: %v: %s", err, out)
	}
	idx, err := readIndex(filepath.Join(dir, "x.idx"))
	if err != nil {
		t.Fatal(err)
	}
	return idxEntries(t, idx), nil
}

func idxEntries(t *testing.T, idx *Index) map[plumbing.Hash]idxfile.Entry {
	t.Helper()
	out := map[plumbing.Hash]idxfile.Entry{}
	for i := 0; i < idx.Count(); i++ {
		id := idx.id(i)
		out[id] = idxfile.Entry{Hash: id, CRC32: idx.crc(i), Offset: uint64(idx.offset(i))}
	}
	return out
}

// ourIndex runs indexPack over pack and returns the entries and the pack
// as written (completed when thin).
func ourIndex(t *testing.T, pack []byte, external func(plumbing.Hash) (externalObject, bool, error)) (map[plumbing.Hash]idxfile.Entry, []byte, error) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "tmp_pack_")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, _, err := indexPack(bytes.NewReader(pack), f, DefaultStreamAbove, external, nil)
	if err != nil {
		return nil, nil, err
	}
	idx, err := parseIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return idxEntries(t, idx), written, nil
}

func TestIndexPackMatchesGit(t *testing.T) {
	t.Parallel()
	r, _ := gittest.DeltaRepo(t)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"ofs-delta", []string{"--delta-base-offset"}},
		{"ref-delta", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pack := packObjects(t, r, "main\n", tt.args...)
			if got := countDeltas(t, r, pack); got == 0 {
				t.Fatal("the test pack has no deltas")
			}
			want, err := gitIndex(t, pack)
			if err != nil {
				t.Fatal(err)
			}
			got, written, err := ourIndex(t, pack, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(written, pack) {
				t.Fatal("the pack written differs from the pack received")
			}
			if len(got) != len(want) {
				t.Fatalf("%d entries, git has %d", len(got), len(want))
			}
			for id, w := range want {
				if g, ok := got[id]; !ok || g.Offset != w.Offset || g.CRC32 != w.CRC32 {
					t.Fatalf("entry %s: got %+v, git %+v", id, g, w)
				}
			}
		})
	}
}

// countDeltas asks git verify-pack how many entries of pack are deltas.
func countDeltas(t *testing.T, r *gittest.Repo, pack []byte) int {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "x.pack")
	os.WriteFile(p, pack, 0o644)
	if out, err := gitCmd("index-pack", p).CombinedOutput(); err != nil {
		t.Fatalf("index-pack: %v: %s", err, out)
	}
	out, err := gitCmd("verify-pack", "-v", filepath.Join(dir, "x.idx")).Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 7 && plumbing.IsHash(f[0]) {
			n++
		}
	}
	return n
}

// TestIndexPackCompletesThinPack feeds a thin pack (deltas against a
// commit the receiver holds) and checks the written pack stands alone.
func TestIndexPackCompletesThinPack(t *testing.T) {
	t.Parallel()
	r, commits := gittest.DeltaRepo(t)
	old, head := commits[2], commits[len(commits)-1]
	pack := packObjects(t, r, head+"\n^"+old+"\n", "--thin", "--delta-base-offset")
	if _, err := gitIndex(t, pack); err == nil {
		t.Fatal("git indexed the thin pack without --fix-thin: the test pack is not thin")
	}
	var asked []plumbing.Hash
	external := func(id plumbing.Hash) (externalObject, bool, error) {
		asked = append(asked, id)
		typ, data := catFile(t, r, id.String())
		return externalObject{typ: typ, data: data}, true, nil
	}
	got, written, err := ourIndex(t, pack, external)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) == 0 {
		t.Fatal("no external base was asked for")
	}
	want, err := gitIndex(t, written) // no --fix-thin: it must stand alone
	if err != nil {
		t.Fatalf("the completed pack does not stand alone: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, git has %d", len(got), len(want))
	}
	for id, w := range want {
		if g := got[id]; g.Offset != w.Offset || g.CRC32 != w.CRC32 {
			t.Fatalf("entry %s: got %+v, git %+v", id, g, w)
		}
	}

	// Without the store's help the thin pack cannot be indexed.
	none := func(plumbing.Hash) (externalObject, bool, error) { return externalObject{}, false, nil }
	if _, _, err := ourIndex(t, pack, none); !errors.Is(err, ErrMalformed) {
		t.Fatalf("thin pack without its bases: %v, want ErrMalformed", err)
	}
}

func catFile(t *testing.T, r *gittest.Repo, id string) (plumbing.ObjectType, []byte) {
	t.Helper()
	typ := r.GitBare("cat-file", "-t", id)
	out, err := gitCmd("-C", r.BareDir(), "cat-file", typ, id).Output()
	if err != nil {
		t.Fatal(err)
	}
	ot, err := plumbing.ParseObjectType(typ)
	if err != nil {
		t.Fatal(err)
	}
	return ot, out
}

func TestIndexPackRejectsDamage(t *testing.T) {
	t.Parallel()
	r, _ := gittest.DeltaRepo(t)
	pack := packObjects(t, r, "main\n", "--delta-base-offset")
	cases := map[string][]byte{
		"empty":          {},
		"not a pack":     []byte("hello world, this is not a pack file"),
		"truncated":      pack[:len(pack)/2],
		"no trailer":     pack[:len(pack)-20],
		"bad checksum":   flipped(pack, len(pack)-1),
		"flipped body":   flipped(pack, len(pack)/2),
		"count too high": withCount(pack, 1),
	}
	for name, data := range cases {
		if _, _, err := ourIndex(t, data, nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func flipped(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x40
	return c
}

func withCount(b []byte, extra uint32) []byte {
	c := bytes.Clone(b)
	binary.BigEndian.PutUint32(c[8:], binary.BigEndian.Uint32(c[8:])+extra)
	return c
}

// TestIndexPackForwardReferences reverses a REF_DELTA pack so that every
// delta comes before its base (legal, and what some servers send): the
// deltas wait until their bases are known.
func TestIndexPackForwardReferences(t *testing.T) {
	t.Parallel()
	r, _ := gittest.DeltaRepo(t)
	pack := packObjects(t, r, "main\n") // REF_DELTA only: entries stand alone
	want, err := gitIndex(t, pack)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, e := range want {
		offs = append(offs, int64(e.Offset))
	}
	slices.Sort(offs)
	end := int64(len(pack) - 20)
	var reversed bytes.Buffer
	reversed.Write(pack[:12])
	for i := len(offs) - 1; i >= 0; i-- {
		next := end
		if i+1 < len(offs) {
			next = offs[i+1]
		}
		reversed.Write(pack[offs[i]:next])
	}
	sum := sha1.Sum(reversed.Bytes())
	reversed.Write(sum[:])

	got, _, err := ourIndex(t, reversed.Bytes(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRev, err := gitIndex(t, reversed.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(wantRev) {
		t.Fatalf("%d entries, git has %d", len(got), len(wantRev))
	}
	for id, w := range wantRev {
		if g := got[id]; g.Offset != w.Offset || g.CRC32 != w.CRC32 {
			t.Fatalf("entry %s: got %+v, git %+v", id, g, w)
		}
	}
}

// TestIndexPackReverseChainIsLinear sends a chain of REF_DELTAs in
// reverse order, each delta before the object it applies to and the
// whole base last (legal; a hostile sender's choice): each delta is
// tried about once, where retrying every waiting delta until none moved
// tried (and re-inflated) n²/2 of them.
func TestIndexPackReverseChainIsLinear(t *testing.T) {
	t.Parallel()
	const n = 300
	content := []byte(strings.Repeat("the base of a long chain\n", 8))
	base := entryOf(plumbing.BlobObject, int64(len(content)), nil, content)
	var deltas [][]byte
	for k := 1; k <= n; k++ {
		prev := objectID(plumbing.BlobObject, content)
		add := fmt.Appendf(nil, "%d\n", k)
		next := append(bytes.Clone(content), add...)
		d := binary.AppendUvarint(binary.AppendUvarint(nil, uint64(len(content))), uint64(len(next)))
		d = append(d, 0x80|0x10|0x20, byte(len(content)), byte(len(content)>>8)) // copy the whole base
		d = append(d, byte(len(add)))                                            // then insert
		d = append(d, add...)
		deltas = append(deltas, entryOf(plumbing.REFDeltaObject, int64(len(d)), prev[:], d))
		content = next
	}
	slices.Reverse(deltas)
	pack := packOf(append(deltas, base)...)

	f, err := os.CreateTemp(t.TempDir(), "tmp_pack_")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ix := newPackIndexer(f, DefaultStreamAbove, nil, nil)
	data, _, err := ix.index(bytes.NewReader(pack))
	if err != nil {
		t.Fatal(err)
	}
	if ix.attempts > 2*n {
		t.Fatalf("%d tries to resolve %d deltas", ix.attempts, n)
	}
	idx, err := parseIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := idxEntries(t, idx); len(got) != n+1 {
		t.Fatalf("%d entries, want %d", len(got), n+1)
	}
	want, err := gitIndex(t, pack)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := want[objectID(plumbing.BlobObject, content)]; !ok {
		t.Fatal("git does not find the chain's last object: the test pack is wrong")
	}
}
