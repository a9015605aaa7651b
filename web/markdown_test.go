package web

import (
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
)

// TestMarkdownIsInert renders hostile Markdown alone (no catalog to
// resolve relative links against) and checks the parsed output.
func TestMarkdownIsInert(t *testing.T) {
	md := newMarkdown()
	tests := []struct {
		name, in string
		want     []string
	}{
		{"script block", "<script>alert(1)</script>", []string{"<!-- raw HTML omitted -->"}},
		{"inline handler", "x <img src=x onerror=alert(1)> y", []string{"x <!-- raw HTML omitted --> y"}},
		{"iframe", "<iframe src=\"https://evil.example\"></iframe>", nil},
		{"javascript link", "[x](javascript:alert(1))", []string{"<p>x</p>"}},
		{"javascript with entity", "[x](&#106;avascript:alert(1))", []string{"<p>x</p>"}},
		{"javascript caps", "[x](JaVaScRiPt:alert(1))", []string{"<p>x</p>"}},
		{"javascript escaped colon", "[x](javascript&colon;alert(1))", []string{"<p>x</p>"}},
		{"data link", "[x](data:text/html,<script>alert(1)</script>)", nil},
		{"vbscript", "[x](vbscript:msgbox)", []string{"<p>x</p>"}},
		{"file", "[x](file:///etc/passwd)", []string{"<p>x</p>"}},
		{"protocol relative", "[x](//evil.example/a)", []string{"<p>x</p>"}},
		{"backslash host", "[x](/\\evil.example)", []string{"<p>x</p>"}},
		{"credentials", "[x](https://user:pw@evil.example/)", []string{"<p>x</p>"}},
		{"reference link", "[x][r]\n\n[r]: javascript:alert(1)", []string{"<p>x</p>"}},
		{"autolink javascript", "<javascript:alert(1)>", []string{"<p>javascript:alert(1)</p>"}},
		{"autolink email", "<sec@example.com>", []string{`<a href="mailto:sec@example.com" rel="nofollow noopener noreferrer">sec@example.com</a>`}},
		{"external link", `[x](https://example.com/a?b=1&c=2 "t<i>")`, []string{`<a href="https://example.com/a?b=1&amp;c=2" title="t&lt;i&gt;" rel="nofollow noopener noreferrer">x</a>`}},
		{"external image", "![pixel](https://evil.example/p.gif)", []string{`<a href="https://evil.example/p.gif" rel="nofollow noopener noreferrer" class="md-image">image: pixel</a>`}},
		{"data image", "![x](data:image/png;base64,AAAA)", []string{"<p>[image: x]</p>"}},
		{"image without alt", "![](https://example.com/a.png)", []string{">image</a>"}},
		{"image alt markup", "![<b>bad</b> *alt*](javascript:x)", []string{"<p>[image: bad alt]</p>"}},
		{"relative without catalog", "[x](references/a.md)", []string{"<p>x</p>"}},
		{"html in code", "`<script>`", []string{"<code>&lt;script&gt;</code>"}},
		{"attribute syntax off", "# h {onclick=alert(1)}", []string{"{onclick=alert(1)}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := md.render(tt.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			assertInert(t, tt.name, string(out))
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("render(%q) = %s; missing %s", tt.in, out, w)
				}
			}
		})
	}
}

// The checker itself must catch what it is meant to catch.
func TestActiveContentChecker(t *testing.T) {
	for _, bad := range []string{
		`<script>x</script>`, `<img src=x>`, `<a href="javascript:x">`, `<a href=" JAVASCRIPT:x">`, `<a href="data:text/html,x">`,
		`<p onclick="x">`, `<div style="background:url(x)">`, `<svg><a xlink:href="x">`, `<link rel=stylesheet href="https://evil/x.css">`,
		`<meta http-equiv="refresh" content="0;url=x">`, `<a href="//evil.example">`, `<form action="https://evil.example">`,
	} {
		if len(activeContent(bad)) == 0 {
			t.Errorf("activeContent(%q) found nothing", bad)
		}
	}
	if got := activeContent(`<a href="/skills/x">x</a><a href="#y">y</a><a href="https://e.example">e</a>`); len(got) != 0 {
		t.Errorf("safe links flagged: %q", got)
	}
}

func TestResolveRelativeLinks(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	cat := f.reg.Current()
	ref, err := cat.Skill(catalog.Filter{}, "skill://team/deploy-checklist/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	team := catalog.Filter{Only: map[string]bool{"team": true}}
	r := &linkResolver{cat: cat, filter: team, snap: ref.Snap, skill: ref.Skill}
	tests := map[string]string{
		"scripts/check.sh":                       "/skills/team/deploy-checklist/-/files/scripts/check.sh",
		"./scripts/check.sh#L2":                  "/skills/team/deploy-checklist/-/files/scripts/check.sh",
		"scripts/../scripts/check.sh":            "/skills/team/deploy-checklist/-/files/scripts/check.sh",
		"rollback/SKILL.md":                      "/skills/team/deploy-checklist/rollback",
		"rollback":                               "/skills/team/deploy-checklist/rollback",
		"rollback/":                              "/skills/team/deploy-checklist/rollback",
		"SKILL.md":                               "/skills/team/deploy-checklist",
		"../hostile/references/notes.md":         "/skills/team/hostile/-/files/references/notes.md",
		"../hostile":                             "/skills/team/hostile",
		"../mismatch/SKILL.md":                   "", // excluded, so not served
		"../../secret/payroll-export/SKILL.md":   "", // outside the source
		"../../../etc/passwd":                    "",
		"scripts":                                "", // a directory that is no skill
		"nope.md":                                "",
		"scripts%2Fcheck.sh":                     "",
		"/skills/team/deploy-checklist/SKILL.md": "",
	}
	for in, want := range tests {
		got, ok := r.resolve(in)
		if got.href != want || ok != (want != "") || got.external {
			t.Errorf("resolve(%q) = %+v, %v; want %q", in, got, ok, want)
		}
	}
}
