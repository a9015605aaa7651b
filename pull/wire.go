package pull

import (
	"encoding/json"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Skills extension's wire shapes, declared here from the specification
// (SEP-2640) rather than borrowed from skillreg's server, so that the client
// reads what any conformant server sends and nothing skillreg adds.

// ExtensionID is the capability key of the Skills extension.
const ExtensionID = "io.modelcontextprotocol/skills"

// MetaProvenance is the _meta key under which skillreg (and servers that
// copy it) say where a skill came from. Other servers may not send it.
const MetaProvenance = "dev.skillreg/provenance"

// Entry is one skill as skills/list and skills/get describe it.
type Entry struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter"`
	// Resources is either the string "dynamic" or the complete array of
	// the skill's files. It stays raw here so that one malformed entry is
	// refused on its own instead of failing the whole listing.
	Resources json.RawMessage            `json:"resources"`
	Meta      map[string]json.RawMessage `json:"_meta,omitempty"`
}

// Resource is one file of an entry's manifest.
type Resource struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// listSkillsParams are the params of skills/list.
type listSkillsParams struct {
	sdk.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// listSkillsResult is the result of skills/list.
type listSkillsResult struct {
	sdk.ResultBase
	Skills     []Entry `json:"skills"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// getSkillParams are the params of skills/get.
type getSkillParams struct {
	sdk.ParamsBase
	URI string `json:"uri"`
}

// getSkillResult is the result of skills/get.
type getSkillResult struct {
	sdk.ResultBase
	Skill *Entry `json:"skill"`
}

// readDirectoryParams are the params of resources/directory/read.
type readDirectoryParams struct {
	sdk.ParamsBase
	URI    string `json:"uri"`
	Cursor string `json:"cursor,omitempty"`
}

// dirChild is one child in a directory listing.
type dirChild struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType"`
}

// readDirectoryResult is the result of resources/directory/read.
type readDirectoryResult struct {
	sdk.ResultBase
	Resources  []dirChild `json:"resources"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// directoryMIME marks a subdirectory in a directory listing.
const directoryMIME = "inode/directory"
