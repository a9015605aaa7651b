package web

import (
	"bytes"
	"fmt"
	"html/template"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// markdown renders SKILL.md bodies. Raw HTML is never passed through
// (goldmark's default renderer without WithUnsafe omits it), and every
// link, autolink and image goes through inertLinks before rendering, so
// nothing in a skill can load or run anything in the page.
type markdown struct {
	md goldmark.Markdown
}

var resolverKey = parser.NewContextKey()

func newMarkdown() *markdown {
	return &markdown{md: goldmark.New(
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithParserOptions(
			parser.WithAutoHeadingID(),
			parser.WithASTTransformers(util.Prioritized(inertLinks{}, 0)),
		),
	)}
}

// render converts a skill's Markdown body to HTML. The output is trusted
// as template.HTML because goldmark escaped every text and attribute and
// inertLinks rewrote every URL in it.
func (m *markdown) render(body string, res *linkResolver) (template.HTML, error) {
	pc := parser.NewContext()
	pc.Set(resolverKey, res)
	var buf bytes.Buffer
	if err := m.md.Convert([]byte(body), &buf, parser.WithContext(pc)); err != nil {
		return "", fmt.Errorf("render markdown: %w", err)
	}
	return template.HTML(buf.String()), nil //nolint:gosec // see the doc comment
}

// rel is set on every link that leaves the catalog.
const externalRel = "nofollow noopener noreferrer"

// inertLinks rewrites the links of a document: links to the skill's own
// files and to other visible skills point at their catalog pages, http(s)
// and mailto links stay but carry rel="nofollow noopener noreferrer", and
// anything else (javascript:, data:, absolute paths, unknown files) loses
// its link and keeps only its text. Images never load: each becomes a link
// (or plain text) naming the image.
type inertLinks struct{}

func (inertLinks) Transform(doc *ast.Document, reader text.Reader, pc parser.Context) {
	res, _ := pc.Get(resolverKey).(*linkResolver)
	source := reader.Source()
	var nodes []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			switch n.(type) {
			case *ast.Link, *ast.AutoLink, *ast.Image:
				nodes = append(nodes, n)
			}
		}
		return ast.WalkContinue, nil
	})
	for _, n := range nodes {
		parent := n.Parent()
		if parent == nil {
			continue
		}
		switch n := n.(type) {
		case *ast.Link:
			t, ok := res.resolve(string(n.Destination))
			if !ok {
				unwrap(n)
				continue
			}
			n.Destination = []byte(t.href)
			if t.external {
				n.SetAttributeString("rel", []byte(externalRel))
			}
		case *ast.AutoLink:
			dest := string(n.URL(source))
			if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(strings.ToLower(dest), "mailto:") {
				dest = "mailto:" + dest
			}
			label := rawString(string(n.Label(source)))
			t, ok := res.resolve(dest)
			if !ok {
				parent.ReplaceChild(parent, n, label)
				continue
			}
			parent.ReplaceChild(parent, n, newLink(t, label))
		case *ast.Image:
			name := "image"
			if alt := strings.TrimSpace(plainText(n, source)); alt != "" {
				name = "image: " + alt
			}
			t, ok := res.resolve(string(n.Destination))
			if !ok || insideLink(n) {
				parent.ReplaceChild(parent, n, rawString("["+name+"]"))
				continue
			}
			l := newLink(t, rawString(name))
			l.SetAttributeString("class", []byte("md-image"))
			parent.ReplaceChild(parent, n, l)
		}
	}
}

func newLink(t target, label ast.Node) *ast.Link {
	l := ast.NewLink()
	l.Destination = []byte(t.href)
	if t.external {
		l.SetAttributeString("rel", []byte(externalRel))
	}
	l.AppendChild(l, label)
	return l
}

// rawString is a text node rendered escaped, without Markdown's entity
// and backslash processing.
func rawString(s string) *ast.String {
	n := ast.NewString([]byte(s))
	n.SetRaw(true)
	return n
}

// unwrap replaces a node with its children.
func unwrap(n ast.Node) {
	parent := n.Parent()
	for c := n.FirstChild(); c != nil; {
		next := c.NextSibling()
		parent.InsertBefore(parent, n, c)
		c = next
	}
	parent.RemoveChild(parent, n)
}

func insideLink(n ast.Node) bool {
	for p := n.Parent(); p != nil; p = p.Parent() {
		if _, ok := p.(*ast.Link); ok {
			return true
		}
	}
	return false
}

// plainText collects the text under n (an image's alt text).
func plainText(n ast.Node, source []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(source))
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// target is where a rewritten link points.
type target struct {
	href     string
	external bool
}

// linkResolver resolves a skill's relative links against the catalog the
// viewer sees.
type linkResolver struct {
	cat    *catalog.Catalog
	filter catalog.Filter
	snap   *catalog.Snapshot
	skill  *skill.Skill
}

var fragmentRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

// resolve decides where a link from the skill may point, if anywhere.
func (r *linkResolver) resolve(raw string) (target, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > 2048 {
		return target{}, false
	}
	// Browsers drop tabs and newlines inside URLs ("java\tscript:"), so
	// refuse anything with whitespace, control characters or backslashes
	// rather than guess how a browser reads it.
	for _, c := range raw {
		if c < 0x20 || c == 0x7f || c == '\\' || unicode.IsSpace(c) {
			return target{}, false
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, false
	}
	switch {
	case u.Scheme == "http" || u.Scheme == "https":
		if u.Host == "" || u.User != nil {
			return target{}, false
		}
		return target{href: u.String(), external: true}, true
	case u.Scheme == "mailto":
		if u.Opaque == "" {
			return target{}, false
		}
		return target{href: u.String(), external: true}, true
	case u.Scheme != "" || u.Host != "" || strings.HasPrefix(raw, "//"):
		return target{}, false
	case strings.HasPrefix(raw, "#"):
		if !fragmentRE.MatchString(u.Fragment) {
			return target{}, false
		}
		return target{href: "#" + u.Fragment}, true
	case strings.HasPrefix(u.Path, "/"):
		return target{}, false
	}
	// An encoded separator names no file of a skill: refuse it rather than
	// decode it into a different path.
	if ep := strings.ToLower(u.EscapedPath()); strings.Contains(ep, "%2f") || strings.Contains(ep, "%5c") {
		return target{}, false
	}
	return r.resolveRelative(u.Path)
}

// resolveRelative resolves a path relative to the skill's directory: a
// skill (its directory or its SKILL.md) links to its page, a file of this
// skill or of another visible skill of the same source to its file view.
func (r *linkResolver) resolveRelative(p string) (target, bool) {
	if r == nil || r.snap == nil || r.skill == nil {
		return target{}, false
	}
	full := path.Join(r.skill.Path, p)
	if full == "." {
		full = ""
	}
	if full == ".." || strings.HasPrefix(full, "../") {
		return target{}, false
	}
	src := r.snap.Source
	dir := full
	if path.Base(full) == "SKILL.md" {
		dir = strings.TrimSuffix(strings.TrimSuffix(full, "SKILL.md"), "/")
	}
	if ref, err := r.cat.Skill(r.filter, catalog.FileURI(src, joinRel(dir, "SKILL.md"))); err == nil {
		return target{href: skillHref(src, ref.Skill.Path)}, true
	}
	if rel, ok := within(r.skill.Path, full); ok {
		if f, ok := r.skill.File(rel); ok {
			return target{href: fileHref(src, r.skill.Path, f.Path)}, true
		}
	}
	if fr, err := r.cat.File(r.filter, catalog.FileURI(src, full)); err == nil {
		return target{href: fileHref(src, fr.Skill.Path, fr.File.Path)}, true
	}
	return target{}, false
}

// within returns p relative to dir when p lies inside dir.
func within(dir, p string) (string, bool) {
	if dir == "" {
		return p, p != ""
	}
	rel, ok := strings.CutPrefix(p, dir+"/")
	return rel, ok && rel != ""
}

func joinRel(dir, p string) string {
	if dir == "" {
		return p
	}
	if p == "" {
		return dir
	}
	return dir + "/" + p
}

// skillHref is the page of a skill.
func skillHref(source, skillPath string) string {
	if skillPath == "" {
		return "/skills/" + source
	}
	return "/skills/" + source + "/" + catalog.EscapePath(skillPath)
}

// fileHref is the raw view of one file of a skill.
func fileHref(source, skillPath, filePath string) string {
	prefix := "/skills/" + source + "/"
	if skillPath != "" {
		prefix += catalog.EscapePath(skillPath) + "/"
	}
	return prefix + "-/files/" + catalog.EscapePath(filePath)
}
