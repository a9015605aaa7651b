package web

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/catalog"
)

type sourceView struct {
	catalog.State
	Anchor    string
	Href      string
	Serving   bool // the catalog holds a snapshot of it
	Describe  string
	IndexedAt time.Time
	Excluded  []exclusionRow
	RepoURL   string
	CommitURL string
	Install   string        // the skills CLI command for the whole source, when it needs no token
	SkillList []link        // on a source's own page: its skills
	Left      []Unpublished // what the installers' indexes leave out
}

type exclusionRow struct {
	Path   string
	File   string
	Rule   string
	Detail string
}

// discoveredGroup is one github: template's repositories.
type discoveredGroup struct {
	Group     string
	ListError string
	Repos     []Discovered
}

type deliveryView struct {
	Delivery
	Sources []link
}

type sourcesData struct {
	layout
	One        bool // a single source's page
	Sources    []sourceView
	Discovered []discoveredGroup
	Deliveries []deliveryView
	Webhooks   bool // deliveries are configured
	Peers      *peersView
}

// peersView is the relay section: shown on /sources to viewers who see
// every source (peer addresses are the operator's business).
type peersView struct {
	Peers
	Received []outcomeCount
}

type outcomeCount struct {
	Outcome string
	N       uint64
}

// sources serves /sources (every visible source) and /sources/<name> (one).
func (h *Handler) sources(c echo.Context) error {
	v := viewerOf(c)
	cat := h.o.Catalog.Current()
	only := c.Param("name")
	if only != "" && (!catalog.ValidSourceName(only) || !v.Filter.Allows(only)) {
		return h.notFound(c)
	}
	var states []catalog.State
	if h.o.States != nil {
		states = h.o.States()
	}
	// A source the catalog serves but the states do not know (restored from
	// the store before its first sync, say) is shown from its snapshot.
	known := map[string]bool{}
	for _, st := range states {
		known[st.Source] = true
	}
	for _, snap := range cat.Sources(catalog.Filter{}) {
		if !known[snap.Source] {
			states = append(states, catalog.State{Source: snap.Source, Kind: snap.Kind, Repository: snap.Repository, Ref: snap.Ref,
				Commit: snap.Commit, Skills: len(snap.Skills), Excluded: len(snap.Excluded)})
		}
	}
	slices.SortFunc(states, func(a, b catalog.State) int {
		switch {
		case a.Source < b.Source:
			return -1
		case a.Source > b.Source:
			return 1
		}
		return 0
	})

	title := "Sources"
	if only != "" {
		title = "Source " + only
	}
	data := sourcesData{layout: h.layoutFor(c, title, "sources"), One: only != "", Webhooks: h.o.Deliveries != nil}
	for _, st := range states {
		if !v.Filter.Allows(st.Source) || (only != "" && st.Source != only) {
			continue
		}
		sv := sourceView{State: st, Anchor: "src-" + st.Source, Href: "/sources/" + st.Source, Describe: st.Ref}
		if snap, ok := cat.Snapshot(st.Source); ok {
			sv.Serving, sv.IndexedAt = true, snap.IndexedAt
			for _, ex := range snap.Excluded {
				sv.Excluded = append(sv.Excluded, exclusionRow{Path: ex.Path, File: ex.File, Rule: string(ex.Problem.Rule), Detail: ex.Problem.Detail})
			}
			if st.Commit == "" {
				sv.Commit = snap.Commit
			}
		}
		sv.Install = h.installCommand(c, st.Source, "/sources/"+st.Source)
		if h.o.Unpublished != nil {
			sv.Left = h.o.Unpublished(c.Request().Context(), v.Filter, st.Source)
		}
		if snap, ok := cat.Snapshot(st.Source); ok && only != "" {
			for _, sk := range snap.Skills {
				sv.SkillList = append(sv.SkillList, link{Text: sk.Name(), Href: skillHref(st.Source, sk.Path)})
			}
		}
		if base, ok := githubRepo(st.Repository); ok {
			sv.RepoURL = base
			if commitRE.MatchString(sv.Commit) {
				sv.CommitURL = base + "/commit/" + sv.Commit
			}
		}
		data.Sources = append(data.Sources, sv)
	}
	if h.o.Discovered != nil {
		data.Discovered = discoveredGroups(h.o.Discovered(), v.Filter, only)
	}
	if only != "" && len(data.Sources) == 0 && len(data.Discovered) == 0 {
		return h.notFound(c)
	}
	if h.o.Deliveries != nil {
		for _, d := range h.o.Deliveries(maxDeliveries) {
			if dv, ok := visibleDelivery(d, v.Filter, only); ok {
				data.Deliveries = append(data.Deliveries, dv)
			}
		}
	}
	if h.o.Peers != nil && only == "" && !v.Filter.Private() {
		if p := h.o.Peers(); p.Relaying || len(p.Received) > 0 {
			pv := &peersView{Peers: p}
			for outcome, n := range p.Received {
				pv.Received = append(pv.Received, outcomeCount{outcome, n})
			}
			slices.SortFunc(pv.Received, func(a, b outcomeCount) int { return strings.Compare(a.Outcome, b.Outcome) })
			data.Peers = pv
		}
	}
	return h.render(c, http.StatusOK, "sources", data)
}

// discoveredGroups groups the repositories of the templates a viewer
// sees (on a source's own page: of that template, or the one row of that
// discovered source).
func discoveredGroups(all []Discovered, f catalog.Filter, only string) []discoveredGroup {
	var out []discoveredGroup
	for _, d := range all {
		if !f.Allows(d.Group) || (only != "" && only != d.Group && only != d.Source) {
			continue
		}
		if len(out) == 0 || out[len(out)-1].Group != d.Group {
			out = append(out, discoveredGroup{Group: d.Group, ListError: d.ListError})
		}
		if d.Repository != "" {
			g := &out[len(out)-1]
			g.Repos = append(g.Repos, d)
		}
	}
	return out
}

// visibleDelivery shows a delivery to a viewer limited to some sources only
// when it asked for a sync of one of them, and then names only those. A
// viewer who sees everything sees every delivery, including those that
// matched no source.
func visibleDelivery(d Delivery, f catalog.Filter, only string) (deliveryView, bool) {
	dv := deliveryView{Delivery: d}
	for _, s := range d.Sources {
		if f.Allows(s) && (only == "" || s == only) {
			dv.Sources = append(dv.Sources, link{Text: s, Href: "/sources/" + s})
		}
	}
	if len(dv.Sources) == 0 && (f.Private() || only != "") {
		return deliveryView{}, false
	}
	return dv, true
}
