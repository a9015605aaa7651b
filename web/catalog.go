package web

import (
	"cmp"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/catalog"
)

// skillItem is one skill in a list.
type skillItem struct {
	Source      string
	Href        string
	Name        template.HTML // escaped, query terms marked
	Description template.HTML // escaped, query terms marked
	Tags        []tagItem
	Version     string
	Deprecated  bool
	Signer      string   // who signed the served commit, when the source verifies it
	Score       string   // search only
	Fields      []string // search only: the fields the query matched
}

type tagItem struct {
	Text  string
	Label template.HTML // escaped, query terms marked
	Href  string
}

type group struct {
	Source string
	Href   string
	Skills []skillItem
}

type catalogData struct {
	layout
	Total    int
	Groups   []group
	Results  []skillItem
	Searched bool
	Notice   string
	Page     int
	Pages    int
	PrevHref string
	NextHref string
}

func newSkillItem(ref catalog.Ref, terms []string) skillItem {
	fm := ref.Skill.Frontmatter
	it := skillItem{
		Source:      ref.Snap.Source,
		Href:        skillHref(ref.Snap.Source, ref.Skill.Path),
		Name:        highlight(fm.Name, terms),
		Description: highlight(fm.Description, terms),
		Version:     fm.Version,
		Deprecated:  fm.Deprecated,
	}
	if sg := ref.Snap.Signature; sg != nil && sg.Verified {
		it.Signer = sg.String()
	}
	for _, t := range fm.Tags {
		it.Tags = append(it.Tags, tagItem{Text: t, Label: highlight(t, terms), Href: "/?q=" + urlQueryEscape(t)})
	}
	return it
}

func (h *Handler) catalog(c echo.Context) error {
	v := viewerOf(c)
	cat := h.o.Catalog.Current()
	q := strings.TrimSpace(c.QueryParam("q"))
	data := catalogData{layout: h.layoutFor(c, "Skills", "catalog"), Total: cat.Len(v.Filter)}
	data.Query = q
	if q != "" {
		data.Title = "Search: " + q
		return h.search(c, cat, v, q, data)
	}
	pages := max(1, (data.Total+pageSize-1)/pageSize)
	page, err := strconv.Atoi(c.QueryParam("page"))
	if err != nil || page < 1 {
		page = 1
	}
	if page > pages {
		return h.notFound(c)
	}
	data.Page, data.Pages = page, pages
	if page > 1 {
		data.PrevHref = "/?page=" + strconv.Itoa(page-1)
	}
	if page < pages {
		data.NextHref = "/?page=" + strconv.Itoa(page+1)
	}
	refs, _ := cat.Page(v.Filter, (page-1)*pageSize, pageSize)
	for _, ref := range refs {
		if n := len(data.Groups); n == 0 || data.Groups[n-1].Source != ref.Snap.Source {
			data.Groups = append(data.Groups, group{Source: ref.Snap.Source, Href: "/sources/" + ref.Snap.Source})
		}
		g := &data.Groups[len(data.Groups)-1]
		g.Skills = append(g.Skills, newSkillItem(ref, nil))
	}
	return h.render(c, http.StatusOK, "catalog", data)
}

func (h *Handler) search(c echo.Context, cat *catalog.Catalog, v Viewer, q string, data catalogData) error {
	data.Searched = true
	if len(q) > maxQueryBytes {
		data.Notice = "The query is longer than " + strconv.Itoa(maxQueryBytes) + " bytes; shorten it."
		data.Query = truncateUTF8(q, maxQueryBytes)
		return h.render(c, http.StatusBadRequest, "catalog", data)
	}
	var hits []Hit
	if h.o.Search != nil {
		var err error
		if hits, err = h.o.Search(v.Filter, q, searchLimit); err != nil {
			h.log.Error("search", "err", err)
			data.Notice = "Search failed; try again."
			return h.render(c, http.StatusInternalServerError, "catalog", data)
		}
	} else {
		hits = substringSearch(cat, v.Filter, q, searchLimit)
	}
	terms := queryTerms(q)
	for _, hit := range hits {
		// Look every hit up again under the viewer's filter: a search
		// backend that returned something outside it must not leak it.
		ref, err := cat.Skill(v.Filter, hit.URI)
		if err != nil {
			continue
		}
		it := newSkillItem(ref, terms)
		it.Score = strconv.FormatFloat(hit.Score, 'f', 2, 64)
		it.Fields = hit.Fields
		data.Results = append(data.Results, it)
		if len(data.Results) == searchLimit {
			break
		}
	}
	return h.render(c, http.StatusOK, "catalog", data)
}

// substringSearch is the search used when no ranked index is configured:
// every query term must occur in the name, the description or a tag; the
// name counts most, then tags, then the description.
func substringSearch(cat *catalog.Catalog, f catalog.Filter, q string, limit int) []Hit {
	terms := queryTerms(q)
	if len(terms) == 0 {
		return nil
	}
	var hits []Hit
	for _, ref := range cat.All(f) {
		fm := ref.Skill.Frontmatter
		name, desc := strings.ToLower(fm.Name), strings.ToLower(fm.Description)
		tags := strings.ToLower(strings.Join(fm.Tags, "\x00"))
		var score float64
		fields := map[string]bool{}
		all := true
		for _, t := range terms {
			found := false
			if strings.Contains(name, t) {
				score += 3
				fields["name"], found = true, true
			}
			if strings.Contains(tags, t) {
				score += 2
				fields["tags"], found = true, true
			}
			if strings.Contains(desc, t) {
				score++
				fields["description"], found = true, true
			}
			if !found {
				all = false
				break
			}
		}
		if !all {
			continue
		}
		hit := Hit{URI: ref.URI(), Source: ref.Snap.Source, Name: fm.Name, Score: score}
		for _, k := range []string{"name", "tags", "description"} {
			if fields[k] {
				hit.Fields = append(hit.Fields, k)
			}
		}
		hits = append(hits, hit)
	}
	slices.SortStableFunc(hits, func(a, b Hit) int { return cmp.Compare(b.Score, a.Score) })
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}

// queryTerms splits a query into lowercase words worth marking: letters
// and digits, at least two characters, at most 16 distinct terms.
func queryTerms(q string) []string {
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	var out []string
	for _, w := range words {
		if utf8.RuneCountInString(w) < 2 || slices.Contains(out, w) {
			continue
		}
		out = append(out, w)
		if len(out) == 16 {
			break
		}
	}
	return out
}

// highlight escapes s and wraps every case-insensitive occurrence of a
// term in <mark>. Matches are found on the text, then each piece is
// escaped on its own, so a mark can never split an escape sequence and
// nothing from s is ever written unescaped.
func highlight(s string, terms []string) template.HTML {
	if len(terms) == 0 || s == "" {
		return template.HTML(template.HTMLEscapeString(s)) //nolint:gosec // escaped
	}
	// Fold s to lowercase rune by rune, remembering where each folded byte
	// came from, so that matches map back onto s exactly.
	var folded strings.Builder
	var origin []int
	for i, r := range s {
		lr := unicode.ToLower(r)
		n := folded.Len()
		folded.WriteRune(lr)
		for range folded.Len() - n {
			origin = append(origin, i)
		}
	}
	origin = append(origin, len(s))
	f := folded.String()
	marked := make([]bool, len(s)+1)
	found := false
	for _, t := range terms {
		for off := 0; ; {
			i := strings.Index(f[off:], t)
			if i < 0 {
				break
			}
			start, end := origin[off+i], origin[off+i+len(t)]
			for j := start; j < end; j++ {
				marked[j] = true
			}
			found = found || end > start
			off += i + len(t)
		}
	}
	if !found {
		return template.HTML(template.HTMLEscapeString(s)) //nolint:gosec // escaped
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && marked[j] == marked[i] {
			j++
		}
		if marked[i] {
			b.WriteString("<mark>")
			b.WriteString(template.HTMLEscapeString(s[i:j]))
			b.WriteString("</mark>")
		} else {
			b.WriteString(template.HTMLEscapeString(s[i:j]))
		}
		i = j
	}
	return template.HTML(b.String()) //nolint:gosec // every piece escaped
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
