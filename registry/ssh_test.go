package registry

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/sshgit"
	"github.com/skillreg/skillreg/internal/testkit"
)

// sshRegistry is a registry over a real pool, and a repository of skills
// served over real SSH to a passphrase-protected key.
type sshRegistry struct {
	reg     *Registry
	srv     *sshgit.Server
	keyFile string
	logs    *testkit.Buffer
}

const sshPass = "registry passphrase 7"

func newSSHRegistry(t *testing.T) *sshRegistry {
	t.Helper()
	git := gittest.NewServer(t)
	remote := git.CreateRepo("skills")
	remote.WriteFiles(map[string]string{"skills/a/SKILL.md": testkit.SkillMD("a"), "skills/b/SKILL.md": testkit.SkillMD("b")})
	remote.Commit("initial")
	remote.Push("main")
	keyFile, _, pub := sshgit.NewKey(t, sshPass)
	srv := sshgit.Start(t, filepath.Dir(remote.BareDir()), pub)
	logs := &testkit.Buffer{}
	reg := New(Options{Git: newPool(t), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return &sshRegistry{reg: reg, srv: srv, keyFile: keyFile, logs: logs}
}

func (f *sshRegistry) source(c catalog.SSHAuth) catalog.Source {
	return catalog.Source{Name: "team", Kind: catalog.KindGit, Git: &catalog.GitSource{Repo: repoOf(f.srv.URL("skills")), Path: "skills", SSH: c}}
}

func passphrase() (string, error) { return sshPass, nil }

// TestSSHSourceSyncs: a source's SSH settings reach the object store (the
// key file, the passphrase read at the sync, known_hosts), and the
// passphrase is told to the scrubber.
func TestSSHSourceSyncs(t *testing.T) {
	f := newSSHRegistry(t)
	known := sshgit.WriteKnownHosts(t, f.srv.KnownHostsLine())
	f.reg.SetSources([]catalog.Source{f.source(catalog.SSHAuth{KeyFile: f.keyFile, Passphrase: passphrase, PassphraseID: "env:X", KnownHostsFile: known})})
	mustSync(t, f.reg, "team")
	if got := skillNames(f.reg.Current(), "team"); got != "a,b" {
		t.Fatalf("skills %s, want a,b", got)
	}
	if got := f.reg.redact.String("x " + sshPass + " y"); strings.Contains(got, sshPass) {
		t.Fatalf("the scrubber does not know the passphrase: %q", got)
	}
	if strings.Contains(f.logs.String(), "insecure") {
		t.Fatalf("a warning about the host key with known_hosts configured: %s", f.logs.String())
	}
}

// TestSSHHostKeyStalls: a changed host key stalls the source
// (host_key_rejected, with the hint), an unusable passphrase is a
// transient failure naming the key file.
func TestSSHHostKeyStalls(t *testing.T) {
	f := newSSHRegistry(t)
	known := sshgit.WriteKnownHosts(t, sshgit.OtherHostKeyLine(t, f.srv.Addr()))
	f.reg.SetSources([]catalog.Source{f.source(catalog.SSHAuth{KeyFile: f.keyFile, Passphrase: passphrase, PassphraseID: "env:X", KnownHostsFile: known})})
	err := f.reg.SyncNow(context.Background(), "team")
	if !errors.Is(err, gitstore.ErrHostKey) {
		t.Fatalf("sync: %v; want ErrHostKey", err)
	}
	st := stateOf(f.reg, "team")
	if st.LastResult != catalog.ResultStalled || st.Stalled != catalog.StallHostKey || !strings.Contains(st.LastError, "changed") || !strings.Contains(st.Hint, "known_hosts") {
		t.Fatalf("state %+v; want stalled host_key_rejected", st)
	}

	wrong := func() (string, error) { return "not it", nil }
	f.reg.SetSources([]catalog.Source{f.source(catalog.SSHAuth{KeyFile: f.keyFile, Passphrase: wrong, PassphraseID: "env:Y", KnownHostsFile: known})})
	err = f.reg.SyncNow(context.Background(), "team")
	st = stateOf(f.reg, "team")
	if !errors.Is(err, gitstore.ErrSSHKey) || st.LastResult != catalog.ResultFailed || !strings.Contains(st.LastError, f.keyFile) {
		t.Fatalf("wrong passphrase: %v, state %+v; want a transient ErrSSHKey naming the file", err, st)
	}
}

// TestSSHInsecureWarnsEverySync: insecure_ignore_host_key syncs without a
// known_hosts file and says so at every sync, unchanged ones included.
func TestSSHInsecureWarnsEverySync(t *testing.T) {
	f := newSSHRegistry(t)
	f.reg.SetSources([]catalog.Source{f.source(catalog.SSHAuth{KeyFile: f.keyFile, Passphrase: passphrase, PassphraseID: "env:X", InsecureIgnoreHostKey: true})})
	for range 3 {
		mustSync(t, f.reg, "team")
	}
	if got := skillNames(f.reg.Current(), "team"); got != "a,b" {
		t.Fatalf("skills %s, want a,b", got)
	}
	if n := strings.Count(f.logs.String(), "ssh host key not checked"); n != 3 {
		t.Fatalf("%d warnings for 3 syncs:\n%s", n, f.logs.String())
	}
	if strings.Contains(f.logs.String(), sshPass) {
		t.Fatal("the passphrase is in the log")
	}
}

// TestSSHSourceEqual: a change of any SSH setting is a change of the
// source (restarted and resynced at a reload).
func TestSSHSourceEqual(t *testing.T) {
	base := catalog.SSHAuth{KeyFile: "/k", Passphrase: passphrase, PassphraseID: "env:P", KnownHostsFile: "/kh"}
	g := catalog.GitSource{Repo: repoOf("git@example.com:org/repo.git"), SSH: base}
	if !g.Equal(g) {
		t.Fatal("a source differs from itself")
	}
	for name, change := range map[string]func(*catalog.SSHAuth){
		"key file":      func(a *catalog.SSHAuth) { a.KeyFile = "/k2" },
		"passphrase":    func(a *catalog.SSHAuth) { a.PassphraseID = "env:Q" },
		"no passphrase": func(a *catalog.SSHAuth) { a.Passphrase, a.PassphraseID = nil, "" },
		"known hosts":   func(a *catalog.SSHAuth) { a.KnownHostsFile = "/kh2" },
		"insecure":      func(a *catalog.SSHAuth) { a.InsecureIgnoreHostKey = true },
	} {
		o := g
		change(&o.SSH)
		if g.Equal(o) || o.Equal(g) {
			t.Errorf("%s: the change is not seen", name)
		}
	}
}
