package publish

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/skillreg/skillreg/catalog"
)

// Channels a Note names.
const (
	ChannelAgentSkills = "agent-skills" // the v0.2 discovery indexes
	ChannelSkillsV01   = "skills-v0.1"  // the v0.1 indexes (OpenCode)
	ChannelMarketplace = "marketplace"  // the Claude Code marketplace
)

// Note is a skill (or a source's "-all" plugin, Path "") that an
// installer's index leaves out or lists only in a narrower scope, and why.
type Note struct {
	Source  string `json:"source"`
	Path    string `json:"path"`
	Name    string `json:"name"`
	Channel string `json:"channel"`
	Reason  string `json:"reason"`
}

// Notes says, for a caller who sees f, what the installers' indexes leave
// out of one source (or of all, source ""), and why: the installers' own
// limits and rules, unreadable files, and names that another visible skill
// took first. It builds what is not built yet.
func (h *Handler) Notes(ctx context.Context, f catalog.Filter, source string) []Note {
	v := h.view(ctx)
	h.plugins(ctx, v)
	want := func(e *entry) bool { return f.Allows(e.source()) && (source == "" || e.source() == source) }
	var out []Note
	add := func(e *entry, ch, why string) {
		out = append(out, Note{Source: e.source(), Path: e.ref.Skill.Path, Name: e.name(), Channel: ch, Reason: why})
	}
	for i := range v.entries {
		e := &v.entries[i]
		if !want(e) {
			continue
		}
		switch {
		case e.skip() != "":
			add(e, ChannelAgentSkills, e.skip())
			add(e, ChannelSkillsV01, e.skip())
		case e.skipV1() != "":
			add(e, ChannelSkillsV01, e.skipV1())
		}
		if e.pluginSkip() != "" {
			add(e, ChannelMarketplace, e.pluginSkip())
		}
	}
	visible := make([]*entry, 0, len(v.entries))
	for i := range v.entries {
		if e := &v.entries[i]; f.Allows(e.source()) {
			visible = append(visible, e)
		}
	}
	shadow := func(ch string, scoped string) func(e, by *entry) {
		return func(e, by *entry) {
			if want(e) {
				add(e, ch, fmt.Sprintf("duplicate-name: %s/%s took the name %q first; this skill is only in %s", by.source(), by.ref.Skill.Path, e.name(), scoped))
			}
		}
	}
	unique(visible, okV2, shadow(ChannelAgentSkills, "its source's and its own scoped indexes"))
	unique(visible, okV1, shadow(ChannelSkillsV01, "its source's and its own scoped indexes"))
	taken := map[string]string{}
	for _, sp := range v.allPlugins(caller{filter: f}, scope{}) {
		taken[sp.name] = sp.source
	}
	unique(visible, func(e *entry) bool {
		if e.pluginSkip() != "" {
			return false
		}
		if src, ok := taken[e.name()]; ok {
			if want(e) {
				add(e, ChannelMarketplace, fmt.Sprintf("duplicate-name: %q is the plugin of every skill of source %s", e.name(), src))
			}
			return false
		}
		return true
	}, shadow(ChannelMarketplace, "its source's marketplace"))
	for src, es := range v.sources {
		if !f.Allows(src) || (source != "" && src != source) {
			continue
		}
		unique(ptrs(es), okV2, func(e, by *entry) {
			add(e, ChannelAgentSkills, fmt.Sprintf("duplicate-name: %s took the name %q first in this source; this skill is only in its own scoped index", by.ref.Skill.Path, e.name()))
		})
		if sp := v.all[src]; sp != nil && sp.skip != "" {
			out = append(out, Note{Source: src, Name: sp.name, Channel: ChannelMarketplace, Reason: sp.skip})
		}
	}
	slices.SortStableFunc(out, func(a, b Note) int {
		return cmp.Or(strings.Compare(a.Source, b.Source), strings.Compare(a.Path, b.Path), strings.Compare(a.Channel, b.Channel))
	})
	return out
}
