// Package examples holds the example skills compiled into the binary: the
// catalog `skillreg serve` publishes when no configuration is given, and
// documentation for people writing skills.
package examples

import (
	"embed"
	"io/fs"
)

//go:embed all:skills
var files embed.FS

// Skills is the example skills tree (the contents of examples/skills).
var Skills fs.FS

func init() {
	sub, err := fs.Sub(files, "skills")
	if err != nil {
		panic(err)
	}
	Skills = sub
}
