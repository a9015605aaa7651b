package sigverify_test

import (
	"fmt"

	"github.com/skillreg/skillreg/sigverify"
)

// A signed commit's content, as git cat-file commit prints it: Split
// takes the gpgsig header out, which leaves what the signer signed.
func ExampleSplit() {
	raw := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n" +
		"author A <a@example.com> 1700000000 +0000\n" +
		"committer A <a@example.com> 1700000000 +0000\n" +
		"gpgsig -----BEGIN SSH SIGNATURE-----\n" +
		" U1NIU0lHAAAAAQ==\n" +
		" -----END SSH SIGNATURE-----\n" +
		"\n" +
		"Add a skill\n")
	payload, sig, err := sigverify.Split(sigverify.Commit, raw)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s---\n%s", payload, sig)
	// Output:
	// tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904
	// author A <a@example.com> 1700000000 +0000
	// committer A <a@example.com> 1700000000 +0000
	//
	// Add a skill
	// ---
	// -----BEGIN SSH SIGNATURE-----
	// U1NIU0lHAAAAAQ==
	// -----END SSH SIGNATURE-----
}

// SignedAt is the time an allowed signer's valid-after and valid-before
// are checked against: the committer's, not the author's.
func ExampleSignedAt() {
	raw := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n" +
		"author A <a@example.com> 1600000000 +0000\n" +
		"committer C <c@example.com> 1700000000 +0100\n" +
		"\n" +
		"Add a skill\n")
	at, err := sigverify.SignedAt(sigverify.Commit, raw)
	if err != nil {
		panic(err)
	}
	fmt.Println(at.Format("2006-01-02 15:04:05 -0700"))
	// Output: 2023-11-14 23:13:20 +0100
}

// A Signature says who signed with which key, even when it did not
// verify: what a stalled source's reason shows.
func ExampleSignature_String() {
	for _, s := range []sigverify.Signature{
		{},
		{Verified: true, Type: "ssh", Key: "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s", Signer: "alice@example.com"},
		{Type: "ssh", Key: "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s"},
		{Type: "openpgp", Key: "3AA5C34371567BD2"},
	} {
		fmt.Println(s)
	}
	// Output:
	// unsigned
	// ssh key SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s by alice@example.com
	// ssh key SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s (no allowed signer)
	// openpgp key 3AA5C34371567BD2 (not in the keyring)
}
