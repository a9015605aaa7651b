package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/gitref"
)

// TestExampleLoads keeps config.example.yaml true: it loads with the real
// loader, and every key it shows is read.
func TestExampleLoads(t *testing.T) {
	c, err := Load(filepath.Join("..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sources) != 3 || c.Sources[1].Ref.Branch != "main" || c.Sources[1].Auth.TokenEnv != "ACME_GIT_TOKEN" {
		t.Fatalf("sources %+v", c.Sources)
	}
	if len(c.Meta) != 1 || c.Meta[0].Tool != "agentkey_skill_meta" || len(c.Clients) != 2 {
		t.Fatalf("skill_meta %+v clients %+v", c.Meta, c.Clients)
	}
	if c.OIDC == nil || c.OIDC.Audience != c.MCPResource() || len(c.Access) != 2 || c.Access[1].Emails[0] != "@acme.example.com" {
		t.Fatalf("oidc %+v access %+v", c.OIDC, c.Access)
	}
	if c.Sources[2].Poll.D() != DefaultGitPoll || c.Sources[0].Poll.D() != 2*time.Second {
		t.Fatalf("polls %v %v", c.Sources[0].Poll.D(), c.Sources[2].Poll.D())
	}
}

func TestStrictErrorsNameKeyAndLine(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ yaml, want string }{
		{"listen: x\nbogus: 1\n", `line 2: unknown key "bogus"`},
		{"sources:\n  - name: a\n    dir: " + dir + "\n    colour: red\n", `line 4: unknown key "colour"`},
		{"sources:\n  - name: a\n    dir: " + dir + "\n  - name: a\n    dir: " + dir + "\n", `line 4: sources[1].name: "a" is already the name of the source on line 2`},
		{"sources:\n  - name: a\n    dir: /does/not/exist\n", `line 2: sources[0].dir`},
		{"sources:\n  - name: A\n    dir: " + dir + "\n", `must be lowercase`},
		{"sources:\n  - name: a\n    url: https://u:p@example.com/x.git\n", `credentials do not belong in the URL`},
		{"sources:\n  - name: a\n    url: https://example.com/x.git\n    ref: {branch: a, tag: b}\n", `set exactly one of branch, tag, commit, semver, release`},
		{"sources:\n  - name: a\n    url: https://example.com/x.git\n    ref: {semver: \"not a range\"}\n", `semver`},
		{"sources:\n  - name: a\n    url: https://example.com/x.git\n    ref: {commit: abc}\n", `commit "abc" is not 40 lowercase hex digits`},
		{"sources:\n  - name: a\n    url: https://example.com/x.git\n    path: ../up\n", `inside the repository`},
		{"sources:\n  - name: a\n    url: https://example.com/x.git\n    poll: soon\n", `not a duration`},
		{"clients:\n  - name: x\n    token_sha256: short\n    sources: [\"*\"]\n", `64 lowercase hex digits`},
		{"sources:\n  - name: a\n    dir: " + dir + "\nclients:\n  - name: x\n    token_sha256: " + strings.Repeat("a", 64) + "\n    sources: [b]\n", `"b" is not a configured source`},
		{"skill_meta:\n  - skill: x\n    repo: nope\n", `must be owner/name`},
		{"log:\n  level: loud\n", `log.level`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml), dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}

func TestRelativeDirAndLimits(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "skills"), 0o755)
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte("sources:\n  - name: a\n    dir: skills\n"), 0o644)
	c, err := Load(p)
	if err != nil || c.Sources[0].Dir != filepath.Join(dir, "skills") {
		t.Fatalf("relative dir: %+v %v", c, err)
	}
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o644)
	if _, err := Load(big); err == nil {
		t.Fatal("oversized config loaded")
	}
}

func TestPublishKeys(t *testing.T) {
	dir := t.TempDir()
	c, err := Parse([]byte("sources:\n  - name: team\n    dir: "+dir+"\n    public: true\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Marketplace.Name != DefaultMarketplaceName || c.Cache.ArtifactBytes != DefaultArtifactBytes || !c.Sources[0].Public || c.TLS.Enabled() {
		t.Fatalf("defaults: %+v %+v %+v", c.Marketplace, c.Cache, c.Sources[0])
	}
	for yaml, want := range map[string]string{
		"public_url: ftp://x\n":                                           "public_url",
		"public_url: https://skills.example.com/path\n":                   "origin only",
		"public_url: https://u:p@skills.example.com\n":                    "origin only",
		"marketplace:\n  name: Claude-Skills\n":                           "kebab-case",
		"marketplace:\n  name: claude-skills\n":                           "official",
		"marketplace:\n  name: our-official-skills\n":                     "official",
		"cache:\n  artifact_bytes: -1\n":                                  "cache.artifact_bytes",
		"tls:\n  cert_file: /nonexistent/cert.pem\n":                      "set both",
		"tls:\n  cert_file: /nonexistent/c\n  key_file: /nonexistent/k\n": "tls.cert_file",
	} {
		_, err := Parse([]byte(yaml), "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one naming %q", yaml, err, want)
		}
	}
	// No credential in public_url reaches an error, whichever rule it breaks.
	for _, yaml := range []string{"public_url: https://u:s3cret@skills.example.com/x\n", "public_url: ftp://u:s3cret@skills.example.com\n"} {
		if _, err := Parse([]byte(yaml), ""); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: error %v", yaml, err)
		}
	}
	for _, ok := range []string{"public_url: https://skills.example.com\n", "public_url: https://skills.example.com/\n", "public_url: http://127.0.0.1:8080\n", "marketplace:\n  name: acme-skills\n  owner: Platform team\n"} {
		if _, err := Parse([]byte(ok), ""); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestBadPinFailsAtLoad: a pin git would refuse is an error that names the
// key when the configuration loads (issue 17: `branch: "feature..x"`
// passed loading and reloading and failed only when a sync ran).
func TestBadPinFailsAtLoad(t *testing.T) {
	src := func(ref string) string {
		return "sources:\n  - name: a\n    url: https://example.com/x.git\n    ref: " + ref + "\n"
	}
	for ref, want := range map[string]string{
		`{branch: "feature..x"}`:        `line 2: sources[0].ref: invalid pin: branch "feature..x" is not a valid git ref name`,
		`{branch: "main:refs/heads/x"}`: `sources[0].ref: invalid pin`,
		`{tag: "v1^{}"}`:                `sources[0].ref: invalid pin`,
		`{branch: "-rf"}`:               `sources[0].ref: invalid pin`,
		`{release: "v1"}`:               `only "latest" is supported`,
	} {
		if _, err := Parse([]byte(src(ref)), ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ref %s: %v, want an error containing %q", ref, err, want)
		}
	}
}

// TestPinsAndReposParsedAtLoad: a source's url and ref become gitref
// values when the configuration loads: refused with a message that names
// the key (and no secret), or normalised to their one canonical form.
func TestPinsAndReposParsedAtLoad(t *testing.T) {
	for url, want := range map[string]string{
		"ftp://example.com/x.git":              `sources[0].url: invalid repository URL: scheme "ftp"`,
		"https://example.com":                  `sources[0].url: invalid repository URL`,
		"https://example.com/x.git?token=s3cr": `query strings`,
	} {
		_, err := Parse([]byte("sources:\n  - name: a\n    url: "+url+"\n"), "")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cr") {
			t.Errorf("url %s: %v, want an error containing %q (and no secret)", url, err, want)
		}
	}

	c, err := Parse([]byte("sources:\n  - name: a\n    url: https://Example.COM:443/org/x.git/\n    ref: {branch: refs/heads/main}\n"+
		"  - name: b\n    url: https://example.com/org/x.git\n    ref: {commit: "+strings.Repeat("AB", 20)+"}\n"+
		"  - name: c\n    url: https://example.com/org/x.git\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	a, b, d := c.Sources[0], c.Sources[1], c.Sources[2]
	if a.Repo.URL() != "https://example.com/org/x.git" || a.Repo != b.Repo {
		t.Errorf("repos %q, %q; want one canonical https://example.com/org/x.git", a.Repo, b.Repo)
	}
	if a.Pin != (gitref.Pin{Kind: gitref.Branch, Value: "main"}) || b.Pin != (gitref.Pin{Kind: gitref.Commit, Value: strings.Repeat("ab", 20)}) || d.Pin != (gitref.Pin{}) {
		t.Errorf("pins %v, %v, %v", a.Pin, b.Pin, d.Pin)
	}
}

func TestContentBytes(t *testing.T) {
	for yaml, want := range map[string]int64{
		"":                                   DefaultContentBytes,
		"cache:\n  content_bytes: 0\n":       DefaultContentBytes,
		"cache:\n  content_bytes: 1048576\n": 1 << 20,
		"cache:\n  content_bytes: -1\n":      -1, // keep none
	} {
		c, err := Parse([]byte(yaml), "")
		if err != nil {
			t.Fatalf("%q: %v", yaml, err)
		}
		if c.Cache.ContentBytes != want {
			t.Errorf("%q: content_bytes %d, want %d", yaml, c.Cache.ContentBytes, want)
		}
	}
	if _, err := Parse([]byte("cache:\n  content_bytes: -2\n"), ""); err == nil || !strings.Contains(err.Error(), "cache.content_bytes") {
		t.Errorf("content_bytes -2: error %v, want one naming cache.content_bytes", err)
	}
}
