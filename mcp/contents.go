package mcp

import (
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// go-sdk gap (v1.8.0): sdk.ResourceContents tags Text `json:"text,omitempty"`,
// so the contents of an empty text file (an `__init__.py`, a `.gitkeep`)
// went out with neither "text" nor "blob". The MCP schema requires one of
// them, and the official TypeScript SDK's client refuses such a
// resources/read answer (and such a prompt), so a host built on it could
// not read the file. Every path that writes resource contents (the fast
// path, the SDK path's resources/read, the resources embedded in prompts)
// writes them through resourceContents, which always has one. The SDK's
// own content types cannot be given another encoding (sdk.Content has an
// unexported method), so prompts/get has its own result type too. Tools
// are not affected: read_skill_file's content is a plain string member.

// resourceContents is sdk.ResourceContents, encoded with "text" whenever
// it has no blob, even when the text is empty.
type resourceContents sdk.ResourceContents

func (c *resourceContents) MarshalJSON() ([]byte, error) {
	w := struct {
		URI      string   `json:"uri"`
		MIMEType string   `json:"mimeType,omitempty"`
		Text     *string  `json:"text,omitempty"`
		Blob     []byte   `json:"blob,omitempty"`
		Meta     sdk.Meta `json:"_meta,omitempty"`
	}{URI: c.URI, MIMEType: c.MIMEType, Blob: c.Blob, Meta: c.Meta}
	if len(c.Blob) == 0 {
		w.Blob, w.Text = nil, &c.Text
	}
	return encodeJSON(w)
}

// promptResult is prompts/get's result: sdk.GetPromptResult, whose
// messages embed resources as resourceContents. ResultType is set on
// 2026-07-28, as the SDK sets it on its own type.
type promptResult struct {
	sdk.ResultBase
	Description string          `json:"description,omitempty"`
	Messages    []promptMessage `json:"messages"`
	ResultType  string          `json:"resultType,omitempty"`
}

// promptMessage is one message of a prompt; Content is an
// *embeddedResource or one of the SDK's content types.
type promptMessage struct {
	Role    sdk.Role `json:"role"`
	Content any      `json:"content"`
}

// embeddedResource is sdk.EmbeddedResource's wire form, with its
// contents as resourceContents.
type embeddedResource struct {
	Type     string            `json:"type"` // "resource"
	Resource *resourceContents `json:"resource"`
	Meta     sdk.Meta          `json:"_meta,omitempty"`
}
