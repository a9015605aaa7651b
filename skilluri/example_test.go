package skilluri_test

import (
	"errors"
	"fmt"

	"github.com/skillreg/skillreg/skilluri"
)

// A client checks every URI a server sends before it names a file with it:
// only the one canonical spelling parses, so a path can never climb out of
// its skill's tree.
func ExampleParse() {
	u, err := skilluri.Parse("skill://deploy/references/run%20book.md", 1024)
	if err != nil {
		panic(err)
	}
	fmt.Println(u.Authority, u.Path())
	fmt.Println(u)

	for _, s := range []string{
		"skill://deploy/../secrets",   // a dot segment
		"skill://deploy/a%2Fb",        // an encoded separator
		"skill://deploy/run%2dbook",   // percent-encoding where none is needed
		"skill://Deploy/SKILL.md",     // an uppercase authority
		"skill://deploy/SKILL.md?x=1", // a query
	} {
		_, err := skilluri.Parse(s, 1024)
		fmt.Println(errors.Is(err, skilluri.ErrInvalid))
	}
	// Output:
	// deploy references/run book.md
	// skill://deploy/references/run%20book.md
	// true
	// true
	// true
	// true
	// true
}

// The server builds URIs from a skill's name and a file's path; EscapePath
// encodes exactly what RFC 3986 requires, so Parse accepts the result.
func ExampleURI_String() {
	u := skilluri.URI{Authority: "deploy", Segments: []string{"scripts", "run me#1.sh"}}
	fmt.Println(u)
	back, err := skilluri.Parse(u.String(), 1024)
	fmt.Println(back.Path(), err)
	fmt.Println(skilluri.EscapePath("a b/c?d"))
	// Output:
	// skill://deploy/scripts/run%20me%231.sh
	// scripts/run me#1.sh <nil>
	// a%20b/c%3Fd
}

func ExampleValidAuthority() {
	for _, s := range []string{"deploy", "team.tools", "Deploy", "-x", "a..b"} {
		fmt.Println(s, skilluri.ValidAuthority(s))
	}
	// Output:
	// deploy true
	// team.tools true
	// Deploy false
	// -x false
	// a..b false
}
