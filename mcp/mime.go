package mcp

import (
	"mime"
	"path"
	"strings"
	"unicode/utf8"
)

// Types for extensions skills commonly hold, where the system's table is
// missing or disagrees between machines.
var mimeTypes = map[string]string{
	".md":       "text/markdown",
	".markdown": "text/markdown",
	".txt":      "text/plain",
	".sh":       "text/x-shellscript",
	".bash":     "text/x-shellscript",
	".py":       "text/x-python",
	".go":       "text/x-go",
	".js":       "text/javascript",
	".mjs":      "text/javascript",
	".ts":       "text/x-typescript",
	".rb":       "text/x-ruby",
	".rs":       "text/x-rust",
	".java":     "text/x-java",
	".json":     "application/json",
	".yaml":     "application/yaml",
	".yml":      "application/yaml",
	".toml":     "application/toml",
	".xml":      "application/xml",
	".html":     "text/html",
	".css":      "text/css",
	".csv":      "text/csv",
	".sql":      "application/sql",
	".png":      "image/png",
	".jpg":      "image/jpeg",
	".jpeg":     "image/jpeg",
	".gif":      "image/gif",
	".svg":      "image/svg+xml",
	".webp":     "image/webp",
	".pdf":      "application/pdf",
	".zip":      "application/zip",
	".gz":       "application/gzip",
	".tgz":      "application/gzip",
	".tar":      "application/x-tar",
	".wasm":     "application/wasm",
}

// mimeType picks a file's media type from its name, then from whether its
// bytes are text.
func mimeType(name string, data []byte) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := mimeTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	if utf8.Valid(data) {
		return "text/plain"
	}
	return "application/octet-stream"
}
