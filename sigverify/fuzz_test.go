package sigverify_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/sigverify"
)

var sentinels = []error{sigverify.ErrUnsigned, sigverify.ErrUnknownKey, sigverify.ErrBadSignature, sigverify.ErrNotValid, sigverify.ErrMalformed}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// FuzzVerify feeds Verify objects derived from real signed commits and
// tags. Whatever the bytes, it must not panic, must return one of the
// sentinels when it refuses, and may say Verified only for a payload one
// of the real keys signed.
func FuzzVerify(f *testing.F) {
	srv := gittest.NewServer(f)
	r := srv.CreateRepo("fuzz")
	gpg := sigtest.NewGPGKey(f, "Fuzz <fuzz@example.com>", sigtest.GPGOptions{SigningSubkey: true})
	ssh := sigtest.NewSSHKey(f, "fuzz")
	keys, err := sigverify.Parse([][]byte{gpg.Public}, []byte(ssh.AllowedSigner("fuzz@example.com", `valid-after="20230101Z"`)))
	if err != nil {
		f.Fatal(err)
	}
	signed := map[string]bool{}
	add := func(kind string, raw []byte) {
		payload, _, err := sigverify.Split(sigverify.Kind(kind), raw)
		if err != nil {
			f.Fatal(err)
		}
		signed[string(payload)] = true
		k := byte(0)
		if kind == "tag" {
			k = 1
		}
		f.Add(k, raw)
		f.Add(k, bytes.Replace(raw, []byte("signed"), []byte("sIgned"), 1))
	}
	r.WriteFiles(map[string]string{"s/SKILL.md": "x"})
	add(sigtest.Object(f, r, sigtest.Commit(r, gpg, "signed by gpg")))
	add(sigtest.Object(f, r, sigtest.Commit(r, ssh, "signed by ssh")))
	add(sigtest.Object(f, r, sigtest.Tag(r, gpg, "v1")))
	add(sigtest.Object(f, r, sigtest.Tag(r, ssh, "v2")))
	f.Add(byte(0), []byte("tree x\ncommitter C <c@x> 1 +0000\ngpgsig -----BEGIN SSH SIGNATURE-----\n\n"))
	f.Add(byte(1), []byte("object x\n\n-----BEGIN PGP SIGNATURE-----\n\n-----END PGP SIGNATURE-----\n"))
	f.Fuzz(func(t *testing.T, k byte, raw []byte) {
		kind := sigverify.Commit
		if k%2 == 1 {
			kind = sigverify.Tag
		}
		s, err := keys.Verify(kind, raw)
		if (err == nil) != s.Verified {
			t.Fatalf("err %v with %#v", err, s)
		}
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		payload, _, _ := sigverify.Split(kind, raw)
		if !signed[string(payload)] {
			t.Fatalf("verified a payload no key signed: %q (%s)", payload, s)
		}
		if s.Key != gpg.Fingerprint && s.Key != ssh.Fingerprint {
			t.Fatalf("verified by key %q", s.Key)
		}
	})
}

// FuzzSplit checks Split and SignedAt on any bytes: no panic, only
// ErrMalformed, a tag's payload and signature are the object cut in two,
// a commit's payload has no signature left, and an unsigned object is its
// own payload.
func FuzzSplit(f *testing.F) {
	f.Add(byte(0), []byte(headers+header("gpgsig", pgpBlock)+"\nmessage\n"))
	f.Add(byte(0), []byte(headers+header("gpgsig-sha256", sshBlock)+header("gpgsig", pgpBlock)+"\nm\n"))
	f.Add(byte(0), []byte(headers+"gpgsigx y\n z\n"+header("gpgsig", sshBlock)))
	f.Add(byte(1), []byte("object 4b82\n\nv1\n"+sshBlock+"more\n"+pgpBlock))
	f.Add(byte(1), []byte("object x\ntagger T <t@x> 1 +0200\n\n"))
	f.Add(byte(2), []byte("committer C <c@x> 1 +0000\n"))
	f.Fuzz(func(t *testing.T, k byte, raw []byte) {
		kind := []sigverify.Kind{sigverify.Commit, sigverify.Tag, "blob"}[int(k)%3]
		if _, err := sigverify.SignedAt(kind, raw); err != nil && !errors.Is(err, sigverify.ErrMalformed) {
			t.Fatalf("SignedAt: %v", err)
		}
		payload, sig, err := sigverify.Split(kind, raw)
		if err != nil {
			if !errors.Is(err, sigverify.ErrMalformed) {
				t.Fatalf("Split: %v", err)
			}
			return
		}
		switch {
		case sig == nil:
			if !bytes.Equal(payload, raw) {
				t.Fatalf("unsigned, payload %q is not the object %q", payload, raw)
			}
		case kind == sigverify.Tag:
			if !bytes.Equal(append(bytes.Clone(payload), sig...), raw) {
				t.Fatalf("tag: %q + %q is not %q", payload, sig, raw)
			}
		default:
			if len(payload) >= len(raw) {
				t.Fatalf("commit: payload %q not shorter than %q", payload, raw)
			}
			if _, again, err := sigverify.Split(kind, payload); err != nil || again != nil {
				t.Fatalf("commit: the payload %q still has a signature %q (%v)", payload, again, err)
			}
		}
	})
}

// FuzzParseAllowedSigners parses any allowed_signers file: no panic, only
// ErrMalformed, and the same file gives the same ID.
func FuzzParseAllowedSigners(f *testing.F) {
	key := sigtest.NewSSHKey(f, "fuzz")
	f.Add([]byte(key.AllowedSigner("a@example.com")))
	f.Add([]byte(key.AllowedSigner(`"a@example.com,b@example.com"`, `namespaces="git,file"`, `valid-after="20230101Z"`, `valid-before="202401020304"`)))
	f.Add([]byte("# comment\n\n" + key.AllowedSigner("*@example.com", `cert-authority`)))
	f.Add([]byte(`a valid-after="2023" ` + key.Public))
	f.Add([]byte(`"unterminated ` + key.Public))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := sigverify.Parse(nil, data)
		if err != nil {
			if !errors.Is(err, sigverify.ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		again, err := sigverify.Parse(nil, data)
		if err != nil || again.ID() != k.ID() {
			t.Fatalf("a second parse: %v, ID %s vs %s", err, again.ID(), k.ID())
		}
	})
}
