package pull

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/hostile"
)

func TestParseURI(t *testing.T) {
	ok := []string{
		"skill://acme/pdf/SKILL.md",
		"skill://pdf/SKILL.md",
		"skill://a.b-c/x/y/z.md",
		"skill://acme/pdf/my%20notes.md",
		"skill://acme/pdf/caf%C3%A9.md",
		"skill://acme/pdf/a:b@c!$&'()*+,;=.md",
	}
	for _, u := range ok {
		if _, err := parseURI(u); err != nil {
			t.Errorf("parseURI(%q) = %v, want ok", u, err)
		}
	}
	bad := []string{
		"",
		"file:///etc/passwd",
		"skill:///etc/passwd",
		"skill://acme/pdf/../other/x.md",
		"skill://acme/pdf/./x.md",
		"skill://acme/pdf/%2e%2e/x.md",
		"skill://acme/pdf/%2E%2E/x.md",
		"skill://acme/pdf/%2e/x.md",
		"skill://acme/pdf//etc/passwd",
		"skill://acme/pdf/",
		"skill://acme/pdf/a%2Fb.md",
		"skill://acme/pdf/a%5Cb.md",
		"skill://acme/pdf/a\\..\\b.md",
		"skill://acme/pdf/x.md?raw=1",
		"skill://acme/pdf/x.md#top",
		"skill://ACME/pdf/SKILL.md",
		"skill://acme/pdf/%41.md",
		"skill://acme/pdf/%4.md",
		"skill://acme/pdf/a%00b",
		"skill://acme/pdf/a%0Ab",
		"skill://acme/pdf/café.md",
		"skill://..//x",
		"skill://acme/pdf/" + strings.Repeat("a", maxURILen),
	}
	for _, u := range bad {
		if _, err := parseURI(u); !errors.Is(err, errBadURI) {
			t.Errorf("parseURI(%q) = %v, want a refusal", u, err)
		}
	}
	loc, err := locateSkill("skill://acme/tools/pdf/SKILL.md")
	if err != nil || loc.name != "pdf" || loc.dirURI != "skill://acme/tools/pdf" {
		t.Fatalf("locateSkill = %+v, %v", loc, err)
	}
	for uri, want := range map[string]string{
		"skill://acme/tools/pdf/SKILL.md":        "SKILL.md",
		"skill://acme/tools/pdf/scripts/x.sh":    "scripts/x.sh",
		"skill://acme/tools/pdf/my%20notes.md":   "my notes.md",
		"skill://acme/tools/pdfx/SKILL.md":       "",
		"skill://acme/tools/SKILL.md":            "",
		"skill://other/tools/pdf/SKILL.md":       "",
		"skill://acme/tools/pdf":                 "",
		"skill://acme/tools/pdf/../pdf/SKILL.md": "",
	} {
		got, err := loc.relPath(uri)
		if want == "" && err == nil || want != "" && got != want {
			t.Errorf("relPath(%q) = %q, %v; want %q", uri, got, err, want)
		}
	}
}

func entryOf(t *testing.T, uri, fm string, resources any) Entry {
	t.Helper()
	rs, err := json.Marshal(resources)
	if err != nil {
		t.Fatal(err)
	}
	return Entry{URI: uri, Frontmatter: json.RawMessage(fm), Resources: rs}
}

func res(uri string, size int64) Resource {
	return Resource{URI: uri, Digest: "sha256:" + strings.Repeat("0", 64), Size: size}
}

func TestCheckEntry(t *testing.T) {
	const u = "skill://acme/pdf/SKILL.md"
	const fm = `{"name":"pdf","description":"d"}`
	many := []Resource{res(u, 1)}
	for i := range MaxFiles {
		many = append(many, res(fmt.Sprintf("skill://acme/pdf/f%03d", i), 1))
	}
	cases := []struct {
		name  string
		e     Entry
		check Check
	}{
		{"ok", entryOf(t, u, fm, []Resource{res(u, 1), res("skill://acme/pdf/a.md", 2)}), ""},
		{"bad uri", entryOf(t, "skill://acme/pdf/README.md", fm, []Resource{}), CheckEntry},
		{"name differs", entryOf(t, u, `{"name":"other","description":"d"}`, []Resource{res(u, 1)}), CheckEntry},
		{"frontmatter not an object", entryOf(t, u, `["pdf"]`, []Resource{res(u, 1)}), CheckEntry},
		{"dynamic", entryOf(t, u, fm, "dynamic"), CheckDynamic},
		{"other string", entryOf(t, u, fm, "static"), CheckEntry},
		{"null resources", entryOf(t, u, fm, nil), CheckEntry},
		{"too many files", entryOf(t, u, fm, many), CheckLimits},
		{"too large", entryOf(t, u, fm, []Resource{res(u, 1), res("skill://acme/pdf/big", MaxBytes)}), CheckLimits},
		{"negative size", entryOf(t, u, fm, []Resource{res(u, -1)}), CheckLimits},
		{"bad digest", entryOf(t, u, fm, []Resource{{URI: u, Digest: "sha256:ABC", Size: 1}}), CheckEntry},
		{"outside", entryOf(t, u, fm, []Resource{res(u, 1), res("skill://acme/other/x.md", 1)}), CheckURI},
		{"dotdot", entryOf(t, u, fm, []Resource{res(u, 1), res("skill://acme/pdf/../x.md", 1)}), CheckURI},
		{"encoded dots", entryOf(t, u, fm, []Resource{res(u, 1), res("skill://acme/pdf/%2e%2e/x.md", 1)}), CheckURI},
		{"absolute", entryOf(t, u, fm, []Resource{res(u, 1), res("skill://acme/pdf//etc/passwd", 1)}), CheckURI},
		{"duplicate", entryOf(t, u, fm, []Resource{res(u, 1), res(u, 1)}), CheckDuplicate},
		{"case collision", entryOf(t, u, fm, []Resource{res(u, 1), res("skill://acme/pdf/a.md", 1), res("skill://acme/pdf/A.md", 1)}), CheckDuplicate},
		{"file and dir", entryOf(t, u, fm, []Resource{res(u, 1), res("skill://acme/pdf/a", 1), res("skill://acme/pdf/a/b", 1)}), CheckDuplicate},
		{"no SKILL.md", entryOf(t, u, fm, []Resource{res("skill://acme/pdf/a.md", 1)}), CheckMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := checkEntry(c.e)
			var ve *VerifyError
			switch {
			case c.check == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.check == "":
				if m.files[0].URI != u {
					t.Errorf("SKILL.md is not read first: %+v", m.files)
				}
			case !errors.As(err, &ve) || ve.Check != c.check:
				t.Fatalf("err = %v, want check %s", err, c.check)
			}
		})
	}
}

func TestFrontmatterComparison(t *testing.T) {
	md := "---\nname: pdf\ndescription: Fill PDF forms.\nversion: 1.2\ntags: [a, b]\n---\nBody\n"
	e := entryOf(t, "skill://acme/pdf/SKILL.md", `{"name":"pdf","description":"Fill PDF forms.","version":1.2,"tags":["a","b"]}`, []Resource{fileRes("skill://acme/pdf/SKILL.md", md)})
	m, err := checkEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.checkFile(m.files[0], []byte(md)); err != nil {
		t.Fatalf("matching frontmatter refused: %v", err)
	}
	for field, fm := range map[string]string{
		"description": `{"name":"pdf","description":"Fill PDF forms!","version":1.2,"tags":["a","b"]}`,
		"version":     `{"name":"pdf","description":"Fill PDF forms.","version":"1.2","tags":["a","b"]}`,
		"tags":        `{"name":"pdf","description":"Fill PDF forms.","version":1.2,"tags":["b","a"]}`,
		"license":     `{"name":"pdf","description":"Fill PDF forms.","version":1.2,"tags":["a","b"],"license":"MIT"}`,
	} {
		e.Frontmatter = json.RawMessage(fm)
		m, err := checkEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		err = m.checkFile(m.files[0], []byte(md))
		var ve *VerifyError
		if !errors.As(err, &ve) || ve.Check != CheckFrontmatter || !strings.Contains(ve.Detail, `"`+field+`"`) {
			t.Errorf("%s: err = %v, want a frontmatter refusal naming the field", field, err)
		}
	}
}

func fileRes(uri, content string) Resource {
	sum := sha256.Sum256([]byte(content))
	return Resource{URI: uri, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(content))}
}

func hostileSkills() []hostile.Skill {
	return []hostile.Skill{
		{Path: "acme/good", Files: map[string]string{"references/a.md": "a\n"}},
	}
}

// TestFetchRefusesHostile runs every misbehaviour against Fetch: the right
// check fails, on the right file, no file of the skill is read after the
// failing one, the skill stays refused on the connection, and an honest
// skill on the same connection still verifies.
func TestFetchRefusesHostile(t *testing.T) {
	files := map[string]string{"references/b.md": "b\n", "references/c.md": "c\n", "scripts/run.sh": "#!/bin/sh\necho hi\n"}
	cases := []struct {
		name   string
		skill  hostile.Skill
		check  Check
		file   string // the URI the refusal names ("" for the entry)
		reads  int    // reads of the skill before it was refused
		noDirs bool   // serve without directoryRead
	}{
		{"wrong digest", hostile.Skill{Misbehave: hostile.WrongDigest, Target: "references/b.md"}, CheckDigest, "/references/b.md", 2, false},
		{"wrong size", hostile.Skill{Misbehave: hostile.WrongSize}, CheckSize, "/SKILL.md", 1, false},
		{"changed frontmatter", hostile.Skill{Misbehave: hostile.ChangedFrontmatter}, CheckFrontmatter, "/SKILL.md", 1, false},
		{"extra content in a read", hostile.Skill{Misbehave: hostile.ExtraContent, Target: "references/c.md"}, CheckNotInEntry, "/extra.sh", 3, false},
		{"extra file in the directory", hostile.Skill{Misbehave: hostile.ExtraFile}, CheckNotInEntry, "/extra.sh", 0, false},
		{"changing manifest", hostile.Skill{Misbehave: hostile.ChangingManifest}, CheckManifestChange, "", 4, false},
		{"changing manifest, no directoryRead", hostile.Skill{Misbehave: hostile.ChangingManifest}, CheckManifestChange, "", 4, true},
		{"dynamic", hostile.Skill{Misbehave: hostile.Dynamic}, CheckDynamic, "", 0, false},
		{"too many files", hostile.Skill{Misbehave: hostile.TooManyFiles}, CheckLimits, "", 0, false},
		{"too large", hostile.Skill{Misbehave: hostile.TooLarge, Target: "references/c.md"}, CheckLimits, "/references/c.md", 0, false},
		{"duplicate", hostile.Skill{Misbehave: hostile.DuplicateURI, Target: "references/b.md"}, CheckDuplicate, "/references/b.md", 0, false},
		{"missing file", hostile.Skill{Misbehave: hostile.MissingFile}, CheckMissing, "/gone.md", 2, true},
		{"outside the skill", hostile.Skill{Misbehave: hostile.ForeignURI, URI: "skill://acme/good/references/a.md"}, CheckURI, "skill://acme/good/references/a.md", 0, false},
		{"dot dot", hostile.Skill{Misbehave: hostile.ForeignURI, URI: "skill://acme/bad/../good/x.sh"}, CheckURI, "skill://acme/bad/../good/x.sh", 0, false},
		{"encoded dots", hostile.Skill{Misbehave: hostile.ForeignURI, URI: "skill://acme/bad/%2e%2e/x.sh"}, CheckURI, "skill://acme/bad/%2e%2e/x.sh", 0, false},
		{"absolute path", hostile.Skill{Misbehave: hostile.ForeignURI, URI: "skill://acme/bad//etc/cron.d/x"}, CheckURI, "skill://acme/bad//etc/cron.d/x", 0, false},
		{"other scheme", hostile.Skill{Misbehave: hostile.ForeignURI, URI: "file:///etc/passwd"}, CheckURI, "file:///etc/passwd", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := c.skill
			bad.Path = "acme/bad"
			bad.Files = files
			srv := hostile.New(t, hostile.Options{Skills: append(hostileSkills(), bad), NoDirectoryRead: c.noDirs})
			cl, err := Connect(context.Background(), ClientOptions{Server: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			entries, err := cl.List(context.Background())
			if err != nil || len(entries) != 2 {
				t.Fatalf("list: %d entries, %v", len(entries), err)
			}
			var badEntry, goodEntry Entry
			for _, e := range entries {
				if strings.Contains(e.URI, "/bad/") {
					badEntry = e
				} else {
					goodEntry = e
				}
			}
			_, err = cl.Fetch(context.Background(), badEntry)
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Check != c.check {
				t.Fatalf("Fetch = %v, want check %s", err, c.check)
			}
			want := c.file
			if strings.HasPrefix(want, "/") {
				want = "skill://acme/bad" + want
			}
			if ve.File != want {
				t.Errorf("refusal names file %q, want %q (%v)", ve.File, want, err)
			}
			reads := srv.ReadsUnder("skill://acme/bad/")
			if len(reads) != c.reads {
				t.Errorf("read %d files of the skill (%v), want %d", len(reads), reads, c.reads)
			}
			// Latched: asking again reads nothing more.
			if _, err2 := cl.Fetch(context.Background(), badEntry); !errors.Is(err2, ErrVerify) {
				t.Errorf("second Fetch = %v", err2)
			}
			if again := srv.ReadsUnder("skill://acme/bad/"); len(again) != len(reads) {
				t.Errorf("a refused skill was read again: %v", again[len(reads):])
			}
			if _, err := cl.Fetch(context.Background(), goodEntry); err != nil {
				t.Errorf("honest skill on the same connection: %v", err)
			}
		})
	}
}

func TestConnectRefusesServersWithoutTheExtension(t *testing.T) {
	for name, o := range map[string]hostile.Options{
		"no extension": {NoExtension: true},
		"no resources": {NoResources: true},
	} {
		srv := hostile.New(t, o)
		if _, err := Connect(context.Background(), ClientOptions{Server: srv.URL}); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: Connect = %v, want ErrProtocol", name, err)
		}
	}
}

func TestTokenGoesOnlyToTheServer(t *testing.T) {
	const token = "s3cret-t0ken-value"
	srv := hostile.New(t, hostile.Options{Skills: hostileSkills(), Token: token})
	_, err := Connect(context.Background(), ClientOptions{Server: srv.URL})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("without a token: %v", err)
	}
	_, err = Connect(context.Background(), ClientOptions{Server: srv.URL, Token: "wrong-" + token})
	if err == nil || strings.Contains(err.Error(), token) {
		t.Fatalf("with a wrong token: %v", err)
	}
	c, err := Connect(context.Background(), ClientOptions{Server: srv.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Another server named in a lock never receives it.
	other := hostile.New(t, hostile.Options{Skills: hostileSkills()})
	cc := &connections{o: Options{Server: srv.URL, Token: token}}
	defer cc.close()
	if _, err := cc.get(context.Background(), other.URL); err != nil {
		t.Fatal(err)
	}
	if n := other.AuthorizedRequests(); n != 0 {
		t.Errorf("%d requests to another server carried Authorization", n)
	}
	if _, err := Connect(context.Background(), ClientOptions{Server: "http://user:pw@127.0.0.1:1/mcp"}); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("credentials in the URL: %v", err)
	}
}

func TestBoundedBody(t *testing.T) {
	b := &boundedBody{rc: io.NopCloser(strings.NewReader(strings.Repeat("x", 11))), left: 10, max: 10}
	if _, err := io.ReadAll(b); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("11 bytes under a bound of 10: %v", err)
	}
	b = &boundedBody{rc: io.NopCloser(strings.NewReader(strings.Repeat("x", 10))), left: 10, max: 10}
	if got, err := io.ReadAll(b); err != nil || len(got) != 10 {
		t.Errorf("10 bytes under a bound of 10: %d, %v", len(got), err)
	}
}

const lockGolden = `{
  "skills": [
    {
      "name": "commit-message",
      "pulled_at": "2026-11-30T10:00:00Z",
      "resources": [
        {
          "digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
          "size": 10,
          "uri": "skill://other/commit-message/SKILL.md"
        }
      ],
      "server": "https://skills.internal.test/mcp",
      "uri": "skill://other/commit-message/SKILL.md"
    },
    {
      "name": "pdf",
      "provenance": {
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "path": "skills/pdf",
        "ref": "main",
        "repository": "https://git.internal.test/acme/skills.git"
      },
      "pulled_at": "2026-11-30T10:00:00Z",
      "resources": [
        {
          "digest": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
          "size": 120,
          "uri": "skill://acme/pdf/SKILL.md"
        },
        {
          "digest": "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
          "size": 42,
          "uri": "skill://acme/pdf/scripts/fill.sh"
        }
      ],
      "server": "http://127.0.0.1:8080/mcp",
      "uri": "skill://acme/pdf/SKILL.md",
      "verified": {
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "key": "SHA256:Qm3ZbY1rA0p7n5qkQ3cH0nY5kq9s0Jm0hH1b6mKQ2n8",
        "object": "tag",
        "signer": "alice@example.com",
        "tag": "89abcdef0123456789abcdef0123456789abcdef",
        "type": "ssh"
      }
    }
  ],
  "version": 1
}
`

func TestLockFormatIsStable(t *testing.T) {
	l := &Lock{}
	l.put(LockedSkill{
		Name: "pdf", PulledAt: "2026-11-30T10:00:00Z", Server: "http://127.0.0.1:8080/mcp", URI: "skill://acme/pdf/SKILL.md",
		Provenance: &Provenance{Repository: "https://git.internal.test/acme/skills.git", Ref: "main", Commit: "0123456789abcdef0123456789abcdef01234567", Path: "skills/pdf"},
		Resources: lockResources([]Resource{
			{URI: "skill://acme/pdf/scripts/fill.sh", Digest: "sha256:" + strings.Repeat("b", 64), Size: 42},
			{URI: "skill://acme/pdf/SKILL.md", Digest: "sha256:" + strings.Repeat("a", 64), Size: 120},
		}),
		Verified: &Verified{Commit: "0123456789abcdef0123456789abcdef01234567", Tag: "89abcdef0123456789abcdef0123456789abcdef", Object: "tag", Key: "SHA256:Qm3ZbY1rA0p7n5qkQ3cH0nY5kq9s0Jm0hH1b6mKQ2n8", Signer: "alice@example.com", Type: "ssh"},
	})
	l.put(LockedSkill{
		Name: "commit-message", PulledAt: "2026-11-30T10:00:00Z", Server: "https://skills.internal.test/mcp", URI: "skill://other/commit-message/SKILL.md",
		Resources: []LockResource{{URI: "skill://other/commit-message/SKILL.md", Digest: "sha256:" + strings.Repeat("1", 64), Size: 10}},
	})
	got, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != lockGolden {
		t.Fatalf("lock renders as\n%s\nwant\n%s", got, lockGolden)
	}
	dir := t.TempDir()
	if err := WriteLock(dir, l); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.Marshal()
	if !bytes.Equal(again, got) {
		t.Fatalf("round trip changed the lock:\n%s", again)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("WriteLock left %d files", len(entries))
	}
}

func TestReadLockRefusesBadLocks(t *testing.T) {
	good := strings.Replace(lockGolden, `"version": 1`, `"version": 1`, 1)
	cases := map[string]string{
		"not json":        "{",
		"unknown key":     strings.Replace(good, `"version": 1`, `"version": 1, "extra": true`, 1),
		"version 2":       strings.Replace(good, `"version": 1`, `"version": 2`, 1),
		"bad name":        strings.Replace(good, `"name": "pdf"`, `"name": "../pdf"`, 1),
		"name and uri":    strings.Replace(good, `"name": "pdf"`, `"name": "doc"`, 1),
		"dot dot":         strings.Replace(good, `skill://acme/pdf/scripts/fill.sh`, `skill://acme/pdf/../x.sh`, 1),
		"foreign file":    strings.Replace(good, `skill://acme/pdf/scripts/fill.sh`, `skill://acme/other/x.sh`, 1),
		"bad digest":      strings.Replace(good, `sha256:aaaa`, `md5:aaaa`, 1),
		"server with pw":  strings.Replace(good, `http://127.0.0.1:8080/mcp`, `http://u:p@127.0.0.1:8080/mcp`, 1),
		"not http server": strings.Replace(good, `http://127.0.0.1:8080/mcp`, `file:///etc`, 1),
		"twice":           strings.Replace(good, `"name": "commit-message"`, `"name": "pdf"`, 1),
		"verified commit": strings.Replace(good, `"commit": "0123456789abcdef0123456789abcdef01234567",
        "key"`, `"commit": "main",
        "key"`, 1),
		"verified object": strings.Replace(good, `"object": "tag"`, `"object": "tree"`, 1),
		"verified key":    strings.Replace(good, `"key": "SHA256:Qm3ZbY1rA0p7n5qkQ3cH0nY5kq9s0Jm0hH1b6mKQ2n8"`, `"key": ""`, 1),
		"verified extra":  strings.Replace(good, `"type": "ssh"`, `"type": "ssh", "trust": "me"`, 1),
	}
	for name, text := range cases {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, LockFile), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadLock(dir); !errors.Is(err, ErrBadLock) {
			t.Errorf("%s: ReadLock = %v, want ErrBadLock", name, err)
		}
	}
	if _, err := ReadLock(t.TempDir()); !errors.Is(err, ErrNoLock) {
		t.Errorf("missing lock: %v", err)
	}
}

func TestChangeIsPrintedStably(t *testing.T) {
	d := "skill://acme/pdf"
	old := []Resource{fileRes(d+"/SKILL.md", "v1"), fileRes(d+"/old.md", "x"), fileRes(d+"/same.md", "s"), fileRes(d+"/b.md", "1")}
	new := []Resource{fileRes(d+"/SKILL.md", "v2"), fileRes(d+"/same.md", "s"), fileRes(d+"/references/new.md", "n"), fileRes(d+"/b.md", "22"), fileRes(d+"/a.md", "a")}
	c := diffResources(d, old, new)
	var b strings.Builder
	c.Write(&b, "  ")
	want := "  added    a.md\n  added    references/new.md\n  changed  SKILL.md\n  changed  b.md\n  removed  old.md\n"
	if b.String() != want || c.Summary() != "2 added, 2 changed, 1 removed" {
		t.Fatalf("change printed as\n%s(%s)\nwant\n%s", b.String(), c.Summary(), want)
	}
	if !diffResources(d, old, old).Empty() {
		t.Error("a manifest differs from itself")
	}
}

func TestInstallModesAndPaths(t *testing.T) {
	dir := t.TempDir()
	s := &Skill{Name: "pdf", Files: []File{
		{Path: "SKILL.md", Data: []byte("#!not a script\n")},
		{Path: "scripts/run.sh", Data: []byte("#!/bin/sh\necho hi\n")},
		{Path: "scripts/data.txt", Data: []byte("plain\n")},
		{Path: "scripts/sub/tool", Data: []byte("#!/usr/bin/env python3\n")},
		{Path: "references/x.sh", Data: []byte("#!/bin/sh\n")},
		{Path: "my notes.md", Data: []byte{0, 1, 2}},
	}}
	if err := install(dir, s); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]fs.FileMode{
		"SKILL.md": 0o644, "scripts/run.sh": 0o755, "scripts/data.txt": 0o644, "scripts/sub/tool": 0o755,
		"references/x.sh": 0o644, "my notes.md": 0o644,
	} {
		fi, err := os.Stat(filepath.Join(dir, "pdf", filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
	for _, p := range []string{"../escape", "/etc/x", "a/../../x", ""} {
		err := install(dir, &Skill{Name: "evil", Files: []File{{Path: p, Data: []byte("x")}}})
		if err == nil {
			t.Errorf("install wrote %q", p)
		}
	}
	for _, name := range []string{"..", "a/b", "."} {
		if err := install(dir, &Skill{Name: name, Files: []File{{Path: "SKILL.md"}}}); err == nil {
			t.Errorf("install accepted the skill name %q", name)
		}
	}
	assertOnly(t, dir, "pdf")
}

// assertOnly checks that dir holds exactly the named entries (no
// temporary or aside folders left behind).
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

func TestInstallKeepsTheOldVersionWhenTheNewOneFails(t *testing.T) {
	dir := t.TempDir()
	v1 := &Skill{Name: "pdf", Files: []File{{Path: "SKILL.md", Data: []byte("v1")}, {Path: "old.md", Data: []byte("old")}}}
	if err := install(dir, v1); err != nil {
		t.Fatal(err)
	}
	check := func(want map[string]string) {
		t.Helper()
		for p, content := range want {
			got, err := os.ReadFile(filepath.Join(dir, "pdf", p))
			if err != nil || string(got) != content {
				t.Errorf("%s = %q, %v; want %q", p, got, err, content)
			}
		}
		assertOnly(t, dir, "pdf")
	}

	// A file that cannot be written (a name longer than any file system
	// allows): nothing changes.
	long := &Skill{Name: "pdf", Files: []File{{Path: "SKILL.md", Data: []byte("v2")}, {Path: strings.Repeat("n", 300), Data: []byte("x")}}}
	if err := install(dir, long); err == nil {
		t.Fatal("install of an unwritable file succeeded")
	}
	check(map[string]string{"SKILL.md": "v1", "old.md": "old"})

	// Moving the new version in fails after the old one was moved aside:
	// the old one is moved back.
	v2 := &Skill{Name: "pdf", Files: []File{{Path: "SKILL.md", Data: []byte("v2")}}}
	rename = func(from, to string) error {
		if strings.Contains(filepath.Base(from), ".skillreg-new-") {
			return errors.New("injected failure")
		}
		return os.Rename(from, to)
	}
	err := install(dir, v2)
	rename = os.Rename
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("install = %v", err)
	}
	check(map[string]string{"SKILL.md": "v1", "old.md": "old"})

	// And it succeeds when nothing fails: old.md is gone with the old
	// version.
	if err := install(dir, v2); err != nil {
		t.Fatal(err)
	}
	check(map[string]string{"SKILL.md": "v2"})
	if _, err := os.Stat(filepath.Join(dir, "pdf", "old.md")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old.md survived the replacement: %v", err)
	}
}

func TestClientDir(t *testing.T) {
	wd, home := filepath.FromSlash("/work/proj"), filepath.FromSlash("/home/u")
	for _, c := range []struct {
		client string
		global bool
		want   string
	}{
		{"claude-code", false, "/work/proj/.claude/skills"},
		{"claude-code", true, "/home/u/.claude/skills"},
		{"cursor", false, "/work/proj/.cursor/skills"},
		{"cursor", true, "/home/u/.cursor/skills"},
		{"codex", false, "/work/proj/.agents/skills"},
		{"codex", true, "/home/u/.agents/skills"},
		{"windsurf", true, "/home/u/.codeium/windsurf/skills"},
		{DefaultClient, false, "/work/proj/.agents/skills"},
	} {
		got, err := ClientDir(c.client, c.global, wd, home)
		if err != nil || got != filepath.FromSlash(c.want) {
			t.Errorf("ClientDir(%s, %v) = %q, %v; want %q", c.client, c.global, got, err, c.want)
		}
	}
	if _, err := ClientDir("vim", false, wd, home); !errors.Is(err, ErrUnknownClient) {
		t.Errorf("unknown client: %v", err)
	}
	for _, c := range Clients {
		if c.Source == "" || !strings.HasPrefix(c.Source, "https://") {
			t.Errorf("%s: no source for its paths", c.Name)
		}
	}
}

// TestPullReplacesOnlyWhatItInstalled: a folder pull did not install is
// left alone unless forced, and a pull that finds nothing new leaves the
// lock byte for byte the same.
func TestPullReplacesOnlyWhatItInstalled(t *testing.T) {
	srv := hostile.New(t, hostile.Options{Skills: hostileSkills()})
	dir := t.TempDir()
	mine := filepath.Join(dir, "good")
	if err := os.MkdirAll(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mine, "notes.md"), []byte("mine"), 0o644)
	now := func() time.Time { return time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC) }
	rep, err := Pull(context.Background(), Options{Dir: dir, Server: srv.URL, Now: now}, nil)
	if err != nil || len(rep.Failed) != 1 || !errors.Is(rep.Failed[0].Err, ErrConflict) {
		t.Fatalf("Pull over a foreign folder = %+v, %v", rep, err)
	}
	if got, _ := os.ReadFile(filepath.Join(mine, "notes.md")); string(got) != "mine" {
		t.Fatal("a foreign folder was replaced")
	}
	rep, err = Pull(context.Background(), Options{Dir: dir, Server: srv.URL, Now: now, Force: true}, nil)
	if err != nil || len(rep.Installed) != 1 {
		t.Fatalf("forced Pull = %+v, %v", rep, err)
	}
	first, _ := os.ReadFile(filepath.Join(dir, LockFile))
	later := func() time.Time { return now().Add(time.Hour) }
	rep, err = Pull(context.Background(), Options{Dir: dir, Server: srv.URL, Now: later}, nil)
	if err != nil || len(rep.Installed) != 1 || !rep.Installed[0].Previous || !rep.Installed[0].Change.Empty() {
		t.Fatalf("second Pull = %+v, %v", rep, err)
	}
	if second, _ := os.ReadFile(filepath.Join(dir, LockFile)); !bytes.Equal(first, second) {
		t.Errorf("a pull that found nothing new changed the lock:\n%s\n%s", first, second)
	}
}
