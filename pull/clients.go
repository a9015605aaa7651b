package pull

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// AgentClient is an agent that reads Agent Skills from folders: where it
// looks in a project and for the user, and where that is documented.
type AgentClient struct {
	Name    string // the --client value (also sent as the MCP client name)
	Project string // relative to the project (the working directory)
	User    string // relative to the home directory
	Source  string // the documentation the paths come from
}

// Clients are the agents --client knows, with each one's conventional
// skills folders as its own documentation states them (checked 2026-11).
// Several agents also read other agents' folders (Cursor reads .claude/
// and .codex/; Copilot reads .claude/; Codex, Cursor, Copilot and Gemini
// CLI read .agents/); each entry names the agent's own folder.
var Clients = []AgentClient{
	{
		// "Personal Skills ... ~/.claude/skills/"; "Project Skills ...
		// .claude/skills/ within your project".
		Name: "claude-code", Project: ".claude/skills", User: ".claude/skills",
		Source: "https://docs.claude.com/en/docs/claude-code/skills",
	},
	{
		// "Skill directories": .agents/skills/ and .cursor/skills/
		// (project), ~/.agents/skills/ and ~/.cursor/skills/ (user).
		Name: "cursor", Project: ".cursor/skills", User: ".cursor/skills",
		Source: "https://cursor.com/docs/skills",
	},
	{
		// "Where to save skills": REPO $CWD/.agents/skills (up to the
		// repository root), USER $HOME/.agents/skills.
		Name: "codex", Project: ".agents/skills", User: ".agents/skills",
		Source: "https://developers.openai.com/codex/skills",
	},
	{
		// Project skills in .github/skills, .claude/skills or
		// .agents/skills; personal skills in ~/.copilot/skills or
		// ~/.agents/skills.
		Name: "copilot", Project: ".github/skills", User: ".copilot/skills",
		Source: "https://docs.github.com/en/copilot/concepts/agents/about-agent-skills",
	},
	{
		// "Discovery tiers": workspace .gemini/skills/ (or the
		// .agents/skills/ alias), user ~/.gemini/skills/.
		Name: "gemini-cli", Project: ".gemini/skills", User: ".gemini/skills",
		Source: "https://geminicli.com/docs/cli/using-agent-skills/",
	},
	{
		// Workspace skills in .windsurf/skills/<name>/, global skills in
		// ~/.codeium/windsurf/skills/<name>/.
		Name: "windsurf", Project: ".windsurf/skills", User: ".codeium/windsurf/skills",
		Source: "https://docs.windsurf.com/windsurf/cascade/skills",
	},
	{
		// The cross-agent folder: read by Codex, Cursor, Copilot and
		// Gemini CLI (sources above). Not read by Claude Code.
		Name: "agents", Project: ".agents/skills", User: ".agents/skills",
		Source: "https://developers.openai.com/codex/skills",
	},
}

// DefaultClient is the folder used when neither --into nor --client is
// given: the project's .agents/skills, which most agents read.
const DefaultClient = "agents"

// ErrUnknownClient is returned for a --client value not in Clients.
var ErrUnknownClient = errors.New("unknown client")

// ClientNames lists the known --client values, sorted.
func ClientNames() []string {
	var out []string
	for _, c := range Clients {
		out = append(out, c.Name)
	}
	sort.Strings(out)
	return out
}

// ClientDir returns the skills folder of an agent: in the project (under
// workDir) by default, in the user's home (under home) when global.
func ClientDir(name string, global bool, workDir, home string) (string, error) {
	for _, c := range Clients {
		if c.Name != name {
			continue
		}
		if global {
			if home == "" {
				return "", errors.New("cannot tell the home directory for --global")
			}
			return filepath.Join(home, filepath.FromSlash(c.User)), nil
		}
		return filepath.Join(workDir, filepath.FromSlash(c.Project)), nil
	}
	return "", fmt.Errorf("%w %q (known: %s)", ErrUnknownClient, name, strings.Join(ClientNames(), ", "))
}
