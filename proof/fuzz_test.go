package proof_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/skillreg/skillreg/proof"
)

func seedTree() []byte {
	id, _ := hex.DecodeString("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")
	var b bytes.Buffer
	for _, e := range []string{"100644 SKILL.md", "100755 run.sh", "40000 ref", "100664 old", "120000 link", "160000 sub"} {
		b.WriteString(e)
		b.WriteByte(0)
		b.Write(id)
	}
	return b.Bytes()
}

// FuzzDecode: any bytes decode to a well-formed proof or an error that
// matches one of the package's sentinels, and a decoded proof encodes to
// bytes that decode to the same proof.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"proof":1,"source":"s","skill":"a","repository":"https://example.invalid/r","object_format":"sha1","commit":"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391","path":"skills/a","objects":[{"id":"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391","type":"tree","data":"AAEC"}]}`))
	f.Add([]byte(`{"proof":1,"source":"s","object_format":"sha256","commit":"` + string(bytes.Repeat([]byte("a"), 64)) + `","path":"","objects":[]}`))
	f.Add([]byte(`{"proof":2}`))
	f.Add([]byte(`{"proof":1,"objects":[[[[[[[[[]]]]]]]]]}`))
	f.Add(bytes.Repeat([]byte("["), 100_000))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := proof.Decode(b)
		if err != nil {
			if !errors.Is(err, proof.ErrMalformed) && !errors.Is(err, proof.ErrTooLarge) && !errors.Is(err, proof.ErrUnsupported) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		again, err := p.Encode()
		if err != nil {
			t.Fatalf("a decoded proof does not encode: %v", err)
		}
		q, err := proof.Decode(again)
		if err != nil {
			t.Fatalf("a re-encoded proof does not decode: %v", err)
		}
		if q.Commit != p.Commit || len(q.Objects) != len(p.Objects) {
			t.Fatalf("round trip changed the proof")
		}
	})
}

// FuzzParseTree: any bytes parse to entries or ErrMalformed, and the
// entries say back exactly the bytes they came from.
func FuzzParseTree(f *testing.F) {
	f.Add(seedTree())
	f.Add([]byte("100644 a\x00short"))
	f.Add([]byte("644 a\x00" + string(bytes.Repeat([]byte{1}, 20))))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := proof.ParseTree(proof.SHA1, data)
		if err != nil {
			if !errors.Is(err, proof.ErrMalformed) {
				t.Fatalf("error without ErrMalformed: %v", err)
			}
			return
		}
		// Each entry is " <name>\0<id>" after its mode, in order, and
		// nothing else is left over (a mode is at most 6 octal digits:
		// git writes 40000, old trees 040000).
		rest := data
		for _, e := range entries {
			id, _ := hex.DecodeString(e.ID)
			tail := append([]byte(" "+e.Name+"\x00"), id...)
			i := bytes.Index(rest, tail)
			if i < 1 || i > 6 {
				t.Fatalf("entry %+v is not where the bytes %q have it", e, rest)
			}
			rest = rest[i+len(tail):]
		}
		if len(rest) != 0 {
			t.Fatalf("%d bytes left after the entries", len(rest))
		}
	})
}

// FuzzHeaders: CommitTree and TagTarget read any bytes without panicking
// and return only valid ids.
func FuzzHeaders(f *testing.F) {
	f.Add([]byte("tree e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\nparent x\n\nmsg"))
	f.Add([]byte("object e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\ntype commit\ntag v1\n\nmsg"))
	f.Add([]byte("gpgsig x\n tree e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if id, err := proof.CommitTree(proof.SHA1, data); err == nil && !proof.ValidID(proof.SHA1, id) {
			t.Fatalf("CommitTree gave %q", id)
		}
		if id, _, err := proof.TagTarget(proof.SHA1, data); err == nil && !proof.ValidID(proof.SHA1, id) {
			t.Fatalf("TagTarget gave %q", id)
		}
	})
}

// FuzzURI: URI and ParseURI are inverse on every source and path ParseURI
// accepts.
func FuzzURI(f *testing.F) {
	f.Add("skillreg://proof/team/review/pr")
	f.Add("skillreg://proof/team/")
	f.Add("skillreg://proof/t%2Fx/a%20b")
	f.Add("skillreg://proof/team/a/../b")
	f.Fuzz(func(t *testing.T, uri string) {
		src, p, err := proof.ParseURI(uri)
		if err != nil {
			if !errors.Is(err, proof.ErrMalformed) {
				t.Fatalf("error without ErrMalformed: %v", err)
			}
			return
		}
		src2, p2, err := proof.ParseURI(proof.URI(src, p))
		if err != nil || src2 != src || p2 != p {
			t.Fatalf("URI(%q, %q) = %q parses to %q %q %v", src, p, proof.URI(src, p), src2, p2, err)
		}
	})
}
