package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
)

func cmdToken(_ context.Context, e *env, args []string) int {
	fs := newFlags(e, "token new", "NAME [--sources a,b]", "Create a client token. It is printed once: give it to the client.\n"+
		"Paste the printed lines under clients: in the configuration; only the token's SHA-256 is kept there")
	sources := fs.String("sources", "*", "comma-separated sources the client may see, or * for all")
	if len(args) == 0 || args[0] != "new" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fs.Usage()
			return exitOK
		}
		fs.Usage()
		return exitUsage
	}
	rest, code, ok := parseFlags(fs, args[1:])
	if !ok {
		return code
	}
	if len(rest) != 1 || strings.TrimSpace(rest[0]) == "" {
		fs.Usage()
		return exitUsage
	}
	var list []string
	for _, s := range strings.Split(*sources, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if s != "*" && !catalog.ValidSourceName(s) {
			fmt.Fprintf(e.stderr, "skillreg token new: %q is not a source name\n", s)
			return exitUsage
		}
		list = append(list, fmt.Sprintf("%q", s))
	}
	if len(list) == 0 {
		fmt.Fprintln(e.stderr, "skillreg token new: --sources is empty")
		return exitUsage
	}
	tok, hash, err := access.NewToken()
	if err != nil {
		fmt.Fprintf(e.stderr, "skillreg token new: %v\n", err)
		return exitProblems
	}
	fmt.Fprintf(e.stdout, "token for %s (shown once; give it to the client, e.g. as Authorization: Bearer <token>):\n\n  %s\n\n", rest[0], tok)
	fmt.Fprintf(e.stdout, "add under clients: in the configuration, then reload (SIGHUP):\n\n  - name: %q\n    token_sha256: %s\n    sources: [%s]\n", rest[0], hash, strings.Join(list, ", "))
	return exitOK
}
