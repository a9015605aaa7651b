// Package deploy_test checks the deployment files (Dockerfile, the systemd
// unit, the Kubernetes manifests) against the daemon they deploy. No
// container engine or cluster runs here, so the checks use the real parts
// that do: the manifests are decoded strictly with the Kubernetes API types,
// flags are parsed with the flag set the built binary prints for
// `serve --help`, the ConfigMap's config is loaded with the daemon's own
// loader, and the probe paths are asked of a running daemon started the way
// each deployment starts it.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
)

// daemonGrace is how long the daemon lets in-flight requests finish on
// SIGTERM (issue 8: "bounded, 10 s default"). Stop timeouts must exceed it.
const daemonGrace = 10 * time.Second

var (
	repoRoot string // the module root, one level above this directory
	binDir   string // where the daemon binary is built, removed at exit

	buildOnce sync.Once
	binPath   string
	buildErr  error

	helpOnce sync.Once
	helpText string
	helpErr  error
)

func TestMain(m *testing.M) {
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	repoRoot = root
	if binDir, err = os.MkdirTemp("", "skillreg-deploy-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// daemonBinary builds cmd/skillreg once, the way `make build` does.
func daemonBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		out := filepath.Join(binDir, "skillreg")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=deploy-test", "-o", out, "./cmd/skillreg")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/skillreg: %v\n%s", err, b)
			return
		}
		binPath = out
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// serveFlagSet rebuilds `skillreg serve`'s flag set from its --help output:
// flags printed with a type take a value, the others are booleans.
func serveFlagSet(t *testing.T) *flag.FlagSet {
	t.Helper()
	bin := daemonBinary(t)
	helpOnce.Do(func() {
		cmd := exec.Command(bin, "serve", "--help")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			helpErr = fmt.Errorf("skillreg serve --help: %v\n%s", err, out.String())
		}
		helpText = out.String()
	})
	if helpErr != nil {
		t.Fatal(helpErr)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// flag.PrintDefaults: "  -name type" (a space before the type), or
	// "  -x\tusage" for a one-letter boolean.
	re := regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_.-]*)(?: (\S+))?`)
	for _, line := range strings.Split(helpText, "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[2] == "" {
			fs.Bool(m[1], false, "")
		} else {
			fs.String(m[1], "", "")
		}
	}
	if fs.Lookup("listen") == nil || fs.Lookup("data") == nil || fs.Lookup("config") == nil {
		t.Fatalf("serve --help does not list --config, --listen and --data:\n%s", helpText)
	}
	return fs
}

// parseServe parses a deployment's arguments (starting with "serve") with
// the daemon's serve flags and returns the flag values it sets.
func parseServe(t *testing.T, where string, args []string) map[string]string {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("%s: arguments %q do not start with the serve command", where, args)
	}
	fs := serveFlagSet(t)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("%s: skillreg serve does not accept %q: %v", where, args[1:], err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("%s: skillreg serve takes no arguments, got %q", where, fs.Args())
	}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	for _, name := range []string{"config", "listen", "data"} {
		if set[name] == "" {
			t.Errorf("%s: --%s is not set; the default (the embedded examples, loopback, ~/.local/state) is wrong for a deployment", where, name)
		}
	}
	return set
}

func listenPort(t *testing.T, where, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: --listen %q: %v", where, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 {
		t.Fatalf("%s: --listen %q has no fixed port", where, addr)
	}
	return n
}

// shellWords splits a shell command line (quotes, no expansions).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// daemon is a skillreg serve process started by a test.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	err  error // from Wait, once done is closed

	mu  sync.Mutex
	log bytes.Buffer
}

func (d *daemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// startDaemon runs the built binary with args and env and waits for its
// "serving" log line.
func startDaemon(t *testing.T, args, env []string) *daemon {
	t.Helper()
	d := &daemon{cmd: exec.Command(daemonBinary(t), args...), done: make(chan struct{})}
	d.cmd.Env = env
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			d.mu.Lock()
			d.log.Write(sc.Bytes())
			d.log.WriteByte('\n')
			d.mu.Unlock()
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" && line.Addr != "" {
				select {
				case addr <- line.Addr:
				default:
				}
			}
		}
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	})
	select {
	case d.addr = <-addr:
	case <-d.done:
		t.Fatalf("skillreg %q exited before serving: %v\n%s", args, d.err, d.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("skillreg %q did not log \"serving\" within 30s:\n%s", args, d.logs())
	}
	return d
}

func (d *daemon) get(t *testing.T, p string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+p, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", p, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// waitReady polls /readyz until 200, as the readiness probe would.
func (d *daemon) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := d.get(t, "/readyz")
		if code == http.StatusOK {
			return
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("GET /readyz: %d %s\n%s", code, body, d.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends sig and waits for the exit, at most within.
func (d *daemon) stop(t *testing.T, sig syscall.Signal, within time.Duration) error {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
		return d.err
	case <-time.After(within):
		t.Fatalf("skillreg did not exit within %v of %v:\n%s", within, sig, d.logs())
		return nil
	}
}

// localArgs rewrites a deployment's serve arguments for this machine: a
// loopback port chosen by the kernel, a temporary data directory, and the
// given config file.
func localArgs(args []string, cfgFile, dataDir string) []string {
	out := slices.Clone(args)
	for i := 1; i < len(out)-1; i++ {
		switch strings.TrimLeft(out[i], "-") {
		case "listen":
			out[i+1] = "127.0.0.1:0"
		case "data":
			out[i+1] = dataDir
		case "config":
			out[i+1] = cfgFile
		}
	}
	return out
}

// probePaths are the HTTP paths the StatefulSet's probes GET.
func probePaths(c *corev1.Container) []string {
	var out []string
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		if p != nil && p.HTTPGet != nil {
			out = append(out, p.HTTPGet.Path)
		}
	}
	return out
}

// TestDaemonServesDeployments starts the real daemon the way the image and
// the StatefulSet start it, and asks it what their probes ask.
func TestDaemonServesDeployments(t *testing.T) {
	t.Parallel()
	ms := loadManifests(t)
	sts, c := theStatefulSet(t, ms)
	probes := probePaths(c)
	grace := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
	if g := sts.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}

	t.Run("image", func(t *testing.T) {
		stages := parseDockerfile(t)
		final := stages[len(stages)-1]
		cmdIn, _ := final.last("CMD")
		args := execForm(t, cmdIn)
		set := parseServe(t, "Dockerfile CMD", args)
		var cfgSrc string
		for _, cp := range copies(t, final) {
			if cp.dst == set["config"] {
				cfgSrc = filepath.Join(repoRoot, cp.srcs[0])
			}
		}
		if cfgSrc == "" {
			t.Fatalf("the image has no file at --config %s", set["config"])
		}
		d := startDaemon(t, localArgs(args, cfgSrc, t.TempDir()), nil)
		d.waitReady(t)
		for _, p := range append([]string{"/healthz", "/readyz"}, probes...) {
			if code, body := d.get(t, p); code != http.StatusOK {
				t.Errorf("GET %s: %d %s", p, code, body)
			}
		}
		// docker stop waits 10 s before SIGKILL unless --stop-timeout says more.
		if err := d.stop(t, syscall.SIGTERM, daemonGrace); err != nil {
			t.Errorf("exit after SIGTERM (docker stop): %v\n%s", err, d.logs())
		}
	})

	t.Run("statefulset", func(t *testing.T) {
		args := parseServe(t, "StatefulSet", c.Args)
		cfg, raw := podConfig(t, ms, sts, c, args["config"])
		// The pod's config as it is, but with its git sources served from a
		// local directory of the same name: no network here.
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
			t.Fatal(err)
		}
		var srcs []any
		for _, s := range cfg.Sources {
			srcs = append(srcs, map[string]any{"name": s.Name, "dir": filepath.Join(repoRoot, "examples", "skills")})
		}
		doc["sources"] = srcs
		local, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		cfgFile := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(cfgFile, local, 0o600); err != nil {
			t.Fatal(err)
		}
		d := startDaemon(t, localArgs(c.Args, cfgFile, t.TempDir()), podEnv(t, ms, c))
		d.waitReady(t)
		// With clients configured, /mcp wants a token; the kubelet has none,
		// so the probes must answer without one.
		for _, p := range probes {
			if code, body := d.get(t, p); code != http.StatusOK {
				t.Errorf("probe GET %s: %d %s", p, code, body)
			}
		}
		// So must the metrics, for Prometheus.
		if p, ok := sts.Spec.Template.Annotations["prometheus.io/path"]; ok {
			code, body := d.get(t, p)
			if code != http.StatusOK || !strings.Contains(body, "skillreg_") {
				t.Errorf("GET %s (prometheus.io/path): %d, want 200 with skillreg_ metrics", p, code)
			}
		}
		// /mcp does want one: the ConfigMap's clients protect it.
		mcpResp, err := http.Post("http://"+d.addr+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		mcpResp.Body.Close()
		if mcpResp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST /mcp without a token: %d, want 401: the ConfigMap's clients do not protect /mcp", mcpResp.StatusCode)
		}
		// The Secret's webhook secret reaches the daemon under the name it
		// reads, so the webhook endpoint exists.
		resp, err := http.Post("http://"+d.addr+"/webhooks/github", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("POST /webhooks/github: %d: the webhook is not mounted with the pod's environment\n%s", resp.StatusCode, d.logs())
		}
		if err := d.stop(t, syscall.SIGTERM, grace); err != nil {
			t.Errorf("exit after SIGTERM (pod termination): %v\n%s", err, d.logs())
		}
	})
}
