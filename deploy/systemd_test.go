package deploy_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unitFile is a systemd unit: section -> key -> values in order.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, file string) unitFile {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	var cont string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if cont != "" {
			line = cont + " " + line
			cont = ""
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cont = strings.TrimSuffix(line, "\\")
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not a key=value line in a section: %q", file, i+1, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		u[section][k] = append(u[section][k], v)
	}
	return u
}

func (u unitFile) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// systemdSeconds parses a systemd time span such as 30s, 1min 30s or 90.
func systemdSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	r := strings.NewReplacer("min", "m", "sec", "s", " ", "")
	return time.ParseDuration(r.Replace(s))
}

// execArgs splits an Exec*= line, dropping systemd's prefixes (-, @, :, +, !).
func execArgs(v string) []string {
	w := shellWords(v)
	if len(w) > 0 {
		w[0] = strings.TrimLeft(w[0], "-@:+!")
	}
	return w
}

var unitFilePath = filepath.Join("systemd", "skillreg.service")

func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, unitFilePath)
	svc := u["Service"]
	if svc == nil {
		t.Fatalf("no [Service] section")
	}
	start := execArgs(u.get("Service", "ExecStart"))
	if len(start) < 2 || !filepath.IsAbs(start[0]) || filepath.Base(start[0]) != "skillreg" {
		t.Fatalf("ExecStart %q: want an absolute path to skillreg", start)
	}
	args := parseServe(t, "ExecStart", start[1:])
	if sd := u.get("Service", "StateDirectory"); sd == "" {
		t.Errorf("no StateDirectory: --data needs a writable directory under ProtectSystem=strict")
	} else if args["data"] != "/var/lib/"+sd {
		t.Errorf("--data %s is not the StateDirectory /var/lib/%s", args["data"], sd)
	}
	if cd := u.get("Service", "ConfigurationDirectory"); cd == "" || !strings.HasPrefix(args["config"], "/etc/"+cd+"/") {
		t.Errorf("--config %s is not in the ConfigurationDirectory /etc/%s", args["config"], cd)
	}
	reload := execArgs(u.get("Service", "ExecReload"))
	if len(reload) == 0 || path.Base(reload[0]) != "kill" || !(slices.Contains(reload, "-HUP") || slices.Contains(reload, "-SIGHUP") || (slices.Contains(reload, "-s") && slices.Contains(reload, "HUP"))) || !slices.Contains(reload, "$MAINPID") {
		t.Errorf("ExecReload %q: want kill -HUP $MAINPID (the daemon reloads its config on SIGHUP)", reload)
	}
	if ks := u.get("Service", "KillSignal"); ks != "" && ks != "SIGTERM" && ks != "TERM" {
		t.Errorf("KillSignal %s: the daemon shuts down gracefully on SIGTERM", ks)
	}
	stop, err := systemdSeconds(u.get("Service", "TimeoutStopSec"))
	if err != nil || stop <= daemonGrace {
		t.Errorf("TimeoutStopSec %q: must exceed the daemon's %v shutdown grace", u.get("Service", "TimeoutStopSec"), daemonGrace)
	}
	if r := u.get("Service", "Restart"); r != "on-failure" && r != "always" {
		t.Errorf("Restart=%s: want on-failure", r)
	}
	if u.get("Service", "DynamicUser") != "yes" && (u.get("Service", "User") == "" || u.get("Service", "User") == "root") {
		t.Errorf("the service runs as root: set DynamicUser=yes or User=")
	}
	for key, want := range map[string][]string{
		"NoNewPrivileges": {"yes", "true"},
		"ProtectSystem":   {"strict"},
		"ProtectHome":     {"yes", "true", "read-only", "tmpfs"},
		"PrivateTmp":      {"yes", "true"},
	} {
		if got := u.get("Service", key); !slices.Contains(want, got) {
			t.Errorf("%s=%q: want one of %q", key, got, want)
		}
	}
	if fams := u.get("Service", "RestrictAddressFamilies"); fams != "" {
		for _, need := range []string{"AF_INET", "AF_INET6", "AF_UNIX"} {
			if !slices.Contains(strings.Fields(fams), need) {
				t.Errorf("RestrictAddressFamilies lacks %s (AF_UNIX: the admin socket in the data directory)", need)
			}
		}
	}
	if ef := u.get("Service", "EnvironmentFile"); ef == "" {
		t.Errorf("no EnvironmentFile: where do SKILLREG_WEBHOOK_SECRET and the GitHub token come from?")
	}

	// systemd's own checker, where it is installed: unknown keys and bad
	// values are errors.
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("systemd-analyze not installed: unit not verified by systemd")
		return
	}
	data, err := os.ReadFile(unitFilePath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	unit := strings.ReplaceAll(string(data), start[0], daemonBinary(t))
	if err := os.WriteFile(filepath.Join(dir, "skillreg.service"), []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", filepath.Join(dir, "skillreg.service"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || strings.TrimSpace(out.String()) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out.String())
	}
}

// TestSystemdReload starts the daemon with the unit's ExecStart flags,
// changes the --config file and sends what ExecReload sends: the daemon
// must keep serving and take the new file.
func TestSystemdReload(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, unitFilePath)
	start := execArgs(u.get("Service", "ExecStart"))
	skills := filepath.Join(repoRoot, "examples", "skills")
	source := func(name string) string {
		return fmt.Sprintf("  - name: %s\n    dir: %s\n", name, skills)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte("log:\n  format: json\nsources:\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(source("first"))
	d := startDaemon(t, localArgs(start[1:], cfg, t.TempDir()), nil)
	d.waitReady(t)

	write(source("first") + source("second"))
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-d.done:
			t.Fatalf("skillreg exited on SIGHUP (systemctl reload): %v\n%s", d.err, d.logs())
		default:
		}
		code, body := d.get(t, "/readyz")
		if code == http.StatusOK && strings.Contains(body, `"source":"second"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGHUP the daemon does not serve the source added to --config: /readyz %d %s\n%s", code, body, d.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop, _ := systemdSeconds(u.get("Service", "TimeoutStopSec"))
	if err := d.stop(t, syscall.SIGTERM, stop); err != nil {
		t.Errorf("exit after SIGTERM (systemctl stop): %v\n%s", err, d.logs())
	}
}
