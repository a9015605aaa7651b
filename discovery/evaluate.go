package discovery

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// ReasonUnchecked says a repository's tree has not been looked at yet.
const ReasonUnchecked = "tree not checked yet"

// repos is a group's listing with what events said since applied.
func (g *group) repos() []Repo {
	var out []Repo
	seen := map[int64]bool{}
	for _, p := range g.rec.Pages {
		for _, r := range p.Repos {
			if seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			if ov, ok := g.overrides[r.ID]; ok {
				if ov.repo != nil {
					out = append(out, *ov.repo)
				}
				continue
			}
			out = append(out, r)
		}
	}
	for id, ov := range g.overrides {
		if !seen[id] && ov.repo != nil {
			out = append(out, *ov.repo)
		}
	}
	slices.SortFunc(out, func(a, b Repo) int { return strings.Compare(strings.ToLower(a.FullName), strings.ToLower(b.FullName)) })
	return out
}

// evaluateLocked decides every repository of g from what is known (the
// listing, events, tree checks, names given) and records whether the
// included set changed.
func (m *Manager) evaluateLocked(g *group) bool {
	tpl, ok := m.templates[g.rec.Group]
	if !ok {
		return false
	}
	trees := map[int64]TreeCheck{}
	for _, t := range g.rec.Trees {
		trees[t.ID] = t
	}
	found := make([]Found, 0, len(g.rec.Found))
	for _, r := range g.repos() {
		f := Found{Group: tpl.Name, Repo: r}
		if n, ok := m.names[r.ID]; ok {
			f.Source = n.Name
		}
		f.Reason = m.leftOut(&tpl, &r)
		if f.Reason == "" {
			t, ok := trees[r.ID]
			switch {
			case !ok || t.Ref != refOf(&r) || t.Path != tpl.Path:
				f.Reason = ReasonUnchecked
			case !t.HasSkill && !t.Truncated:
				f.Reason = ReasonNoSkill
				if tpl.Path != "" {
					f.Reason = fmt.Sprintf("no SKILL.md under path %q", tpl.Path)
				}
			}
		}
		if f.Reason == "" || f.Reason == ReasonTruncated {
			f.Source, f.Reason = m.nameLocked(tpl.Name, &r)
			f.Included = f.Source != ""
			if f.Included && trees[r.ID].Truncated {
				f.Reason = ReasonTruncated
			}
		}
		found = append(found, f)
	}
	changed := includedKey(found) != includedKey(g.rec.Found)
	g.rec.Found = found
	if changed {
		m.changed = true
	}
	return changed
}

// nameLocked gives a repository its source name, or says why it cannot
// have one: its name is fixed at its first discovery (a rename keeps it);
// a name another repository, another group or a configured source holds
// is a collision.
func (m *Manager) nameLocked(group string, r *Repo) (name, reason string) {
	if n, ok := m.names[r.ID]; ok {
		if n.Group != group {
			if _, live := m.templates[n.Group]; live {
				return "", fmt.Sprintf("name collision: already discovered by %s as %s", n.Group, n.Name)
			}
			n.Group = group // its group is gone: this one takes it, name and all
			m.names[r.ID] = n
		}
		if m.reserved[n.Name] {
			return "", fmt.Sprintf("name collision: %s is a configured source", n.Name)
		}
		return n.Name, ""
	}
	name, ok := SourceName(r.Owner(), r.Name())
	if !ok {
		return "", fmt.Sprintf("%s gives no source name", r.FullName)
	}
	if m.reserved[name] {
		return "", fmt.Sprintf("name collision: %s is a configured source", name)
	}
	for id, n := range m.names {
		if n.Name == name && id != r.ID {
			return "", fmt.Sprintf("name collision: %s is the name of repository id %d", name, id)
		}
	}
	m.names[r.ID] = Name{ID: r.ID, Name: name, Group: group}
	return name, ""
}

// includedKey identifies an included set: its names and remotes.
func includedKey(fs []Found) string {
	var b strings.Builder
	for _, f := range fs {
		if f.Included {
			fmt.Fprintf(&b, "%s %s %s\n", f.Source, f.Repo.CloneURL, f.Repo.DefaultBranch)
		}
	}
	return b.String()
}

// leftOut says why a repository is left out before its tree is looked
// at, or "".
func (m *Manager) leftOut(tpl *Template, r *Repo) string {
	if reason := tpl.cheapReason(r); reason != "" {
		return reason
	}
	if m.o.CloneHost != "" && !strings.EqualFold(hostOf(r.CloneURL), m.o.CloneHost) {
		return fmt.Sprintf("clone URL not on %s", m.o.CloneHost)
	}
	return ""
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

func refOf(r *Repo) string {
	if r.DefaultBranch == "" {
		return "HEAD"
	}
	return r.DefaultBranch
}

// refresh lists one group's owner and checks the trees of the
// repositories the cheap rules keep, then evaluates and stores the group.
// A failed listing keeps what was known.
func (m *Manager) refresh(ctx context.Context, tpl Template) error {
	m.mu.Lock()
	g, ok := m.groups[tpl.Name]
	if !ok {
		m.mu.Unlock()
		return nil
	}
	prev := slices.Clone(g.rec.Pages)
	seq0 := m.seq
	m.mu.Unlock()

	pages, listed, err := m.api.listing(ctx, tpl.Owner, m.o.Installation, prev)
	if err != nil {
		m.fail(tpl.Name, err)
		return err
	}
	m.mu.Lock()
	if g != m.groups[tpl.Name] {
		m.mu.Unlock()
		return nil // the template changed meanwhile
	}
	g.rec.Pages = filterOwner(pages, tpl.Owner, m.o.Installation)
	if listed {
		for id, ov := range g.overrides {
			if ov.seq <= seq0 {
				delete(g.overrides, id)
			}
		}
	}
	repos := g.repos()
	trees := map[int64]TreeCheck{}
	for _, t := range g.rec.Trees {
		trees[t.ID] = t
	}
	m.mu.Unlock()

	var errs []error
	next := make([]TreeCheck, 0, len(repos))
	for i := range repos {
		r := &repos[i]
		if m.leftOut(&tpl, r) != "" {
			continue
		}
		var prevT *TreeCheck
		if t, ok := trees[r.ID]; ok {
			prevT = &t
		}
		t, err := m.api.tree(ctx, r, tpl.Path, prevT)
		if err != nil {
			errs = append(errs, err)
			if prevT != nil {
				next = append(next, *prevT)
			}
			continue
		}
		next = append(next, t)
	}

	m.mu.Lock()
	if g != m.groups[tpl.Name] {
		m.mu.Unlock()
		return nil
	}
	g.rec.Trees = next
	g.rec.ListedAt = m.o.Now()
	g.err, g.errAt = "", g.rec.ListedAt
	if len(errs) > 0 {
		g.err = errs[0].Error()
	}
	m.evaluateLocked(g)
	rec := g.rec
	rec.Pages, rec.Trees, rec.Found = slices.Clone(rec.Pages), slices.Clone(rec.Trees), slices.Clone(rec.Found)
	names := make([]Name, 0, len(m.names))
	for _, n := range m.names {
		names = append(names, n)
	}
	m.mu.Unlock()
	slices.SortFunc(names, func(a, b Name) int { return int(a.ID - b.ID) })
	if m.o.Store != nil {
		if err := m.o.Store.SaveDiscovery(rec, names); err != nil {
			m.log.Error("store discovered repositories", "source", tpl.Name, "err", err)
		}
	}
	m.log.Debug("discovery refreshed", "source", tpl.Name, "owner", tpl.Owner, "repositories", len(repos), "listing_changed", listed)
	if len(errs) > 0 {
		return fmt.Errorf("discover %s: %w", tpl.Name, errs[0])
	}
	return nil
}

// filterOwner keeps the installation listing's repositories of owner
// (an installation belongs to one account, but the answer is checked).
func filterOwner(pages []Page, owner string, installation bool) []Page {
	if !installation {
		return pages
	}
	out := make([]Page, len(pages))
	for i, p := range pages {
		out[i] = p
		out[i].Repos = slices.DeleteFunc(slices.Clone(p.Repos), func(r Repo) bool { return !strings.EqualFold(r.Owner(), owner) })
	}
	return out
}

func (m *Manager) fail(group string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g, ok := m.groups[group]; ok {
		g.err, g.errAt = err.Error(), m.o.Now()
	}
	m.log.Warn("discovery listing failed; the last discovered set stays", "source", group, "err", err)
}
