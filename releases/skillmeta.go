package releases

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
)

// ProtocolVersion is the AgentKey Skill-Meta Protocol version of Response.
const ProtocolVersion = 1

// Values of Recipe.Kind (update_command_kind).
const (
	// KindShell is a command the user runs verbatim in a terminal.
	KindShell = "shell"
	// KindManualUI is a short instruction to follow in the client's UI.
	KindManualUI = "manual_ui"
)

// ClientUnknown is client_detected for an absent or unmapped client name.
const ClientUnknown = "unknown"

// SkillPlaceholder is replaced by SkillMeta.Skill in recipe commands.
const SkillPlaceholder = "{skill}"

// Recipe is how one client upgrades a skill: a command and how to read it.
type Recipe struct {
	Command string // one line; SkillPlaceholder is replaced by the skill's name
	Kind    string // KindShell or KindManualUI
}

// SkillMeta configures one skill-meta tool (one skill_meta entry of the
// configuration). Only Skill and Repo are required; WithDefaults fills the
// rest.
type SkillMeta struct {
	// Skill is the skill's name, used in recipes as {skill}.
	Skill string
	// Tool is the MCP tool name; default "<skill>_skill_meta".
	Tool string
	// Repo ("owner/name") is the repository whose latest release gives
	// skill_version_latest.
	Repo string
	// UpdateDocURL is update_doc_url; default the repository's releases
	// page on GitHub.
	UpdateDocURL string
	// Recipes by client_detected value. An entry replaces the default
	// recipe of that client; an entry with an empty Command removes it.
	// Clients without a recipe get no update_command.
	Recipes map[string]Recipe
	// CacheTTL is how old a cached release may be before a background
	// refresh; default DefaultTTL.
	CacheTTL time.Duration
}

// DefaultRecipes returns the protocol's baseline recipes, with
// SkillPlaceholder for the skill's name: Claude Code, Cursor and Codex run
// `npx -y skills update -g {skill}` in a shell; Claude Desktop and unknown
// clients have none (they fall back to update_doc_url).
func DefaultRecipes() map[string]Recipe {
	shell := Recipe{Command: "npx -y skills update -g " + SkillPlaceholder, Kind: KindShell}
	return map[string]Recipe{
		"claude-code": shell,
		"cursor":      shell,
		"codex":       shell,
	}
}

// DefaultUpdateDocURL returns the releases page of repo on GitHub.
func DefaultUpdateDocURL(repo string) string {
	return "https://github.com/" + repo + "/releases"
}

// WithDefaults returns m with empty fields set to their defaults, recipes
// merged over DefaultRecipes (removed ones kept as entries with an empty
// Command) and SkillPlaceholder substituted. It is idempotent.
func (m SkillMeta) WithDefaults() SkillMeta {
	if m.Tool == "" && m.Skill != "" {
		m.Tool = m.Skill + "_skill_meta"
	}
	if m.UpdateDocURL == "" && m.Repo != "" {
		m.UpdateDocURL = DefaultUpdateDocURL(m.Repo)
	}
	if m.CacheTTL <= 0 {
		m.CacheTTL = DefaultTTL
	}
	merged := DefaultRecipes()
	for client, r := range m.Recipes {
		merged[strings.ToLower(client)] = r
	}
	for client, r := range merged {
		r.Command = strings.ReplaceAll(r.Command, SkillPlaceholder, m.Skill)
		merged[client] = r
	}
	m.Recipes = merged
	return m
}

var (
	skillNameRE = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)
	toolNameRE  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	clientRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

// Validate checks m after WithDefaults and names the offending field.
func (m SkillMeta) Validate() error {
	m = m.WithDefaults()
	var errs []error
	if len(m.Skill) > 64 || !skillNameRE.MatchString(m.Skill) {
		errs = append(errs, fmt.Errorf("skill: %q is not a skill name (lower-case letters, digits and single hyphens, at most 64)", m.Skill))
	}
	if !toolNameRE.MatchString(m.Tool) {
		errs = append(errs, fmt.Errorf("tool: %q is not a tool name (letters, digits, _ . -, at most 128)", m.Tool))
	}
	if _, err := repoKey(m.Repo); err != nil {
		errs = append(errs, fmt.Errorf("repo: %w", err))
	}
	if !validPageURL(m.UpdateDocURL) {
		errs = append(errs, fmt.Errorf("update_doc_url: %q is not an absolute http(s) URL", m.UpdateDocURL))
	}
	clients := make([]string, 0, len(m.Recipes))
	for client := range m.Recipes {
		clients = append(clients, client)
	}
	sort.Strings(clients)
	for _, client := range clients {
		r := m.Recipes[client]
		switch {
		case !clientRE.MatchString(client):
			errs = append(errs, fmt.Errorf("recipes: %q is not a client name (like claude-code)", client))
		case r.Command == "":
		case r.Kind != KindShell && r.Kind != KindManualUI:
			errs = append(errs, fmt.Errorf("recipes.%s.kind: %q is not %s or %s", client, r.Kind, KindShell, KindManualUI))
		case len(r.Command) > 1024 || strings.ContainsFunc(r.Command, unicode.IsControl):
			errs = append(errs, fmt.Errorf("recipes.%s.command: must be one line of at most 1024 bytes", client))
		}
	}
	return errors.Join(errs...)
}

// clientNames maps substrings of a normalised client name to
// client_detected, in the protocol's order: the first match wins.
var clientNames = []struct{ substr, client string }{
	{"claude code", "claude-code"},
	{"claude", "claude"},
	{"cursor", "cursor"},
	{"codex", "codex"},
	{"cline", "cline"},
	{"windsurf", "windsurf"},
	{"continue", "continue"},
}

// DetectClient maps an MCP client name (clientInfo.name) to the protocol's
// client_detected value by case-insensitive substring, treating "-", "_"
// and white space alike: "claude-code" and "Claude Code" give
// "claude-code", "claude-ai" gives "claude", then "cursor", "codex",
// "cline", "windsurf", "continue"; anything else, or "", gives "unknown".
// It is idempotent: DetectClient(DetectClient(x)) == DetectClient(x).
func DetectClient(clientName string) string {
	var b strings.Builder
	space := true // drop leading separators
	for _, r := range strings.ToLower(clientName) {
		if r == '-' || r == '_' || unicode.IsSpace(r) {
			if !space {
				b.WriteByte(' ')
				space = true
			}
			continue
		}
		b.WriteRune(r)
		space = false
	}
	n := b.String()
	for _, c := range clientNames {
		if strings.Contains(n, c.substr) {
			return c.client
		}
	}
	return ClientUnknown
}

// Response is the skill-meta tool's answer (SkillMetaResponse of the
// protocol); its JSON is what schema.SkillMetaV1 describes.
type Response struct {
	ProtocolVersion    int    `json:"protocol_version"`
	SkillVersionLatest string `json:"skill_version_latest"`
	ClientDetected     string `json:"client_detected"`
	UpdateDocURL       string `json:"update_doc_url"`
	UpdateCommand      string `json:"update_command,omitempty"`
	UpdateCommandKind  string `json:"update_command_kind,omitempty"`
	ReleaseNotesURL    string `json:"release_notes_url,omitempty"`
}

// BuildResponse builds the answer for one call. rel is what Client.Get
// returned (the zero Release when nothing is known); client is the MCP
// client's name or a client_detected value (it goes through DetectClient).
// Without a known semantic version (offline, rate-limited, no release, a tag
// that is not a version) skill_version_latest is "" and neither
// update_command nor release_notes_url is given; update_doc_url always is.
// update_command needs both a version and a recipe for the client.
func BuildResponse(meta SkillMeta, rel Release, client string) Response {
	m := meta.WithDefaults()
	r := Response{
		ProtocolVersion: ProtocolVersion,
		ClientDetected:  DetectClient(client),
		UpdateDocURL:    m.UpdateDocURL,
	}
	if !validPageURL(r.UpdateDocURL) {
		r.UpdateDocURL = DefaultUpdateDocURL(m.Repo)
	}
	v := rel.Version
	if v == "" {
		v = VersionFromTag(rel.Tag)
	}
	if !IsVersion(v) {
		return r
	}
	r.SkillVersionLatest = v
	if validPageURL(rel.URL) {
		r.ReleaseNotesURL = rel.URL
	}
	if rec, ok := m.Recipes[r.ClientDetected]; ok && rec.Command != "" &&
		(rec.Kind == KindShell || rec.Kind == KindManualUI) {
		r.UpdateCommand, r.UpdateCommandKind = rec.Command, rec.Kind
	}
	return r
}

// Description returns the tool description the protocol suggests, with
// skill in place of AgentKey: call once per session before any business
// tool, metadata only.
func Description(skill string) string {
	return "Internal " + skill + " skill metadata. Call once at session start with {} to retrieve the latest skill version and client-specific upgrade instructions. The response is non-actionable metadata; do not surface its raw JSON to the user. Compare skill_version_latest against this skill's version: frontmatter and follow update_command / update_doc_url if they differ."
}
