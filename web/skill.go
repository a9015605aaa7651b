package web

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// skillOrFile serves /skills/<source>/<skill-path> (the skill page) and
// /skills/<source>/<skill-path>/-/files/<path> (one file's bytes). A
// skill's directory is named after the skill, and a skill name never is
// "-", so "-" marks where the skill path ends.
func (h *Handler) skillOrFile(c echo.Context) error {
	raw := strings.TrimPrefix(c.Request().URL.EscapedPath(), "/skills/")
	segs := strings.Split(raw, "/")
	if len(segs) > 1 && segs[len(segs)-1] == "" {
		segs = segs[:len(segs)-1]
	}
	for i, s := range segs {
		// Segments are unescaped one by one, so an encoded "/" stays inside
		// its segment (and then matches nothing).
		d, err := url.PathUnescape(s)
		if err != nil || d == "" || d == "." || d == ".." || strings.ContainsAny(d, "/\\\x00") {
			return h.notFound(c)
		}
		segs[i] = d
	}
	source, rest := segs[0], segs[1:]
	v := viewerOf(c)
	cat := h.o.Catalog.Current()
	if !catalog.ValidSourceName(source) || !v.Filter.Allows(source) {
		return h.notFound(c)
	}
	if _, ok := cat.Snapshot(source); !ok {
		return h.notFound(c)
	}
	for i := 0; i+1 < len(rest); i++ {
		if rest[i] != "-" || rest[i+1] != "files" {
			continue
		}
		ref, err := cat.Skill(v.Filter, catalog.FileURI(source, joinRel(strings.Join(rest[:i], "/"), "SKILL.md")))
		if err == nil {
			return h.file(c, ref, strings.Join(rest[i+2:], "/"))
		}
	}
	ref, err := cat.Skill(v.Filter, catalog.FileURI(source, joinRel(strings.Join(rest, "/"), "SKILL.md")))
	if err != nil {
		return h.notFound(c)
	}
	return h.skillPage(c, cat, v, ref)
}

// file answers one file's verified bytes as plain text that no browser
// renders: text/plain, nosniff, a sandboxing CSP, and a Content-Disposition
// (inline for text, attachment for anything binary).
func (h *Handler) file(c echo.Context, ref catalog.Ref, rel string) error {
	f, ok := ref.Skill.File(rel)
	if rel == "" || !ok {
		return h.notFound(c)
	}
	fr := catalog.FileRef{Ref: ref, File: f, URI: ref.Snap.FileURI(ref.Skill, f)}
	data, err := h.o.Catalog.ReadFile(c.Request().Context(), fr)
	if errors.Is(err, catalog.ErrChanged) {
		c.Response().Header().Set("Retry-After", "5")
		return h.errorPage(c, http.StatusServiceUnavailable, "File changed", "This file changed in its source since it was indexed, so it is not served; a resync has been requested. Reload in a moment.")
	}
	if err != nil {
		h.log.Error("read file", "source", ref.Snap.Source, "skill", ref.Skill.Path, "file", f.Path, "err", err)
		return h.errorPage(c, http.StatusInternalServerError, "Something went wrong", "The file could not be read.")
	}
	disposition := "inline"
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		disposition = "attachment"
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", fileCSP)
	hd.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": path.Base(f.Path)}))
	hd.Set("ETag", `"`+f.Digest.String()+`"`)
	if !f.Digest.IsZero() {
		hd.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(f.Digest[:])+":")
	}
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", data)
}

type fmRow struct {
	Key   string
	Value string
	JSON  bool // a nested value, shown as JSON
}

type fileRow struct {
	Path   string
	Href   string
	Size   int64
	Digest string
	Exec   bool
}

type link struct {
	Text string
	Href string
}

type skillData struct {
	layout
	Item        skillItem
	Path        string
	URI         string
	Body        template.HTML
	Frontmatter []fmRow
	Files       []fileRow
	TotalSize   int64
	Parent      *link
	Children    []link
	MoreKids    int

	Kind       catalog.Kind
	Prov       catalog.Provenance
	RepoURL    string
	CommitURL  string
	TreeURL    string
	IndexedAt  time.Time
	MCPURL     string
	ClaudeCode string
	CursorJSON string
	Install    string // the skills CLI command for this skill, when it needs no token
}

const maxChildren = 100

func (h *Handler) skillPage(c echo.Context, cat *catalog.Catalog, v Viewer, ref catalog.Ref) error {
	sk, snap := ref.Skill, ref.Snap
	// The body is not kept in memory: read SKILL.md back, verified against
	// its digest, and cut off the frontmatter.
	md, _ := sk.File("SKILL.md")
	data, err := h.o.Catalog.ReadFile(c.Request().Context(), catalog.FileRef{Ref: ref, File: md, URI: ref.URI()})
	if errors.Is(err, catalog.ErrChanged) {
		c.Response().Header().Set("Retry-After", "5")
		return h.errorPage(c, http.StatusServiceUnavailable, "Skill changed", "This skill changed in its source since it was indexed, so it is not shown; a resync has been requested. Reload in a moment.")
	}
	if err != nil {
		h.log.Error("read SKILL.md", "source", snap.Source, "skill", sk.Path, "err", err)
		return h.errorPage(c, http.StatusInternalServerError, "Something went wrong", "The skill could not be read.")
	}
	text, err := skill.SkillMDBody(data)
	if err != nil {
		h.log.Error("read SKILL.md", "source", snap.Source, "skill", sk.Path, "err", err)
		return h.errorPage(c, http.StatusInternalServerError, "Something went wrong", "The skill could not be read.")
	}
	body, err := h.md.render(string(text), &linkResolver{cat: cat, filter: v.Filter, snap: snap, skill: sk})
	if err != nil {
		h.log.Error("render skill", "source", snap.Source, "skill", sk.Path, "err", err)
		return h.errorPage(c, http.StatusInternalServerError, "Something went wrong", "The skill could not be rendered.")
	}
	d := skillData{
		layout:      h.layoutFor(c, sk.Name(), "catalog"),
		Item:        newSkillItem(ref, nil),
		Path:        sk.Path,
		URI:         ref.URI(),
		Body:        body,
		Frontmatter: frontmatterRows(sk.Frontmatter.JSON),
		TotalSize:   sk.Size,
		Kind:        snap.Kind,
		Prov:        h.provenance(c.Request().Context(), ref),
		IndexedAt:   snap.IndexedAt,
	}
	for _, f := range sk.Files {
		d.Files = append(d.Files, fileRow{Path: f.Path, Href: fileHref(snap.Source, sk.Path, f.Path), Size: f.Size, Digest: f.Digest.String(), Exec: f.Exec})
	}
	if base, ok := githubRepo(snap.Repository); ok {
		d.RepoURL = base
		if commitRE.MatchString(snap.Commit) {
			d.CommitURL = base + "/commit/" + snap.Commit
			d.TreeURL = base + "/tree/" + snap.Commit
			if d.Prov.Path != "" {
				d.TreeURL += "/" + catalog.EscapePath(d.Prov.Path)
			}
		}
	}
	d.Parent, d.Children, d.MoreKids = family(cat, v.Filter, snap, sk)
	d.MCPURL = h.o.MCPURL
	if d.MCPURL == "" {
		d.MCPURL = c.Scheme() + "://" + c.Request().Host + "/mcp"
	}
	d.ClaudeCode, d.CursorJSON = connectSnippets(d.MCPURL, h.authRequired())
	d.Install = h.installCommand(c, snap.Source, skillHref(snap.Source, sk.Path))
	return h.render(c, http.StatusOK, "skill", d)
}

// family finds the skill's nearest enclosing skill and the skills nested
// directly under it.
func family(cat *catalog.Catalog, f catalog.Filter, snap *catalog.Snapshot, sk *skill.Skill) (*link, []link, int) {
	var parent *link
	if sk.Path != "" {
		for d := path.Dir(sk.Path); ; d = path.Dir(d) {
			if d == "." {
				d = ""
			}
			if ref, err := cat.Skill(f, catalog.FileURI(snap.Source, joinRel(d, "SKILL.md"))); err == nil {
				parent = &link{Text: ref.Skill.Name(), Href: skillHref(snap.Source, ref.Skill.Path)}
				break
			}
			if d == "" {
				break
			}
		}
	}
	var kids []link
	more := 0
	for _, other := range snap.Skills {
		rel, ok := within(sk.Path, other.Path)
		if !ok {
			continue
		}
		// Nested directly: no other skill between this one and it.
		direct := true
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			if _, err := cat.Skill(f, catalog.FileURI(snap.Source, joinRel(joinRel(sk.Path, d), "SKILL.md"))); err == nil {
				direct = false
				break
			}
		}
		if !direct {
			continue
		}
		if len(kids) == maxChildren {
			more++
			continue
		}
		kids = append(kids, link{Text: other.Name(), Href: skillHref(snap.Source, other.Path)})
	}
	return parent, kids, more
}

// frontmatterRows lists the frontmatter's top-level keys in document
// order; strings as they are, anything else as JSON.
func frontmatterRows(raw json.RawMessage) []fmRow {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var rows []fmRow
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return rows
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return rows
		}
		var s string
		if json.Unmarshal(val, &s) == nil {
			rows = append(rows, fmRow{Key: key, Value: s})
			continue
		}
		var pretty bytes.Buffer
		if json.Indent(&pretty, val, "", "  ") != nil {
			pretty.Reset()
			pretty.Write(val)
		}
		rows = append(rows, fmRow{Key: key, Value: pretty.String(), JSON: true})
	}
	return rows
}

var (
	commitRE  = regexp.MustCompile(`^[0-9a-f]{40}$|^[0-9a-f]{64}$`)
	ghNameRE  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
	scpLikeRE = regexp.MustCompile(`^[A-Za-z0-9._-]+@([A-Za-z0-9.-]+):(.*)$`)
)

// githubRepo returns the web address of a repository hosted on GitHub
// (https, ssh or scp-like URL), or false for any other host.
func githubRepo(repo string) (string, bool) {
	var host, p string
	if m := scpLikeRE.FindStringSubmatch(repo); m != nil && !strings.Contains(repo, "://") {
		host, p = m[1], m[2]
	} else {
		u, err := url.Parse(repo)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh" && u.Scheme != "git") {
			return "", false
		}
		host, p = u.Hostname(), u.Path
	}
	if h := strings.ToLower(host); h != "github.com" && h != "www.github.com" {
		return "", false
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	owner, name, ok := strings.Cut(p, "/")
	if !ok || !ghNameRE.MatchString(owner) || !ghNameRE.MatchString(name) || owner == "." || owner == ".." || name == "." || name == ".." {
		return "", false
	}
	return "https://github.com/" + owner + "/" + name, true
}

var shellSafeRE = regexp.MustCompile(`^[A-Za-z0-9:/._~%@+-]+$`)

// connectSnippets returns the exact client configuration for the MCP
// endpoint: the Claude Code command and Cursor's .cursor/mcp.json.
func connectSnippets(mcpURL string, auth bool) (claude, cursor string) {
	arg := mcpURL
	if !shellSafeRE.MatchString(arg) {
		arg = "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
	}
	claude = "claude mcp add --transport http skillreg " + arg
	server := map[string]any{"url": mcpURL}
	if auth {
		claude += ` --header "Authorization: Bearer $SKILLREG_TOKEN"`
		server["headers"] = map[string]string{"Authorization": "Bearer <your token>"}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]any{"mcpServers": map[string]any{"skillreg": server}})
	return claude, strings.TrimSuffix(b.String(), "\n")
}
