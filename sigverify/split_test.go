package sigverify_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/skillreg/skillreg/sigverify"
)

const (
	pgpBlock = "-----BEGIN PGP SIGNATURE-----\n\niHUEABYKAB0WIQ\n=abcd\n-----END PGP SIGNATURE-----\n"
	sshBlock = "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n"
	headers  = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n" +
		"author A <a@example.com> 1700000000 +0000\n" +
		"committer C <c@example.com> 1700000100 +0130\n"
)

// header writes a signature block as a commit header's value, the way
// git does: continuation lines start with a space.
func header(name, block string) string {
	return name + " " + string(bytes.ReplaceAll([]byte(block[:len(block)-1]), []byte("\n"), []byte("\n "))) + "\n"
}

func TestSplit(t *testing.T) {
	t.Parallel()
	mergetag := "mergetag object 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n type commit\n tag v1\n tagger T <t@example.com> 1700000000 +0000\n \n v1\n -----BEGIN PGP SIGNATURE-----\n \n iHUE\n -----END PGP SIGNATURE-----\n"
	for _, c := range []struct {
		name         string
		kind         sigverify.Kind
		raw          string
		payload, sig string // sig "" means unsigned
	}{
		{name: "unsigned commit", kind: sigverify.Commit,
			raw: headers + "\nmessage\n", payload: headers + "\nmessage\n"},
		{name: "gpgsig", kind: sigverify.Commit,
			raw:     headers + header("gpgsig", pgpBlock) + "\nmessage\n",
			payload: headers + "\nmessage\n", sig: pgpBlock},
		{name: "gpgsig with ssh", kind: sigverify.Commit,
			raw:     headers + header("gpgsig", sshBlock) + "\nmessage\n\nbody\n",
			payload: headers + "\nmessage\n\nbody\n", sig: sshBlock},
		{name: "gpgsig-sha256 alone", kind: sigverify.Commit,
			raw:     headers + header("gpgsig-sha256", sshBlock) + "\nmessage\n",
			payload: headers + "\nmessage\n", sig: sshBlock},
		{name: "both: gpgsig wins, both leave the payload", kind: sigverify.Commit,
			raw:     headers + header("gpgsig-sha256", sshBlock) + header("gpgsig", pgpBlock) + "\nmessage\n",
			payload: headers + "\nmessage\n", sig: pgpBlock},
		{name: "a mergetag's signature is payload", kind: sigverify.Commit,
			raw:     headers + mergetag + header("gpgsig", sshBlock) + "\nmerge\n",
			payload: headers + mergetag + "\nmerge\n", sig: sshBlock},
		{name: "gpgsig in the message is not a header", kind: sigverify.Commit,
			raw: headers + "\n" + header("gpgsig", sshBlock), payload: headers + "\n" + header("gpgsig", sshBlock)},
		{name: "no body", kind: sigverify.Commit,
			raw: headers + header("gpgsig", sshBlock), payload: headers, sig: sshBlock},
		{name: "gpgsigx is another header, dropped", kind: sigverify.Commit,
			raw: headers + "gpgsigx y\n z\n" + header("gpgsig", sshBlock) + "\nm\n", payload: headers + "\nm\n", sig: sshBlock},
		{name: "signed tag", kind: sigverify.Tag,
			raw:     "object 4b82\ntype commit\ntag v1\ntagger T <t@example.com> 1 +0000\n\nv1\n" + pgpBlock,
			payload: "object 4b82\ntype commit\ntag v1\ntagger T <t@example.com> 1 +0000\n\nv1\n", sig: pgpBlock},
		{name: "tag: the last block is the signature", kind: sigverify.Tag,
			raw:     "object 4b82\n\nv1\n" + sshBlock + "more\n" + pgpBlock,
			payload: "object 4b82\n\nv1\n" + sshBlock + "more\n", sig: pgpBlock},
		{name: "tag: a block not at a line start is text", kind: sigverify.Tag,
			raw: "object 4b82\n\nsee " + sshBlock, payload: "object 4b82\n\nsee " + sshBlock},
		{name: "unsigned tag", kind: sigverify.Tag, raw: "object 4b82\n\nv1\n", payload: "object 4b82\n\nv1\n"},
		{name: "empty tag", kind: sigverify.Tag, raw: "", payload: ""},
	} {
		payload, sig, err := sigverify.Split(c.kind, []byte(c.raw))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(payload) != c.payload {
			t.Errorf("%s: payload\n%q\nwant\n%q", c.name, payload, c.payload)
		}
		if (sig == nil) != (c.sig == "") || string(sig) != c.sig {
			t.Errorf("%s: signature %q, want %q", c.name, sig, c.sig)
		}
	}
	for _, c := range []struct {
		name string
		kind sigverify.Kind
		raw  string
	}{
		{"gpgsig without a block", sigverify.Commit, headers + "gpgsig nonsense\n\nm\n"},
		{"another kind", sigverify.Kind("tree"), headers},
		{"over MaxObject", sigverify.Commit, headers + "\n" + string(make([]byte, sigverify.MaxObject))},
		{"a signature over its bound", sigverify.Tag, "object x\n\n" + sshBlock + string(bytes.Repeat([]byte("A"), 64<<10))},
	} {
		if _, _, err := sigverify.Split(c.kind, []byte(c.raw)); !errors.Is(err, sigverify.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", c.name, err)
		}
	}
}

func TestSignedAt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		kind sigverify.Kind
		raw  string
		want time.Time
	}{
		{"commit: the committer, not the author", sigverify.Commit, headers + "\nm\n", time.Unix(1700000100, 0)},
		{"negative zone", sigverify.Commit, "committer C <c@x> 1700000100 -0800\n\n", time.Unix(1700000100, 0)},
		{"a '>' in the name", sigverify.Commit, "committer C > D <c@x> 5 +0000\n", time.Unix(5, 0)},
		{"tag: the tagger", sigverify.Tag, "object x\ntype commit\ntag v1\ntagger T <t@x> 1600000000 +0200\n\nm\n", time.Unix(1600000000, 0)},
	} {
		got, err := sigverify.SignedAt(c.kind, []byte(c.raw))
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	got, _ := sigverify.SignedAt(sigverify.Commit, []byte(headers))
	if _, off := got.Zone(); off != 90*60 {
		t.Errorf("zone +0130 gave offset %d", off)
	}
	for _, c := range []struct {
		name string
		kind sigverify.Kind
		raw  string
	}{
		{"no committer", sigverify.Commit, "tree x\nauthor A <a@x> 1 +0000\n\ncommitter C <c@x> 2 +0000\n"},
		{"tag without a tagger (git before 0.99.8)", sigverify.Tag, "object x\ntype commit\ntag v1\n\nm\n"},
		{"no email", sigverify.Commit, "committer C 1 +0000\n"},
		{"no zone", sigverify.Commit, "committer C <c@x> 1\n"},
		{"signed seconds", sigverify.Commit, "committer C <c@x> +1 +0000\n"},
		{"bad zone", sigverify.Commit, "committer C <c@x> 1 0000\n"},
		{"zone minutes over 59", sigverify.Commit, "committer C <c@x> 1 +0060\n"},
		{"zone with a sign inside", sigverify.Commit, "committer C <c@x> 1 +-100\n"},
		{"seconds overflow", sigverify.Commit, "committer C <c@x> 99999999999999999999 +0000\n"},
		{"another kind", sigverify.Kind("blob"), "committer C <c@x> 1 +0000\n"},
	} {
		if _, err := sigverify.SignedAt(c.kind, []byte(c.raw)); !errors.Is(err, sigverify.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", c.name, err)
		}
	}
}
