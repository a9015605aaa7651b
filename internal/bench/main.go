// Command bench runs skillreg's performance comparisons and prints one
// table: each row puts a skillreg figure next to its peer (a standard tool
// or a minimal server doing the same job) measured in the same run, with
// the ratio and the goal, because this machine is shared and noisy and only
// ratios taken side by side mean anything.
//
//	go run ./internal/bench [-only NAME,...] [-skills N]
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// Row is one line of the table.
type Row struct {
	Name  string // what was measured
	Ours  string // skillreg's figure, with its unit
	Peer  string // the peer's figure, with its unit ("" when there is none)
	Ratio string // ours/peer, or another derived figure
	Goal  string // the target, as the issue states it
	OK    bool   // whether the goal was met
}

// Env is what every section gets.
type Env struct {
	Skills int    // corpus size
	Tmp    string // a scratch directory, removed at the end
	Log    func(format string, args ...any)
}

type section struct {
	name string
	run  func(*Env) ([]Row, error)
}

var sections []section

// register adds a section; sections run in the order of their names.
func register(name string, run func(*Env) ([]Row, error)) {
	sections = append(sections, section{name, run})
}

func main() {
	only := flag.String("only", "", "comma-separated section names to run (default all)")
	skills := flag.Int("skills", 10000, "number of skills in the generated corpus")
	flag.Parse()
	tmp, err := os.MkdirTemp("", "skillreg-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	env := &Env{Skills: *skills, Tmp: tmp, Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "bench: "+f+"\n", a...) }}
	slices.SortFunc(sections, func(a, b section) int { return strings.Compare(a.name, b.name) })
	var rows []Row
	failed := false
	for _, s := range sections {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), s.name) {
			continue
		}
		env.Log("running %s", s.name)
		r, err := s.run(env)
		if err != nil {
			env.Log("%s: %v", s.name, err)
			failed = true
		}
		rows = append(rows, r...)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measurement\tskillreg\tpeer\tratio\tgoal\tmet")
	for _, r := range rows {
		met := "yes"
		if !r.OK {
			met = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Ours, r.Peer, r.Ratio, r.Goal, met)
	}
	tw.Flush()
	if failed {
		os.Exit(1)
	}
}
