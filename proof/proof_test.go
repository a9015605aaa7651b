package proof_test

import (
	"errors"
	"testing"

	"github.com/skillreg/skillreg/proof"
)

func TestURI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ source, path, uri string }{
		{"team", "review/pr", "skillreg://proof/team/review/pr"},
		{"team", "", "skillreg://proof/team/"},
		{"team", "a b/ü", "skillreg://proof/team/a%20b/%C3%BC"},
	} {
		if got := proof.URI(tc.source, tc.path); got != tc.uri {
			t.Errorf("URI(%q, %q) = %q, want %q", tc.source, tc.path, got, tc.uri)
		}
		src, p, err := proof.ParseURI(tc.uri)
		if err != nil || src != tc.source || p != tc.path {
			t.Errorf("ParseURI(%q) = %q %q %v", tc.uri, src, p, err)
		}
	}
	for _, bad := range []string{"skill://team/x", "skillreg://proof/", "skillreg://proof/team", "skillreg://proof/team/a//b", "skillreg://proof/team/a/..", "skillreg://proof/team/a%2Fb", "skillreg://proof/team/%zz"} {
		if _, _, err := proof.ParseURI(bad); !errors.Is(err, proof.ErrMalformed) {
			t.Errorf("ParseURI(%q): %v, want ErrMalformed", bad, err)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	const id = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
	ok := `{"proof":1,"source":"s","skill":"a","repository":"r","object_format":"sha1","commit":"` + id + `","path":"a","objects":[{"id":"` + id + `","type":"tree","data":""}]}`
	if _, err := proof.Decode([]byte(ok)); err != nil {
		t.Fatalf("a good proof: %v", err)
	}
	for _, tc := range []struct {
		name, body string
		want       error
	}{
		{"version 2", `{"proof":2,"source":"s","object_format":"sha1","commit":"` + id + `","path":"","objects":[]}`, proof.ErrUnsupported},
		{"unknown format", `{"proof":1,"source":"s","object_format":"md5","commit":"` + id + `","path":"","objects":[]}`, proof.ErrUnsupported},
		{"unknown member", `{"proof":1,"extra":1,"source":"s","object_format":"sha1","commit":"` + id + `","path":"","objects":[]}`, proof.ErrMalformed},
		{"upper-case id", `{"proof":1,"source":"s","object_format":"sha1","commit":"E69DE29BB2D1D6434B8B29AE775AD8C2E48C5391","path":"","objects":[]}`, proof.ErrMalformed},
		{"blob object", `{"proof":1,"source":"s","object_format":"sha1","commit":"` + id + `","path":"","objects":[{"id":"` + id + `","type":"blob","data":""}]}`, proof.ErrMalformed},
		{"object twice", `{"proof":1,"source":"s","object_format":"sha1","commit":"` + id + `","path":"","objects":[{"id":"` + id + `","type":"tree","data":""},{"id":"` + id + `","type":"tree","data":""}]}`, proof.ErrMalformed},
		{"unpadded base64", `{"proof":1,"source":"s","object_format":"sha1","commit":"` + id + `","path":"","objects":[{"id":"` + id + `","type":"tree","data":"AA"}]}`, proof.ErrMalformed},
		{"dot-dot path", `{"proof":1,"source":"s","object_format":"sha1","commit":"` + id + `","path":"a/../b","objects":[]}`, proof.ErrMalformed},
		{"no source", `{"proof":1,"source":"","object_format":"sha1","commit":"` + id + `","path":"","objects":[]}`, proof.ErrMalformed},
		{"two values", ok + ok, proof.ErrMalformed},
		{"deep", `{"proof":1,"objects":[[[[[[[[[[]]]]]]]]]]}`, proof.ErrMalformed},
		{"too large", `{"source":"` + string(make([]byte, proof.MaxBytes)) + `"}`, proof.ErrTooLarge},
	} {
		if _, err := proof.Decode([]byte(tc.body)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestParseTree(t *testing.T) {
	t.Parallel()
	id := string(make([]byte, 20))
	entries, err := proof.ParseTree(proof.SHA1, []byte("100644 a\x00"+id+"40000 d\x00"+id+"100664 old\x00"+id+"120000 l\x00"+id))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 || !entries[0].IsFile() || !entries[1].IsTree() || !entries[2].IsFile() || entries[3].IsFile() || entries[3].IsTree() {
		t.Fatalf("entries %+v", entries)
	}
	for _, bad := range []string{
		"100644 a\x00" + id[:19],                 // truncated id
		"100600 a\x00" + id,                      // a mode git does not write
		"100644 \x00" + id,                       // empty name
		"40000 ..\x00" + id,                      // dot-dot
		"100644 a/b\x00" + id,                    // a slash
		"100644 a\x00" + id + "40000 a\x00" + id, // a name twice
	} {
		if _, err := proof.ParseTree(proof.SHA1, []byte(bad)); !errors.Is(err, proof.ErrMalformed) {
			t.Errorf("ParseTree(%q): %v, want ErrMalformed", bad, err)
		}
	}
}
