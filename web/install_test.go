package web

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
)

// TestPublicSourcesAndInstallCommands: with access control on, a source
// marked public is shown without signing in (others still send a visitor
// to /login), its pages show the skills CLI command (always with -a), a
// private source's pages never do, and a source's page lists its skills
// and what the installers' indexes leave out.
func TestPublicSourcesAndInstallCommands(t *testing.T) {
	public := map[string]bool{}
	f := newFixture(t, defaultSources(), func(o *Options) {
		authOptions(o)
		o.Public = func() map[string]bool { return public }
		o.InstallBase = func(r *http.Request) string { return "https://skills.example.com" }
		o.Unpublished = func(_ context.Context, flt catalog.Filter, source string) []Unpublished {
			if !flt.Allows("team") || source != "team" {
				return nil
			}
			return []Unpublished{{Source: "team", Path: "hostile", Name: "hostile", Channel: "skills-v0.1", Reason: "v0.1: a reason shown to people"}}
		}
	})
	// Nothing public: the login redirect as before.
	if res, _ := f.get(t, "/skills/team/deploy-checklist"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("anonymous with no public source: %d", res.StatusCode)
	}
	public["team"] = true
	res, body := f.get(t, "/skills/team/deploy-checklist")
	if res.StatusCode != 200 || !strings.Contains(body, "npx skills add https://skills.example.com/skills/team/deploy-checklist -a claude-code") {
		t.Fatalf("public skill page: %d, install command missing", res.StatusCode)
	}
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", res.Header.Get("Cache-Control"))
	}
	if res, _ := f.get(t, "/skills/secret/payroll-export"); res.StatusCode != http.StatusNotFound {
		t.Errorf("private skill for an anonymous visitor: %d, want 404", res.StatusCode)
	}
	_, body = f.get(t, "/sources/team")
	for _, want := range []string{"npx skills add https://skills.example.com/sources/team -a claude-code", `href="/skills/team/deploy-checklist"`, "a reason shown to people", "Sign in"} {
		if !strings.Contains(body, want) {
			t.Errorf("source page lacks %q", want)
		}
	}
	_, body = f.get(t, "/")
	if strings.Contains(body, "payroll") || !strings.Contains(body, "deploy-checklist") {
		t.Errorf("anonymous catalog shows the wrong skills")
	}
	// Signed in to the secret source: its skills, and no install command
	// (the skills CLI cannot send a token).
	cookie := f.login(t, "tok-all")
	_, body = f.get(t, "/skills/secret/payroll-export", cookie)
	if strings.Contains(body, "npx skills add") {
		t.Errorf("private skill page shows an install command")
	}
	_, body = f.get(t, "/skills/team/deploy-checklist", cookie)
	if !strings.Contains(body, "npx skills add https://skills.example.com/skills/team/deploy-checklist -a claude-code") {
		t.Errorf("public skill page for a signed-in viewer lacks the command")
	}
}

// TestShellWord: whatever a repository names its folders, the install
// command a person pastes passes the URL to the shell as one word, byte
// for byte, and runs nothing (checked with the real /bin/sh).
func TestShellWord(t *testing.T) {
	for _, s := range []string{
		"https://skills.example.com/skills/team/review",
		"http://127.0.0.1:8080/sources/team",
		"https://h/skills/src/x;id/review",
		"https://h/skills/src/$(id)/`id`/review",
		"https://h/skills/src/a&b|c>d<e/f",
		"https://h/skills/src/it's/x",
		"https://h/skills/src/'';'/x",
		"https://h/skills/src/!x*?[a]{b}/~",
		"https://h/skills/src/a b/\\c",
		"",
	} {
		out, err := exec.Command("/bin/sh", "-c", "printf '%s' "+shellWord(s)).Output()
		if err != nil {
			t.Fatalf("%q: sh: %v", s, err)
		}
		if string(out) != s {
			t.Errorf("shellWord(%q) = %s: the shell read %q", s, shellWord(s), out)
		}
	}
	if got := shellWord("https://skills.example.com/skills/team/review"); strings.Contains(got, "'") {
		t.Errorf("a plain URL is quoted: %s", got)
	}
}
