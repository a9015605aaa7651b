package publish

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// A Claude Code plugin marketplace: one plugin per skill (named as in the
// discovery index) and one "<source>-all" per source, each an archive
// source on this server's own origin. No plugin has a version: Claude
// Code then versions it by its sha256, so new bytes are an update.

type marketplaceDoc struct {
	Name    string   `json:"name"`
	Owner   owner    `json:"owner"`
	Plugins []plugin `json:"plugins"`
}

type owner struct {
	Name string `json:"name"`
}

type plugin struct {
	Name        string       `json:"name"`
	Description string       `json:"description,omitempty"`
	Source      pluginSource `json:"source"`
	Strict      bool         `json:"strict"`
	// Metadata carries a one-skill plugin's provenance under
	// "dev.skillreg/provenance": Claude Code's validator warns on unknown
	// top-level members of a plugin entry, not on metadata's.
	Metadata map[string]any `json:"metadata,omitempty"`
}

type pluginSource struct {
	Source string `json:"source"` // "archive"
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// kebab turns a name into kebab-case of at most 64 characters: runs of
// anything but a-z and 0-9 become one hyphen (a source named "acme.tools"
// gives "acme-tools").
func kebab(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	out := b.String()
	if len(out) > 64 {
		out = strings.TrimRight(out[:64], "-")
	}
	return out
}

func (h *Handler) marketplace(c echo.Context, cl caller) error {
	ctx := c.Request().Context()
	base := h.o.BaseURL(c.Request())
	if base == "" {
		return &httpError{http.StatusMisdirectedRequest, "this Host is not one skillreg may build absolute URLs on; set public_url"}
	}
	v := h.view(ctx)
	h.plugins(ctx, v)
	sc := scope{source: c.Param("name")}
	// The document is cached once per scope and filter, with a placeholder
	// origin put in at every request: the base comes from the Host, which
	// anyone may vary (every IP literal is allowed), so it must not be
	// part of a cache key.
	key := "mp\x00" + scopeKey(sc) + "\x00" + cl.filterKey()
	tmpl, err := v.bodies.get(key, func() ([]byte, error) {
		es, err := v.entriesFor(cl, sc)
		if err != nil {
			return nil, err
		}
		base := h.baseMark
		name := h.o.MarketplaceName
		if sc.source != "" {
			name = kebab(name + "-" + sc.source)
		}
		own := h.o.MarketplaceOwner
		if own == "" {
			own = h.hostMark
		}
		doc := marketplaceDoc{Name: name, Owner: owner{Name: own}, Plugins: []plugin{}}
		alls := v.allPlugins(cl, sc)
		taken := map[string]bool{}
		for _, sp := range alls {
			taken[sp.name] = true
		}
		listed := unique(es, func(e *entry) bool { return e.pluginSkip() == "" && !taken[e.name()] }, nil)
		prov := h.provenances(ctx, listed)
		for i, e := range listed {
			doc.Plugins = append(doc.Plugins, plugin{Name: e.name(), Description: e.desc(), Strict: false,
				Source: archiveSource(base, e.plugin), Metadata: map[string]any{metaProvenance: prov[i]}})
		}
		for _, sp := range alls {
			doc.Plugins = append(doc.Plugins, plugin{Name: sp.name, Description: fmt.Sprintf("Every skill of %s (%d)", sp.source, sp.count), Strict: false,
				Source: archiveSource(base, sp.digest)})
		}
		return marshal(doc)
	})
	if err != nil {
		return err
	}
	host := ""
	if u, err := url.Parse(base); err == nil {
		host = u.Hostname()
	}
	data := bytes.ReplaceAll(tmpl.data, []byte(h.baseMark), jsonText(base))
	data = bytes.ReplaceAll(data, []byte(h.hostMark), jsonText(host))
	return h.serveBody(c, cl, body{data: data, etag: etagOf(data)})
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) []byte {
	b, _ := marshal(s)
	return bytes.TrimSuffix(bytes.TrimPrefix(bytes.TrimSpace(b), []byte(`"`)), []byte(`"`))
}

// newMarks returns the placeholder origin and host of cached marketplace
// documents: random, so no skill's text can hold them, and of characters
// the encoder leaves as they are (it does not escape '/').
func newMarks() (base, host string) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	host = "skillreg-base-" + hex.EncodeToString(b[:]) + ".invalid"
	return "http://" + host, host
}

// allPlugins returns the "<source>-all" plugins a scope shows the caller.
func (v *view) allPlugins(cl caller, sc scope) []*sourcePlugin {
	var out []*sourcePlugin
	for _, snap := range v.cat.Sources(cl.filter) {
		if sc.source != "" && snap.Source != sc.source {
			continue
		}
		if sp := v.all[snap.Source]; sp != nil && sp.skip == "" {
			out = append(out, sp)
		}
	}
	return out
}

func archiveSource(base string, digest sum) pluginSource {
	hexd := digest.hex() // an archive's: publish hashed it
	return pluginSource{Source: "archive", URL: base + "/artifacts/sha256/" + hexd + ".zip", SHA256: hexd}
}
