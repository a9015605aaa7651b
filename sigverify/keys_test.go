package sigverify_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/sigverify"
)

func TestParseAllowedSignersErrorsNameTheLine(t *testing.T) {
	t.Parallel()
	key := sigtest.NewSSHKey(t, "k")
	good := key.AllowedSigner("a@example.com")
	for _, c := range []struct {
		name, file, want string
	}{
		{"no key", "# c\na@example.com\n", "line 2: no public key"},
		{"principals only and a space", good + "a@example.com \n", "line 2: no public key"},
		{"not a key", good + good + "a@example.com ssh-ed25519 !!!\n", "line 3: public key"},
		{"unknown option", `a@example.com foo="bar" ` + key.Public + "\n", `line 1: unknown option "foo"`},
		{"cert-authority", "a@example.com cert-authority " + key.Public + "\n", "line 1: cert-authority is not supported"},
		{"bad time", `a@example.com valid-after="2023" ` + key.Public + "\n", `line 1: valid-after="2023"`},
		{"bad month", `a@example.com valid-before="20231301" ` + key.Public + "\n", `line 1: valid-before="20231301"`},
		{"empty namespaces", `a@example.com namespaces="" ` + key.Public + "\n", "line 1: option namespaces with an empty value"},
		{"option without value", `a@example.com valid-after ` + key.Public + "\n", "line 1: option valid-after without a value"},
		{"unquoted value", good + `a@example.com valid-after=20230101 ` + key.Public + "\n", "line 2: option valid-after=20230101: the value must be quoted"},
		{"unquoted namespaces", `a@example.com namespaces=git ` + key.Public + "\n", "line 1: option namespaces=git: the value must be quoted"},
		{"unterminated quote", `"a@example.com ` + key.Public + "\n", "line 1: unterminated quoted principals"},
		{"a key without principals", "a@example.com " + key.Public + "\n" + key.Public + "\n", "line 2: public key"},
	} {
		_, err := sigverify.Parse(nil, []byte(c.file))
		if err == nil || !errors.Is(err, sigverify.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrMalformed naming %q", c.name, err, c.want)
		}
	}
	// Option names are case-insensitive, as ssh-keygen reads them.
	if _, err := sigverify.Parse(nil, []byte(`a@example.com VALID-AFTER="20230101",Namespaces="git" `+key.Public)); err != nil {
		t.Errorf("upper-case option names: %v", err)
	}
	// Comments, blank lines, CRLF and leading spaces are fine.
	if _, err := sigverify.Parse(nil, []byte("# team\r\n\r\n  "+strings.TrimSuffix(good, "\n")+"\r\n")); err != nil {
		t.Errorf("a file with comments and CRLF: %v", err)
	}
}

func TestParseKeyringErrors(t *testing.T) {
	t.Parallel()
	gpg := sigtest.NewGPGKey(t, "Gina <gina@example.com>", sigtest.GPGOptions{})
	secret := gpg.Run(t, time.Time{}, "--armor", "--export-secret-keys", gpg.Fingerprint)
	secretBinary := gpg.Run(t, time.Time{}, "--export-secret-keys", gpg.Fingerprint)
	for _, c := range []struct {
		name  string
		rings [][]byte
		want  string
	}{
		{"nothing trusted", nil, "no trusted keys"},
		{"empty keyring", [][]byte{{}}, "openpgp keyring 1"},
		{"garbage", [][]byte{gpg.Public, []byte("not a key")}, "openpgp keyring 2"},
		{"armored private key", [][]byte{secret}, "openpgp keyring 1: a private key"},
		{"binary private key", [][]byte{secretBinary}, "is a private key"},
		{"broken armor", [][]byte{[]byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!\n-----END PGP PUBLIC KEY BLOCK-----\n")}, "openpgp keyring 1: armor"},
		{"a signature, not a key", [][]byte{[]byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n-----END PGP PUBLIC KEY BLOCK-----\n-----BEGIN PGP SIGNATURE-----\n\n-----END PGP SIGNATURE-----\n")}, "openpgp keyring 1"},
	} {
		_, err := sigverify.Parse(c.rings, nil)
		if err == nil || !errors.Is(err, sigverify.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrMalformed naming %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error quotes the key: %v", c.name, err)
		}
	}
	// A binary export and two keys appended in one file parse.
	other := sigtest.NewGPGKey(t, "Hal <hal@example.com>", sigtest.GPGOptions{})
	binary := gpg.Run(t, time.Time{}, "--export", gpg.Fingerprint)
	both := append(append([]byte("some words before\n"), gpg.Public...), other.Public...)
	for name, ring := range map[string][]byte{"binary": binary, "two armored keys": both} {
		if _, err := sigverify.Parse([][]byte{ring}, nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	k1, _ := sigverify.Parse([][]byte{binary}, nil)
	k2, _ := sigverify.Parse([][]byte{gpg.Public}, nil)
	if k1 == nil || k2 == nil || k1.ID() != k2.ID() {
		t.Errorf("a key's binary and armored exports give different IDs")
	}
}

func TestKeysID(t *testing.T) {
	t.Parallel()
	a := sigtest.NewSSHKey(t, "a")
	b := sigtest.NewSSHKey(t, "b")
	g := sigtest.NewGPGKey(t, "Ivy <ivy@example.com>", sigtest.GPGOptions{})
	h := sigtest.NewGPGKey(t, "Jo <jo@example.com>", sigtest.GPGOptions{})
	id := func(rings [][]byte, signers string) string {
		t.Helper()
		return mustParse(t, rings, signers).ID()
	}
	base := id([][]byte{g.Public, h.Public}, a.AllowedSigner("a@example.com")+b.AllowedSigner("b@example.com"))
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+64 {
		t.Fatalf("ID %q", base)
	}
	same := map[string]string{
		"order":            id([][]byte{h.Public, g.Public}, b.AllowedSigner("b@example.com")+a.AllowedSigner("a@example.com")),
		"comments, blanks": id([][]byte{g.Public, h.Public}, "# x\n\n"+a.AllowedSigner("a@example.com")+"  "+b.AllowedSigner("b@example.com")),
		"key comment":      id([][]byte{g.Public, h.Public}, a.AllowedSigner("a@example.com")+strings.Replace(b.AllowedSigner("b@example.com"), " b\n", " renamed\n", 1)),
		"a duplicate":      id([][]byte{g.Public, h.Public, g.Public}, a.AllowedSigner("a@example.com")+b.AllowedSigner("b@example.com")),
	}
	for name, got := range same {
		if got != base {
			t.Errorf("%s changed the ID", name)
		}
	}
	differ := map[string]string{
		"a key less":        id([][]byte{g.Public}, a.AllowedSigner("a@example.com")+b.AllowedSigner("b@example.com")),
		"a signer less":     id([][]byte{g.Public, h.Public}, a.AllowedSigner("a@example.com")),
		"another principal": id([][]byte{g.Public, h.Public}, a.AllowedSigner("a@example.com")+b.AllowedSigner("c@example.com")),
		"a window":          id([][]byte{g.Public, h.Public}, a.AllowedSigner("a@example.com", `valid-before="20300101Z"`)+b.AllowedSigner("b@example.com")),
		"a namespace":       id([][]byte{g.Public, h.Public}, a.AllowedSigner("a@example.com", `namespaces="git"`)+b.AllowedSigner("b@example.com")),
	}
	seen := map[string]string{base: "base"}
	for name, got := range differ {
		if prev, ok := seen[got]; ok {
			t.Errorf("%s gives the ID of %s", name, prev)
		}
		seen[got] = name
	}
	// A new expiry on a key changes it too.
	g.Run(t, time.Time{}, "--quick-set-expire", g.Fingerprint, "2y")
	if got := id([][]byte{g.Export(t), h.Public}, a.AllowedSigner("a@example.com")+b.AllowedSigner("b@example.com")); got == base {
		t.Error("a key's new expiry did not change the ID")
	}
}

func TestLoadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ssh := sigtest.NewSSHKey(t, "k")
	gpg := sigtest.NewGPGKey(t, "Kim <kim@example.com>", sigtest.GPGOptions{})
	ring := gpg.WritePublic(t, dir)
	binRing := filepath.Join(dir, "binary.gpg")
	if err := os.WriteFile(binRing, gpg.Run(t, time.Time{}, "--export", gpg.Fingerprint), 0o644); err != nil {
		t.Fatal(err)
	}
	signers := sigtest.WriteAllowedSigners(t, dir, ssh.AllowedSigner("k@example.com"))
	broken := filepath.Join(dir, "broken")
	if err := os.WriteFile(broken, []byte("k@example.com ssh-ed25519\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	all, err := sigverify.LoadFiles([]string{ring}, signers)
	if err != nil {
		t.Fatal(err)
	}
	parsed := mustParse(t, [][]byte{gpg.Public}, ssh.AllowedSigner("k@example.com"))
	if all.ID() != parsed.ID() {
		t.Error("LoadFiles and Parse of the same keys differ")
	}
	for _, c := range []struct {
		name  string
		rings []string
		ss    string
		want  string
	}{
		{"missing keyring", []string{filepath.Join(dir, "nope.asc")}, "", "nope.asc"},
		{"broken allowed_signers", []string{ring}, broken, broken + ": line 1"},
		{"allowed_signers as a keyring", []string{signers}, "", signers},
	} {
		_, err := sigverify.LoadFiles(c.rings, c.ss)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}

	// LoadFile tells the kinds apart.
	for _, c := range []struct {
		path string
		want *sigverify.Keys
	}{
		{ring, mustParse(t, [][]byte{gpg.Public}, "")},
		{binRing, mustParse(t, [][]byte{gpg.Public}, "")},
		{signers, mustParse(t, nil, ssh.AllowedSigner("k@example.com"))},
	} {
		got, err := sigverify.LoadFile(c.path)
		if err != nil || got.ID() != c.want.ID() {
			t.Errorf("LoadFile(%s): %v", c.path, err)
		}
	}
	// gpg's own key database is named, not read as allowed_signers.
	kbx := filepath.Join(gpg.Home, "pubring.kbx")
	if _, err := sigverify.LoadFile(kbx); !errors.Is(err, sigverify.ErrMalformed) || !strings.Contains(err.Error(), kbx+": a GnuPG keybox") {
		t.Errorf("LoadFile(pubring.kbx): %v", err)
	}
	if _, err := sigverify.LoadFiles([]string{kbx}, ""); err == nil || !strings.Contains(err.Error(), "gpg --export --armor") {
		t.Errorf("LoadFiles(pubring.kbx): %v", err)
	}
	if _, err := sigverify.LoadFile(broken); err == nil || !strings.Contains(err.Error(), broken+": line 1") {
		t.Errorf("LoadFile(broken): %v", err)
	}
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, make([]byte, 16<<20+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sigverify.LoadFile(huge); !errors.Is(err, sigverify.ErrMalformed) {
		t.Errorf("LoadFile of a file over the bound: %v", err)
	}
}
