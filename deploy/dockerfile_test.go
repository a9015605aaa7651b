package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/config"
)

type dockerInstr struct {
	cmd, args string
	line      int
}

type dockerStage struct {
	from, name string
	instrs     []dockerInstr
}

func (s *dockerStage) all(cmd string) []dockerInstr {
	var out []dockerInstr
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

func (s *dockerStage) last(cmd string) (dockerInstr, bool) {
	all := s.all(cmd)
	if len(all) == 0 {
		return dockerInstr{}, false
	}
	return all[len(all)-1], true
}

func parseDockerfile(t *testing.T) []*dockerStage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages []*dockerStage
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // comments inside a continued instruction
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		full := cur.String()
		cur.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		in := dockerInstr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := &dockerStage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("Dockerfile:%d: %s before FROM", in.line, in.cmd)
			}
			continue
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: want a build stage and a final stage, got %d stages", len(stages))
	}
	return stages
}

// execForm decodes an instruction written in JSON (exec) form.
func execForm(t *testing.T, in dockerInstr) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(in.args), &out); err != nil {
		t.Fatalf("Dockerfile:%d: %s must be in exec form [\"...\"]: %v", in.line, in.cmd, err)
	}
	return out
}

// copyInstr is a parsed COPY: its options, sources and destination.
type copyInstr struct {
	from, chown string
	srcs        []string
	dst         string
	line        int
}

func copies(t *testing.T, st *dockerStage) []copyInstr {
	t.Helper()
	var out []copyInstr
	for _, in := range st.all("COPY") {
		f := strings.Fields(in.args)
		c := copyInstr{line: in.line}
		for len(f) > 0 && strings.HasPrefix(f[0], "--") {
			k, v, _ := strings.Cut(strings.TrimPrefix(f[0], "--"), "=")
			switch k {
			case "from":
				c.from = v
			case "chown":
				c.chown = v
			}
			f = f[1:]
		}
		if len(f) < 2 {
			t.Fatalf("Dockerfile:%d: COPY needs a source and a destination", in.line)
		}
		c.srcs, c.dst = f[:len(f)-1], f[len(f)-1]
		out = append(out, c)
	}
	return out
}

// imageUser is the numeric user of the image's final stage.
func imageUser(t *testing.T) int64 {
	t.Helper()
	stages := parseDockerfile(t)
	final := stages[len(stages)-1]
	in, ok := final.last("USER")
	if !ok {
		t.Fatalf("Dockerfile: the final stage sets no USER: the daemon would run as root")
	}
	u, _, _ := strings.Cut(in.args, ":")
	uid, err := strconv.ParseInt(u, 10, 64)
	if err != nil {
		t.Fatalf("Dockerfile:%d: USER %q is not numeric (runAsNonRoot can only verify a numeric user)", in.line, in.args)
	}
	if uid == 0 {
		t.Fatalf("Dockerfile:%d: USER is root", in.line)
	}
	return uid
}

// goBuild finds `go build` in a command line and returns its environment
// assignments and arguments (flags and package).
func goBuild(cmdline string) (env map[string]string, args []string, ok bool) {
	for _, part := range strings.Split(cmdline, "&&") {
		w := shellWords(strings.TrimSpace(part))
		env = map[string]string{}
		for len(w) > 0 && strings.Contains(w[0], "=") && !strings.HasPrefix(w[0], "-") {
			k, v, _ := strings.Cut(w[0], "=")
			env[k] = v
			w = w[1:]
		}
		if len(w) >= 2 && (w[0] == "go" || strings.HasSuffix(w[0], "/go") || w[0] == "$(GO)") && w[1] == "build" {
			return env, w[2:], true
		}
	}
	return nil, nil, false
}

// buildFlags keeps what defines the binary: -trimpath, -ldflags, -tags and
// the package; drops -o.
func buildFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-o" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// makeBuild reads `make build`'s command from the Makefile, with its
// variables expanded except VERSION, which becomes ${VERSION}.
func makeBuild(t *testing.T) (map[string]string, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"VERSION": "${VERSION}"}
	varRE := regexp.MustCompile(`^([A-Z_]+)\s*[:?]?=\s*(.*)$`)
	var recipe string
	inBuild := false
	for _, line := range strings.Split(string(data), "\n") {
		if m := varRE.FindStringSubmatch(line); m != nil && m[1] != "VERSION" {
			vars[m[1]] = m[2]
		}
		if strings.HasPrefix(line, "build:") {
			inBuild = true
			continue
		}
		if inBuild && strings.HasPrefix(line, "\t") && strings.Contains(line, " build ") {
			recipe = strings.TrimSpace(line)
			break
		}
		if inBuild && !strings.HasPrefix(line, "\t") {
			inBuild = false
		}
	}
	if recipe == "" {
		t.Fatalf("Makefile: no go build command under build:")
	}
	expand := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	for i := 0; i < 5; i++ {
		recipe = expand.ReplaceAllStringFunc(recipe, func(s string) string {
			name := s[2 : len(s)-1]
			if name == "GO" {
				return "go"
			}
			if v, ok := vars[name]; ok {
				return v
			}
			return s
		})
	}
	env, args, ok := goBuild(recipe)
	if !ok {
		t.Fatalf("Makefile: cannot read the build command %q", recipe)
	}
	return env, buildFlags(args)
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	stages := parseDockerfile(t)
	final := stages[len(stages)-1]

	t.Run("build", func(t *testing.T) {
		wantEnv, wantArgs := makeBuild(t)
		var found bool
		for _, st := range stages[:len(stages)-1] {
			sawVersion := false
			for _, in := range st.instrs {
				if in.cmd == "ARG" && strings.HasPrefix(in.args, "VERSION") {
					sawVersion = true
				}
				if in.cmd != "RUN" {
					continue
				}
				env, args, ok := goBuild(in.args)
				if !ok {
					continue
				}
				found = true
				if !sawVersion {
					t.Errorf("Dockerfile:%d: go build before ARG VERSION: the version cannot be passed as a build argument", in.line)
				}
				for k, v := range wantEnv {
					if env[k] != v {
						t.Errorf("Dockerfile:%d: go build with %s=%q, make build sets %q", in.line, k, env[k], v)
					}
				}
				if got := buildFlags(args); !slices.Equal(got, wantArgs) {
					t.Errorf("Dockerfile:%d: go build %q\nmake build:  go build %q", in.line, got, wantArgs)
				}
			}
		}
		if !found {
			t.Fatalf("Dockerfile: no build stage runs go build")
		}
	})

	t.Run("final stage", func(t *testing.T) {
		if final.from != "scratch" {
			t.Errorf("final stage FROM %s: want scratch (nothing but the static binary)", final.from)
		}
		uid := imageUser(t)
		cps := copies(t, final)
		dsts := map[string]copyInstr{}
		for _, c := range cps {
			dsts[c.dst] = c
		}
		if _, ok := dsts["/etc/ssl/certs/ca-certificates.crt"]; !ok {
			t.Errorf("no CA certificates at /etc/ssl/certs/ca-certificates.crt: https sources would fail")
		}
		pw, ok := dsts["/etc/passwd"]
		if !ok || pw.from != "" {
			t.Errorf("want /etc/passwd copied from the build context")
		} else {
			data, err := os.ReadFile(filepath.Join(repoRoot, pw.srcs[0]))
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(`(?m)^[a-z_][a-z0-9_-]*:x:` + strconv.FormatInt(uid, 10) + `:`).Match(data) {
				t.Errorf("%s has no entry for uid %d", pw.srcs[0], uid)
			}
		}
		ep, ok := final.last("ENTRYPOINT")
		if !ok || !slices.Equal(execForm(t, ep), []string{"/skillreg"}) {
			t.Errorf("ENTRYPOINT: want [\"/skillreg\"]")
		}
		if bin, ok := dsts["/skillreg"]; !ok || bin.from == "" {
			t.Errorf("/skillreg is not copied from the build stage")
		}

		cmdIn, ok := final.last("CMD")
		if !ok {
			t.Fatalf("no CMD")
		}
		args := parseServe(t, fmt.Sprintf("Dockerfile:%d CMD", cmdIn.line), execForm(t, cmdIn))
		port := listenPort(t, "Dockerfile CMD", args["listen"])
		ex, ok := final.last("EXPOSE")
		if !ok || strings.TrimSuffix(ex.args, "/tcp") != strconv.Itoa(port) {
			t.Errorf("EXPOSE %q: want the --listen port %d", ex.args, port)
		}
		vol, ok := final.last("VOLUME")
		if !ok || !(vol.args == args["data"] || slices.Contains(execFormOrWords(vol.args), args["data"])) {
			t.Errorf("VOLUME %q: want the --data directory %s", vol.args, args["data"])
		}
		data, ok := dsts[args["data"]]
		if !ok || !strings.HasPrefix(data.chown, strconv.FormatInt(uid, 10)) {
			t.Errorf("--data %s: want it created owned by %d (COPY --chown), or a fresh volume is not writable", args["data"], uid)
		}
		cfg, ok := dsts[args["config"]]
		if !ok || cfg.from != "" {
			t.Fatalf("--config %s: not copied from the build context", args["config"])
		}
		raw, err := os.ReadFile(filepath.Join(repoRoot, cfg.srcs[0]))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := config.Parse(raw, path.Dir(args["config"])); err != nil {
			t.Errorf("%s does not load with the daemon's config loader: %v", cfg.srcs[0], err)
		}
	})

	t.Run("context", func(t *testing.T) {
		ign := readDockerignore(t)
		for _, st := range stages {
			for _, c := range copies(t, st) {
				if c.from != "" {
					continue
				}
				for _, src := range c.srcs {
					if src == "." {
						continue
					}
					if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
						t.Errorf("Dockerfile:%d: COPY %s: %v", c.line, src, err)
					}
					if ign.excludes(src) {
						t.Errorf("Dockerfile:%d: COPY %s, which .dockerignore leaves out of the context", c.line, src)
					}
				}
			}
		}
		for _, p := range []string{".git", "bin/skillreg", "store/testdata/x", "registry/x.test"} {
			if !ign.excludes(p) {
				t.Errorf(".dockerignore sends %s to the build", p)
			}
		}
	})
}

func execFormOrWords(s string) []string {
	var out []string
	if json.Unmarshal([]byte(s), &out) == nil {
		return out
	}
	return strings.Fields(s)
}

// dockerignore matches paths the way the builder does: patterns relative to
// the context root, *, ? and **, a path excluded when it or a parent
// matches, the last matching pattern winning, ! re-including.
type dockerignore []struct {
	re     *regexp.Regexp
	negate bool
}

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var ign dockerignore
	for _, line := range strings.Split(string(data), "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		p = strings.TrimPrefix(path.Clean(p), "/")
		if strings.ContainsAny(p, "[\\") {
			t.Fatalf(".dockerignore pattern %q: this test only understands *, ? and **", p)
		}
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(?:.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		re.WriteString("$")
		ign = append(ign, struct {
			re     *regexp.Regexp
			negate bool
		}{regexp.MustCompile(re.String()), neg})
	}
	return ign
}

func (ign dockerignore) excludes(p string) bool {
	p = path.Clean(p)
	excluded := false
	for _, pat := range ign {
		matched := false
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			if pat.re.MatchString(q) {
				matched = true
				break
			}
		}
		if matched {
			excluded = !pat.negate
		}
	}
	return excluded
}

// TestDockerBuildContext builds the binary from only what .dockerignore
// lets into the build context, as the image's build stage does.
func TestDockerBuildContext(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the daemon from a copy of the context")
	}
	ign := readDockerignore(t)
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = repoRoot
	out, err := ls.Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout?)", err)
	}
	ctxDir := t.TempDir()
	n := 0
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f == "" || ign.excludes(f) {
			continue
		}
		src := filepath.Join(repoRoot, f)
		info, err := os.Lstat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or not a file
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(ctxDir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(t.TempDir(), "skillreg"), "./cmd/skillreg")
	build.Dir = ctxDir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in a context of the %d files .dockerignore lets through: %v\n%s", n, err, b)
	}
}
