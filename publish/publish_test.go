package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// TestDiscoveryIndex checks the v0.2 index against the skills CLI's rules
// for every entry, and that each entry's artifact is exactly its digest's
// bytes holding exactly the skill's files, modes kept.
func TestDiscoveryIndex(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	idx := f.v2("/.well-known/agent-skills/index.json")
	if idx.Schema != schemaV2 {
		t.Fatalf("$schema = %q", idx.Schema)
	}
	// Catalog order: source "other" before "team"; other's shared-name
	// takes the name, team's is left to the scoped indexes.
	want := []string{"shared-name", "solo", "deploy", "dotty", "lint", "review"}
	if got := names2(idx); !slices.Equal(got, want) {
		t.Fatalf("names = %v, want %v", got, want)
	}
	dirs := map[string]string{"shared-name": "shared-name", "solo": "solo", "deploy": "deploy", "dotty": "dotty", "lint": "lint", "review": "nested/group/review"}
	for _, e := range idx.Skills {
		checkEntryRules(t, e)
		a := f.get(e.URL)
		if a.code != 200 || digestOf(a.body) != e.Digest {
			t.Fatalf("%s: GET %s = %d, digest %s, want %s", e.Name, e.URL, a.code, digestOf(a.body), e.Digest)
		}
		src := teamFiles
		if e.Name == "solo" || e.Name == "shared-name" {
			src = otherFiles
		}
		wantFiles := sourceFiles(src, dirs[e.Name])
		switch e.Type {
		case "skill-md":
			if len(wantFiles) != 1 || string(a.body) != wantFiles["SKILL.md"] || !strings.HasPrefix(a.header.Get("Content-Type"), "text/markdown") || !strings.HasSuffix(e.URL, ".md") {
				t.Errorf("%s: skill-md artifact %q (%s), want %q", e.Name, a.body, a.header.Get("Content-Type"), wantFiles["SKILL.md"])
			}
		case "archive":
			if a.header.Get("Content-Type") != "application/zip" || len(wantFiles) < 2 {
				t.Errorf("%s: archive of %d files served as %s", e.Name, len(wantFiles), a.header.Get("Content-Type"))
			}
			got, modes := unzip(t, a.body)
			if !mapsEqual(got, wantFiles) {
				t.Errorf("%s: archive holds %v, want %v", e.Name, keys(got), keys(wantFiles))
			}
			for p, m := range modes {
				wantExec := src[dirs[e.Name]+"/"+p].exec
				if (m&0o111 != 0) != wantExec || (wantExec && m.Perm() != 0o755) || (!wantExec && m.Perm() != 0o644) {
					t.Errorf("%s/%s: mode %v, exec %v", e.Name, p, m, wantExec)
				}
			}
		default:
			t.Errorf("%s: type %q", e.Name, e.Type)
		}
	}
}

// checkEntryRules holds an entry to every rule the skills CLI applies
// (dist/cli.mjs isValidSkillEntryV2): a broken entry is dropped silently.
func checkEntryRules(t *testing.T, e entryV2) {
	t.Helper()
	n := e.Name
	if len(n) < 1 || len(n) > 64 || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" ||
		strings.HasPrefix(n, "-") || strings.HasSuffix(n, "-") || strings.Contains(n, "--") {
		t.Errorf("name %q breaks the CLI's rule", n)
	}
	if u := len(utf16.Encode([]rune(e.Description))); u < 1 || u > 1024 {
		t.Errorf("%s: description of %d UTF-16 units", n, u)
	}
	if e.Type != "skill-md" && e.Type != "archive" {
		t.Errorf("%s: type %q", n, e.Type)
	}
	hexd, ok := strings.CutPrefix(e.Digest, "sha256:")
	if !ok || len(hexd) != 64 || strings.Trim(hexd, "0123456789abcdef") != "" {
		t.Errorf("%s: digest %q", n, e.Digest)
	}
	if e.URL != "/artifacts/sha256/"+hexd+map[string]string{"skill-md": ".md", "archive": ".zip"}[e.Type] {
		t.Errorf("%s: url %q for digest %s", n, e.URL, e.Digest)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestIndexV1 checks the v0.1 index: files listed and served under
// /.well-known/skills/<name>/<path>, version the content digest, and a
// skill with a ".." in a file name left out (it would make the CLI drop
// the whole index) with the reason in Notes.
func TestIndexV1(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	v2 := f.v2("/.well-known/agent-skills/index.json")
	digest := map[string]string{}
	for _, e := range v2.Skills {
		digest[e.Name] = e.Digest
	}
	idx := f.v1("/.well-known/skills/index.json")
	var got []string
	for _, e := range idx.Skills {
		got = append(got, e.Name)
		for _, p := range e.Files {
			if strings.Contains(p, "..") || strings.HasPrefix(p, "/") {
				t.Errorf("%s: unsafe path %q in the v0.1 index", e.Name, p)
			}
			r := f.get("/.well-known/skills/" + e.Name + "/" + p)
			if r.code != 200 {
				t.Errorf("%s/%s: %d", e.Name, p, r.code)
			}
		}
		if !slices.Contains(e.Files, "SKILL.md") {
			t.Errorf("%s: no SKILL.md in files", e.Name)
		}
		if e.Version == "" || (e.Version != digest[e.Name] && !strings.HasSuffix(v2URL(v2, e.Name), ".md")) {
			t.Errorf("%s: version %q, archive digest %q", e.Name, e.Version, digest[e.Name])
		}
	}
	if want := []string{"shared-name", "solo", "deploy", "lint", "review"}; !slices.Equal(got, want) {
		t.Fatalf("v0.1 names = %v, want %v", got, want)
	}
	r := f.get("/.well-known/skills/deploy/scripts/check.sh")
	if string(r.body) != teamFiles["deploy/scripts/check.sh"].data {
		t.Fatalf("file = %q", r.body)
	}
	for _, p := range []string{"/.well-known/skills/deploy/nope", "/.well-known/skills/dotty/SKILL.md", "/.well-known/skills/nosuch/SKILL.md", "/.well-known/skills/deploy/../lint/SKILL.md"} {
		if r := f.get(p); r.code != 404 {
			t.Errorf("GET %s = %d, want 404", p, r.code)
		}
	}
	notes := f.h.Notes(context.Background(), catalog.Filter{}, "team")
	if !hasNote(notes, "dotty", ChannelSkillsV01, "..") || hasNote(notes, "dotty", ChannelAgentSkills, "") {
		t.Errorf("notes = %+v", notes)
	}
	if !hasNote(notes, "shared-name", ChannelAgentSkills, "other/shared-name took the name") {
		t.Errorf("no duplicate-name note: %+v", notes)
	}
}

func v2URL(idx indexV2, name string) string {
	for _, e := range idx.Skills {
		if e.Name == name {
			return e.URL
		}
	}
	return ""
}

func hasNote(notes []Note, name, channel, reason string) bool {
	return slices.ContainsFunc(notes, func(n Note) bool {
		return n.Name == name && n.Channel == channel && strings.Contains(n.Reason, reason)
	})
}

// TestScopedIndexes: a source's and a skill's own indexes (both versions)
// under the web catalog's URLs, which the web routes still serve.
func TestScopedIndexes(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	if got := names2(f.v2("/sources/team/.well-known/agent-skills/index.json")); !slices.Equal(got, []string{"deploy", "dotty", "lint", "review", "shared-name"}) {
		t.Errorf("team index = %v", got)
	}
	if got := names2(f.v2("/skills/team/nested/group/review/.well-known/agent-skills/index.json")); !slices.Equal(got, []string{"review"}) {
		t.Errorf("skill index = %v", got)
	}
	if got := names2(f.v2("/skills/team/shared-name/.well-known/agent-skills/index.json")); !slices.Equal(got, []string{"shared-name"}) {
		t.Errorf("shadowed skill's own index = %v", got)
	}
	if idx := f.v1("/sources/other/.well-known/skills/index.json"); len(idx.Skills) != 2 {
		t.Errorf("other v0.1 = %+v", idx)
	}
	if r := f.get("/sources/team/.well-known/skills/shared-name/SKILL.md"); string(r.body) != teamFiles["shared-name/SKILL.md"].data {
		t.Errorf("team's shared-name through its source scope = %q", r.body)
	}
	if r := f.get("/skills/team/deploy/.well-known/skills/deploy/scripts/check.sh"); r.code != 200 || string(r.body) != teamFiles["deploy/scripts/check.sh"].data {
		t.Errorf("skill-scoped v0.1 file = %d %q", r.code, r.body)
	}
	if idx := f.v1("/skills/team/lint/.well-known/skills/index.json"); len(idx.Skills) != 1 || idx.Skills[0].Name != "lint" {
		t.Errorf("skill-scoped v0.1 = %+v", idx)
	}
	// The web catalog keeps its pages.
	for _, p := range []string{"/skills/team/deploy", "/skills/team/deploy/-/files/scripts/check.sh", "/sources/team"} {
		if r := f.get(p); r.code != 200 || !strings.HasPrefix(string(r.body), "web ") {
			t.Errorf("GET %s = %d %q: the web route must answer", p, r.code, r.body)
		}
	}
	for _, p := range []string{"/sources/nosuch/.well-known/agent-skills/index.json", "/skills/team/nosuch/.well-known/agent-skills/index.json",
		"/skills/nosuch/x/.well-known/skills/index.json", "/skills/team/deploy/.well-known/skills/lint/SKILL.md", "/sources/Team/.well-known/agent-skills/index.json",
		"/skills/team/%2e%2e/.well-known/agent-skills/index.json", "/skills/team/deploy/.well-known/skills/deploy/..%2fSKILL.md"} {
		if r := f.get(p); r.code != 404 {
			t.Errorf("GET %s = %d, want 404", p, r.code)
		}
	}
}

// TestHTTPCaching: ETag, 304 on If-None-Match, HEAD, Cache-Control.
func TestHTTPCaching(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	idx := f.v2("/.well-known/agent-skills/index.json")
	for _, p := range []string{"/.well-known/agent-skills/index.json", "/.well-known/skills/index.json", "/sources/team/.well-known/agent-skills/index.json",
		"/skills/team/lint/.well-known/agent-skills/index.json", idx.Skills[0].URL, v2URL(idx, "deploy"), "/.well-known/skills/deploy/SKILL.md"} {
		r := f.get(p)
		etag := r.header.Get("ETag")
		if r.code != 200 || etag == "" {
			t.Fatalf("GET %s: %d, ETag %q", p, r.code, etag)
		}
		cc := r.header.Get("Cache-Control")
		if strings.HasPrefix(p, "/artifacts/") {
			if cc != "public, max-age=31536000, immutable" {
				t.Errorf("%s: Cache-Control %q", p, cc)
			}
		} else if cc != "public, max-age=60" {
			t.Errorf("%s: Cache-Control %q", p, cc)
		}
		if nm := f.get(p, "If-None-Match", etag); nm.code != 304 || len(nm.body) != 0 {
			t.Errorf("%s with If-None-Match: %d (%d bytes)", p, nm.code, len(nm.body))
		}
		if other := f.get(p, "If-None-Match", `"other"`); other.code != 200 {
			t.Errorf("%s with another ETag: %d", p, other.code)
		}
		head := f.do(http.MethodHead, p)
		if head.code != 200 || len(head.body) != 0 || head.header.Get("Content-Length") != r.header.Get("Content-Length") || head.header.Get("ETag") != etag {
			t.Errorf("HEAD %s: %d, %d bytes, length %q vs %q", p, head.code, len(head.body), head.header.Get("Content-Length"), r.header.Get("Content-Length"))
		}
	}
}

// TestDeterministic: the same skills give the same archive bytes across
// two publishers over two registries (two replicas, or a restart), and a
// change moves only the changed skill's digest.
func TestDeterministic(t *testing.T) {
	a := newFixture(t, defaultSources(), nil)
	b := newFixture(t, defaultSources(), nil)
	ia, ib := a.v2("/.well-known/agent-skills/index.json"), b.v2("/.well-known/agent-skills/index.json")
	if !reflect.DeepEqual(ia.Skills, ib.Skills) { // entries hold their provenance by pointer
		t.Fatalf("two publishers disagree:\n%+v\n%+v", ia.Skills, ib.Skills)
	}
	for _, e := range ia.Skills {
		if x, y := a.get(e.URL), b.get(e.URL); string(x.body) != string(y.body) {
			t.Fatalf("%s: bytes differ", e.Name)
		}
	}
	// Restart: a new publisher over the same registry.
	h2, err := New(Options{Catalog: a.reg})
	if err != nil {
		t.Fatal(err)
	}
	v := h2.view(context.Background())
	for _, e := range ia.Skills {
		i := slices.IndexFunc(v.entries, func(x entry) bool { return x.name() == e.Name && x.discoveryDigest() == e.Digest })
		if i < 0 {
			t.Errorf("%s: digest moved across a restart", e.Name)
		}
	}
	// Change one file: that skill's digest moves, no other's.
	if err := os.WriteFile(filepath.Join(a.dirs["team"], "deploy", "references", "runbook.md"), []byte("# Runbook\nStep two.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.sync("team")
	after := a.v2("/.well-known/agent-skills/index.json")
	for i, e := range after.Skills {
		if moved := e.Digest != ia.Skills[i].Digest; moved != (e.Name == "deploy") {
			t.Errorf("%s: digest moved = %v", e.Name, moved)
		}
	}
	// The archive the old index named stays servable for one generation.
	if r := a.get(v2URL(ia, "deploy")); r.code != 200 {
		t.Errorf("previous generation's archive: %d", r.code)
	}
}

// TestZipGolden pins the bytes of one fixture's archive: a change to the
// writer that moves any digest fails here.
func TestZipGolden(t *testing.T) {
	entries := []zipEntry{
		goldenEntry("SKILL.md", "---\nname: golden\ndescription: A fixed skill.\n---\n# Golden\n", false),
		goldenEntry("scripts/run.sh", "#!/bin/sh\necho golden\n", true),
	}
	var buf strings.Builder
	if err := writeZip(&buf, entries); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(buf.String()))
	const want = "c20680cd857a0fbff579e6981f056682443ace9f188f0a09b757e8fae18fdd73"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("golden archive digest = %s, want %s", got, want)
	}
	if int64(buf.Len()) != zipSize(entries) {
		t.Fatalf("size %d, zipSize %d", buf.Len(), zipSize(entries))
	}
	files, modes := unzip(t, []byte(buf.String()))
	if files["scripts/run.sh"] != "#!/bin/sh\necho golden\n" || modes["scripts/run.sh"].Perm() != 0o755 || modes["SKILL.md"].Perm() != 0o644 {
		t.Fatalf("files %v modes %v", files, modes)
	}
}

func goldenEntry(name, data string, exec bool) zipEntry {
	b := []byte(data)
	return zipEntry{Name: name, Exec: exec, Size: int64(len(b)), Data: func() ([]byte, error) { return b, nil }}
}

// TestLimits: a skill beyond the installer's limits is left out of its
// indexes, with the reason in Notes, and the others stay.
func TestLimits(t *testing.T) {
	f := newFixture(t, defaultSources(), func(o *Options) { o.Limits = Limits{Files: 2, Bytes: 1 << 20} })
	got := names2(f.v2("/.well-known/agent-skills/index.json"))
	if slices.Contains(got, "deploy") || !slices.Contains(got, "review") || !slices.Contains(got, "lint") {
		t.Fatalf("names with a 2-file limit = %v", got)
	}
	if !hasNote(f.h.Notes(context.Background(), catalog.Filter{}, ""), "deploy", ChannelAgentSkills, "limit-files: 3 files, more than the 2") {
		t.Errorf("no limit note")
	}
	g := newFixture(t, defaultSources(), func(o *Options) { o.Limits = Limits{Files: 100, Bytes: 40} })
	got = names2(g.v2("/.well-known/agent-skills/index.json"))
	if slices.Contains(got, "deploy") {
		t.Errorf("names with a 40-byte limit = %v", got)
	}
	if !hasNote(g.h.Notes(context.Background(), catalog.Filter{}, ""), "deploy", ChannelAgentSkills, "limit-bytes: ") {
		t.Errorf("no limit-bytes note for deploy")
	}
}

// TestArchivePathRules: a skill with a path the registry's own rule
// (skill.CheckPath) refuses is in no index and no plugin, whatever the
// catalog holds; the neighbours an archive-only check used to let through
// (git metadata, device names, ':' and the other characters Windows
// refuses, trailing dots) are refused too.
func TestArchivePathRules(t *testing.T) {
	for p, bad := range map[string]bool{
		"SKILL.md": false, "scripts/run.sh": false, "a b/c.md": false, "notes..md": false, "ünï.md": false, ".hidden": false,
		"": true, ".": true, "..": true, "../x": true, "a/../b": true, "a/./b": true, "./a": true, "/etc/passwd": true,
		"a//b": true, "a/": true, `a\b`: true, `..\x`: true, "C:x": true, "c:/x": true, "a\x00b": true, "a\nb": true, "\xff.md": true,
		".git/config": true, ".GIT/hooks/pre-commit": true, "git~1/config": true, ".gitmodules": true, "a/.git./x": true,
		"CON": true, "nul.txt": true, "a:b": true, "x*": true, "what?": true, "a/b.": true, "a/b ": true, "a\u0085b": true,
	} {
		files := []skill.File{{Path: "SKILL.md"}}
		if p != "SKILL.md" {
			files = append(files, skill.File{Path: p})
		}
		sk := &skill.Skill{Frontmatter: &skill.Frontmatter{Name: "x", Description: "d"}, Files: files}
		skip, _ := Limits{Files: 100, Bytes: 1 << 20}.rules(sk)
		plug := pluginRules(&entry{ref: catalog.Ref{Skill: sk}})
		if (skip != "") != bad || (plug != "") != bad {
			t.Errorf("%q: index skip %q, plugin skip %q, want bad=%v", p, skip, plug, bad)
		}
		if bad && !strings.Contains(skip, "path") && !strings.Contains(skip, "git") {
			t.Errorf("%q: reason %q names no rule", p, skip)
		}
	}
}

// FuzzArchivePath: whatever path passes lands inside the extraction root
// however it is joined, and splits into plain segments.
func FuzzArchivePath(f *testing.F) {
	for _, s := range []string{"SKILL.md", "../x", "a/../../b", "a\\..\\b", "/abs", "C:/x", "a/./b", strings.Repeat("a/", 300) + "x", "..", "a\x00", ".git/x", "CON.txt"} {
		f.Add(s)
	}
	root := filepath.FromSlash("/root/skill")
	f.Fuzz(func(t *testing.T, p string) {
		if skill.CheckPath(p) != nil || pathProblem([]skill.File{{Path: p}}) != "" {
			return
		}
		full := filepath.Join(root, filepath.FromSlash(p))
		if !strings.HasPrefix(full, root+string(filepath.Separator)) {
			t.Fatalf("%q escapes to %q", p, full)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "\\\x00") {
				t.Fatalf("%q has segment %q", p, seg)
			}
		}
	})
}

// TestHostileNames: files whose names a client would misread (a
// backslash, a control character, a second SKILL.md by case) keep their
// skill out of every index and archive: the indexer excludes them, and
// publish leaves out, with the reason, what only an installer refuses.
func TestHostileNames(t *testing.T) {
	srcs := map[string]map[string]file{"team": {
		"ok/SKILL.md":       md("ok", "Fine."),
		"bs/SKILL.md":       md("bs", "Has a backslash file."),
		`bs/..\evil.sh`:     {data: "x"},
		"ctl/SKILL.md":      md("ctl", "Has a control character."),
		"ctl/a\x01b.txt":    {data: "x"},
		"hash/SKILL.md":     md("hash", "A v0.1-unsafe name."),
		"hash/notes#1.md":   {data: "x"},
		"upper/SKILL.md":    md("upper", "A second SKILL.md by case."),
		"upper/skill.MD":    {data: "x"},
		"emoji/SKILL.md":    md("emoji", strings.Repeat("\U0001F600", 600)),
		"longer/SKILL.md":   md("longer", strings.Repeat("é", 1024)),
		"dup-name/SKILL.md": md("dup-name", "first"),
	}}
	f := newFixture(t, srcs, nil)
	got := names2(f.v2("/.well-known/agent-skills/index.json"))
	// "upper" never reaches publish: the indexer's path rule excludes a
	// skill with two paths equal after case folding.
	if want := []string{"dup-name", "hash", "longer", "ok"}; !slices.Equal(got, want) {
		t.Fatalf("v0.2 names = %v, want %v", got, want)
	}
	var v1 []string
	for _, e := range f.v1("/.well-known/skills/index.json").Skills {
		v1 = append(v1, e.Name)
	}
	if want := []string{"dup-name", "longer", "ok"}; !slices.Equal(v1, want) {
		t.Fatalf("v0.1 names = %v, want %v", v1, want)
	}
	notes := f.h.Notes(context.Background(), catalog.Filter{}, "")
	// bs, ctl and upper are excluded by the indexer's path rule, so no
	// index, archive or note of publish ever holds them.
	for _, n := range notes {
		if n.Name == "bs" || n.Name == "ctl" || n.Name == "upper" {
			t.Errorf("publish saw a skill the indexer excludes: %+v", n)
		}
	}
	for name, why := range map[string]string{"emoji": "UTF-16", "hash": "'#'"} {
		if !slices.ContainsFunc(notes, func(n Note) bool { return n.Name == name && strings.Contains(n.Reason, why) }) {
			t.Errorf("%s: no note saying %q in %+v", name, why, notes)
		}
	}
	// Every archive served, for either client, stays inside its root.
	v := f.h.view(context.Background())
	f.h.plugins(context.Background(), v)
	for _, key := range v.zipKeys() {
		r := f.get("/artifacts/sha256/" + key)
		unzip(t, r.body)
	}
}

// TestAccess: with access control on, a caller sees exactly its sources;
// a public source is visible without a token; a wrong token is 401; an
// artifact the caller may not see is 404 with the same answer as a
// missing one; private answers are never cacheable by a shared cache.
func TestAccess(t *testing.T) {
	tokTeam, hashTeam, _ := access.NewToken()
	hTeam, _ := access.ParseHash(hashTeam)
	gate := access.NewGate(access.GateOptions{
		Clients: access.New([]access.Client{{Name: "teamer", Hash: hTeam, Sources: []string{"team"}}}),
		Limiter: access.NewLimiter(60e9, 100),
	})
	public := map[string]bool{}
	f := newFixture(t, defaultSources(), func(o *Options) {
		o.Gate = func() *access.Gate { return gate }
		o.Public = func() map[string]bool { return public }
	})
	auth := []string{"Authorization", "Bearer " + tokTeam}

	// No token, nothing public: 401 everywhere an index lives.
	for _, p := range []string{"/.well-known/agent-skills/index.json", "/.well-known/skills/index.json", "/sources/team/.well-known/agent-skills/index.json",
		"/skills/team/lint/.well-known/agent-skills/index.json", "/sources/nosuch/.well-known/agent-skills/index.json", "/marketplace.json"} {
		if r := f.get(p); r.code != 401 || r.header.Get("WWW-Authenticate") == "" || r.header.Get("Location") != "" {
			t.Errorf("anonymous GET %s = %d %q", p, r.code, r.header)
		}
	}
	// A wrong token: 401 with invalid_token.
	if r := f.get("/.well-known/agent-skills/index.json", "Authorization", "Bearer nope"); r.code != 401 || !strings.Contains(r.header.Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("wrong token = %d %q", r.code, r.header.Get("WWW-Authenticate"))
	}
	// The team token sees team only, privately.
	r := f.get("/.well-known/agent-skills/index.json", auth...)
	if r.header.Get("Cache-Control") != "private, max-age=60" || !strings.Contains(r.header.Get("Vary"), "Authorization") {
		t.Errorf("private index headers %q", r.header)
	}
	idx := f.v2("/.well-known/agent-skills/index.json", auth...)
	if got := names2(idx); !slices.Equal(got, []string{"deploy", "dotty", "lint", "review", "shared-name"}) {
		t.Fatalf("team sees %v", got)
	}
	art := f.get(v2URL(idx, "deploy"), auth...)
	if art.code != 200 || art.header.Get("Cache-Control") != "private, max-age=31536000, immutable" || !strings.Contains(art.header.Get("Vary"), "Authorization") {
		t.Errorf("private artifact: %d %q", art.code, art.header)
	}
	// Another source's artifact and a missing one answer alike.
	open := newFixture(t, defaultSources(), nil)
	all := open.v2("/.well-known/agent-skills/index.json")
	soloURL := v2URL(all, "solo")
	missing := "/artifacts/sha256/" + strings.Repeat("0", 64) + ".zip"
	x, y := f.get(soloURL, auth...), f.get(missing, auth...)
	if x.code != 404 || y.code != 404 || string(x.body) != string(y.body) {
		t.Errorf("invisible %d %q vs missing %d %q", x.code, x.body, y.code, y.body)
	}
	if a, b := f.get(soloURL), f.get(missing); a.code != 404 || b.code != 404 || string(a.body) != string(b.body) {
		t.Errorf("anonymous: invisible %d vs missing %d", a.code, b.code)
	}
	for _, p := range []string{"/sources/other/.well-known/agent-skills/index.json", "/sources/nosuch/.well-known/agent-skills/index.json",
		"/skills/other/solo/.well-known/agent-skills/index.json", "/skills/other/nosuch/.well-known/agent-skills/index.json", "/.well-known/skills/solo/SKILL.md",
		"/sources/other/marketplace.json"} {
		if r := f.get(p, auth...); r.code != 404 {
			t.Errorf("team GET %s = %d, want 404", p, r.code)
		}
	}

	// other becomes public: visible without a token, publicly cacheable.
	public["other"] = true
	pub := f.v2("/.well-known/agent-skills/index.json")
	if got := names2(pub); !slices.Equal(got, []string{"shared-name", "solo"}) {
		t.Fatalf("anonymous sees %v", got)
	}
	pr := f.get(soloURL)
	if pr.code != 200 || pr.header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Errorf("public artifact: %d %q", pr.code, pr.header.Get("Cache-Control"))
	}
	if r := f.get("/.well-known/agent-skills/index.json"); r.header.Get("Cache-Control") != "public, max-age=60" || !strings.Contains(r.header.Get("Vary"), "Authorization") {
		t.Errorf("public index headers %q", r.header)
	}
	// Still hidden: team's skills without a token.
	if r := f.get(v2URL(idx, "deploy")); r.code != 404 {
		t.Errorf("team artifact without a token = %d", r.code)
	}
	if r := f.get("/sources/team/.well-known/agent-skills/index.json"); r.code != 401 {
		t.Errorf("team index without a token = %d", r.code)
	}
}

// TestMarketplace checks the Claude Code marketplace: absolute URLs on the
// given origin, one plugin per skill with its files under skills/<name>/,
// one <source>-all per source, no version, strict false.
func TestMarketplace(t *testing.T) {
	f := newFixture(t, defaultSources(), func(o *Options) {
		o.BaseURL = func(r *http.Request) string { return RequestBaseURL(r, "https://skills.example.com", nil) }
	})
	var doc map[string]any
	f.json("/marketplace.json", &doc)
	if doc["name"] != "skillreg" || doc["owner"].(map[string]any)["name"] != "skills.example.com" {
		t.Fatalf("marketplace head = %v %v", doc["name"], doc["owner"])
	}
	var mp marketplaceDoc
	f.json("/marketplace.json", &mp)
	var got []string
	for i, p := range mp.Plugins {
		got = append(got, p.Name)
		raw := doc["plugins"].([]any)[i].(map[string]any)
		if _, ok := raw["version"]; ok || raw["strict"] != false {
			t.Errorf("%s: version or strict wrong: %v", p.Name, raw)
		}
		if p.Source.Source != "archive" || !strings.HasPrefix(p.Source.URL, "https://skills.example.com/artifacts/sha256/"+p.Source.SHA256+".zip") {
			t.Errorf("%s: source %+v", p.Name, p.Source)
		}
		b := f.get(strings.TrimPrefix(p.Source.URL, "https://skills.example.com"))
		if b.code != 200 || digestOf(b.body) != "sha256:"+p.Source.SHA256 {
			t.Fatalf("%s: archive %d digest mismatch", p.Name, b.code)
		}
		files, _ := unzip(t, b.body)
		for name := range files {
			if !strings.HasPrefix(name, "skills/") {
				t.Errorf("%s: entry %q outside skills/", p.Name, name)
			}
		}
		switch p.Name {
		case "deploy":
			if files["skills/deploy/scripts/check.sh"] != teamFiles["deploy/scripts/check.sh"].data || len(files) != 3 {
				t.Errorf("deploy plugin = %v", keys(files))
			}
		case "team-all":
			if len(files) != 9 || files["skills/review/guide.txt"] != "be kind\n" || files["skills/shared-name/SKILL.md"] != teamFiles["shared-name/SKILL.md"].data {
				t.Errorf("team-all = %v", keys(files))
			}
		}
	}
	if want := []string{"shared-name", "solo", "deploy", "dotty", "lint", "review", "other-all", "team-all"}; !slices.Equal(got, want) {
		t.Fatalf("plugins = %v, want %v", got, want)
	}
	var scoped marketplaceDoc
	f.json("/sources/team/marketplace.json", &scoped)
	if scoped.Name != "skillreg-team" || len(scoped.Plugins) != 6 || scoped.Plugins[5].Name != "team-all" {
		t.Errorf("team marketplace = %+v", scoped)
	}
	// Without a trusted origin the marketplace cannot be built.
	g := newFixture(t, defaultSources(), func(o *Options) {
		o.BaseURL = func(r *http.Request) string { return RequestBaseURL(r, "", access.NewHosts(nil).Allowed) }
	})
	req, _ := http.NewRequest("GET", g.srv.URL+"/marketplace.json", nil)
	req.Host = "evil.example"
	res, err := g.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("marketplace for an untrusted Host = %d", res.StatusCode)
	}
}

func TestRequestBaseURL(t *testing.T) {
	for _, c := range []struct{ host, public, listen, want string }{
		{"127.0.0.1:8080", "", "", "http://127.0.0.1:8080"},
		{"[::1]:8080", "", "", "http://[::1]:8080"},
		{"localhost:8080", "", "", "http://localhost:8080"},
		{"10.0.0.5", "", "", "http://10.0.0.5"},
		{"skills.corp:8443", "", "skills.corp", "http://skills.corp:8443"},
		{"evil.example", "", "skills.corp", ""},
		{"evil.example", "https://skills.example.com/", "", "https://skills.example.com"},
		{"app.localhost", "", "", "http://app.localhost"},
		{"", "", "", ""},
	} {
		r, _ := http.NewRequest("GET", "http://x/", nil)
		r.Host = c.host
		if got := RequestBaseURL(r, c.public, access.NewHosts([]string{c.listen}).Allowed); got != c.want {
			t.Errorf("RequestBaseURL(%q, %q, %q) = %q, want %q", c.host, c.public, c.listen, got, c.want)
		}
	}
}

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{"team-all": "team-all", "acme.tools-all": "acme-tools-all", "a.-b": "a-b", "skillreg-x..y": "skillreg-x-y",
		strings.Repeat("ab", 40): strings.Repeat("ab", 32), strings.Repeat("a", 63) + ".b": strings.Repeat("a", 63)} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestByteCache(t *testing.T) {
	c := newByteCache(10)
	c.put("a", []byte("12345"))
	c.put("b", []byte("12345"))
	c.get("a")
	c.put("c", []byte("123"))
	if _, ok := c.get("b"); ok {
		t.Error("least recently used entry kept")
	}
	if _, ok := c.get("a"); !ok {
		t.Error("recently used entry dropped")
	}
	c.put("huge", make([]byte, 11))
	if _, ok := c.get("huge"); ok || c.bytes() > 10 {
		t.Errorf("over budget: %d", c.bytes())
	}
}

// zipKeys are every archive the view serves: hex digest + ".zip".
func (v *view) zipKeys() []string {
	var out []string
	for i := range v.entries {
		e := &v.entries[i]
		if e.skip() == "" && e.zipOK {
			out = append(out, e.zip.hex()+".zip")
		}
		if e.pluginOK {
			out = append(out, e.plugin.hex()+".zip")
		}
	}
	for _, sp := range v.all {
		if sp.skip == "" {
			out = append(out, sp.digest.hex()+".zip")
		}
	}
	return out
}
