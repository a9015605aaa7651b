package gitmirror

import (
	"crypto/sha1"
	"encoding/json"
	"io"
	"path"
	"strconv"

	"github.com/skillreg/skillreg/skill"
)

// marketplace is a marketplace.json of n plugins, encoded on demand
// exactly as marketplaceJSON encodes it, without a plugin value or the
// whole document in memory: a source of 100,000 skills has a 20 MB
// marketplace, and a swap needs only its id.
type marketplace struct {
	name, owner string
	n           int
	plugin      func(i int, b []byte) []byte // appends plugin i's object
	size        func(i int) int              // plugin i's length, when known (nil: encode to learn)
	body        int64                        // or: the plugins' length, each with "\n    " and a comma (0: unknown)
}

// sourceMarketplace is the marketplace of a snapshot's skills at their
// paths, or false unless the skills are in the order marketplaceJSON
// sorts them into (by plugin source): a snapshot's are, sorted by clean
// paths.
func sourceMarketplace(name, owner string, skills []*skill.Skill) (*marketplace, bool) {
	for i, sk := range skills {
		if sk.Path != "" && path.Clean(sk.Path) != sk.Path || i > 0 && skills[i-1].Path >= sk.Path {
			return nil, false
		}
	}
	return skillsMarketplace(name, owner, skills), true
}

// skillsMarketplace is sourceMarketplace for skills known to be sorted
// by clean paths.
func skillsMarketplace(name, owner string, skills []*skill.Skill) *marketplace {
	return &marketplace{name: name, owner: owner, n: len(skills), plugin: func(i int, b []byte) []byte {
		sk := skills[i]
		return appendPlugin(b, sk.Name(), sk.Frontmatter.Description, skillSource(sk))
	}}
}

// skillSource is a skill's plugin source in its source's marketplace.
func skillSource(sk *skill.Skill) string {
	if sk.Path == "" {
		return "./"
	}
	return "./" + sk.Path
}

// pluginLen is the length of a skill's plugin object in its source's
// marketplace.
func pluginLen(sk *skill.Skill) int {
	return len(appendPlugin(nil, sk.Name(), sk.Frontmatter.Description, skillSource(sk)))
}

// write encodes the document to w.
func (mp *marketplace) write(w io.Writer) error {
	b := make([]byte, 0, 4096)
	b = append(b, "{\n  \"name\": "...)
	b = appendJSONString(b, mp.name)
	b = append(b, ",\n  \"owner\": {\n    \"name\": "...)
	b = appendJSONString(b, mp.owner)
	b = append(b, "\n  },\n  \"plugins\": ["...)
	if mp.n == 0 {
		b = append(b, "]\n}\n"...)
		_, err := w.Write(b)
		return err
	}
	for i := range mp.n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		b = mp.plugin(i, b)
		if len(b) >= 3072 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	b = append(b, "\n  ]\n}\n"...)
	_, err := w.Write(b)
	return err
}

// id is the blob id of the document, hashed as it is encoded (twice: the
// length first, as the object header needs it).
func (mp *marketplace) id() oid {
	var c counter
	if mp.body > 0 && mp.n > 0 {
		frame := marketplace{name: mp.name, owner: mp.owner}
		frame.write(&c)
		c += counter(int64(len("\n  ]\n}\n")-len("]\n}\n")-1) + mp.body) // no comma after the last
	} else if mp.size != nil && mp.n > 0 {
		// The frame around the plugins, then each plugin's known length
		// and its separator.
		frame := marketplace{name: mp.name, owner: mp.owner}
		frame.write(&c)
		c += counter(len("\n  ]\n}\n") - len("]\n}\n") + (mp.n - 1))
		for i := range mp.n {
			c += counter(len("\n    ") + mp.size(i))
		}
	} else {
		mp.write(&c)
	}
	h := sha1.New()
	io.WriteString(h, "blob "+strconv.FormatInt(int64(c), 10)+"\x00")
	mp.write(h)
	var id oid
	h.Sum(id[:0])
	return id
}

// bytes is the document.
func (mp *marketplace) bytes() []byte {
	var c counter
	mp.write(&c)
	b := &appender{b: make([]byte, 0, int(c))}
	mp.write(b)
	return b.b
}

type counter int64

func (c *counter) Write(p []byte) (int, error) { *c += counter(len(p)); return len(p), nil }

type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) { a.b = append(a.b, p...); return len(p), nil }

// appendPlugin appends one plugin object as json.MarshalIndent lays it
// out at the depth of the plugins array.
func appendPlugin(b []byte, name, description, source string) []byte {
	b = append(b, "{\n      \"name\": "...)
	b = appendJSONString(b, name)
	if description != "" {
		b = append(b, ",\n      \"description\": "...)
		b = appendJSONString(b, description)
	}
	b = append(b, ",\n      \"source\": "...)
	b = appendJSONString(b, source)
	return append(b, ",\n      \"strict\": false,\n      \"skills\": [\n        \"./\"\n      ]\n    }"...)
}

// appendJSONString appends s as encoding/json encodes a string (HTML
// characters escaped): plain ASCII is copied, anything else is left to
// encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, err := json.Marshal(s)
			if err != nil { // a string always encodes
				panic(err)
			}
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
