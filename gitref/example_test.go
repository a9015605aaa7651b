package gitref_test

import (
	"errors"
	"fmt"

	"github.com/skillreg/skillreg/gitref"
)

// A source's ref, as configuration writes it, becomes a Pin once; a pin
// git would refuse never gets further.
func ExampleParsePin() {
	p, err := gitref.ParsePin("branch", "refs/heads/main")
	fmt.Println(p, err)
	_, err = gitref.ParsePin("branch", "feature..x")
	fmt.Println(errors.Is(err, gitref.ErrInvalidPin), err)
	// Output:
	// branch:main <nil>
	// true invalid pin: branch "feature..x" is not a valid git ref name
}

// A webhook's pushed ref moves only the pins that follow it.
func ExamplePin_MovedBy() {
	main := gitref.Pin{Kind: gitref.Branch, Value: "main"}
	stable := gitref.Pin{Kind: gitref.Semver, Value: "^1"}
	fmt.Println(main.MovedBy("refs/heads/main", ""), main.MovedBy("refs/tags/v1.2.0", ""))
	fmt.Println(stable.MovedBy("refs/heads/main", ""), stable.MovedBy("refs/tags/v1.2.0", ""))
	// Output:
	// true false
	// false true
}

// A remote's URL has one canonical form, and never holds credentials.
func ExampleParseRepo() {
	r, err := gitref.ParseRepo("https://GitHub.com:443/Codertocat/Hello-World.git/")
	fmt.Println(r, err)
	owner, name, _ := r.OwnerName()
	fmt.Println(r.Host(), owner, name, r.Key())
	_, err = gitref.ParseRepo("https://x-access-token:s3cret@github.com/codertocat/hello-world")
	fmt.Println(err)
	// Output:
	// https://github.com/Codertocat/Hello-World.git <nil>
	// github.com Codertocat Hello-World github.com/codertocat/hello-world
	// invalid repository URL: https://github.com/codertocat/hello-world: credentials in the URL are not accepted; configure a token instead
}

// Match is the one test of whether a webhook's repository is a source's,
// in whatever spelling the payload uses.
func ExampleRepo_Match() {
	r, _ := gitref.ParseRepo("https://github.com/codertocat/hello-world")
	fmt.Println(r.Match("git@github.com:Codertocat/Hello-World.git"))
	fmt.Println(r.Match("ssh://git@github.com:22/codertocat/hello-world"))
	fmt.Println(r.Match("https://github.com/codertocat/hello-world-2"))
	// Output:
	// true
	// true
	// false
}

func ExampleKey() {
	fmt.Println(gitref.Key("git@GitHub.com:Codertocat/Hello-World.git"))
	fmt.Println(gitref.Key("https://github.com") == "")
	// Output:
	// github.com/codertocat/hello-world
	// true
}

// A file's digest as manifests spell it, checked against the bytes served.
func ExampleDigest_Verify() {
	d := gitref.Sum([]byte("hello\n"))
	fmt.Println(d)
	fmt.Println(d.Verify([]byte("hello\n")))
	fmt.Println(errors.Is(d.Verify([]byte("tampered\n")), gitref.ErrDigestMismatch))
	// Output:
	// sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03
	// <nil>
	// true
}
