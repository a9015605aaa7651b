package skill

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Rule names a rule a skill can break. Rules are stable identifiers: they
// appear in `skillreg validate` output, in logs, in the diagnose tool and in
// the store, so renaming one is a breaking change.
type Rule string

// The rules a skill is judged by.
const (
	RuleEncoding      Rule = "encoding"       // SKILL.md is not UTF-8
	RuleFrontmatter   Rule = "frontmatter"    // missing, unclosed, not a mapping, or nested deeper than MaxFrontmatterDepth
	RuleYAML          Rule = "yaml"           // not valid YAML
	RuleStrict        Rule = "yaml-strict"    // valid YAML that libraries would read differently
	RuleName          Rule = "name"           // missing or malformed name
	RuleNameMismatch  Rule = "name-mismatch"  // name differs from the directory name
	RuleDescription   Rule = "description"    // missing, empty or too long
	RuleCompatibility Rule = "compatibility"  // not a string or too long
	RuleMetadata      Rule = "metadata"       // not a map of string to string, or a reserved key
	RuleAllowedTools  Rule = "allowed-tools"  // not a string
	RuleLicense       Rule = "license"        // not a string
	RuleSymlink       Rule = "symlink"        // a symbolic link inside the skill
	RuleHardlink      Rule = "hardlink"       // a file with more than one link
	RuleSpecialFile   Rule = "special-file"   // a device, socket, pipe or other non-regular file
	RuleSubmodule     Rule = "submodule"      // a git submodule inside the skill
	RuleSkillMD       Rule = "skill-md"       // SKILL.md itself is not a regular file
	RuleGitMetadata   Rule = "git-metadata"   // a path naming .git or .gitmodules in a spelling some file system reads so (see CheckPath)
	RulePath          Rule = "path"           // a path that cannot be served, read back or installed everywhere (see CheckPath)
	RuleTooManyFiles  Rule = "limit-files"    // more than MaxFiles files
	RuleTooLarge      Rule = "limit-bytes"    // more than MaxBytes bytes
	RuleRootSkill     Rule = "root-skill"     // a SKILL.md at the source root whose name is not the source name
	RuleUnreadable    Rule = "unreadable"     // a file could not be read
	RuleDuplicateName Rule = "duplicate-name" // reserved for catalog-level clashes
)

// Problem is one broken rule: what was broken and exactly how.
type Problem struct {
	Rule   Rule   `json:"rule"`
	Detail string `json:"detail"`
}

func (p *Problem) Error() string { return string(p.Rule) + ": " + p.Detail }

// Is makes errors.Is(err, ErrInvalidSkill) true for every Problem.
func (p *Problem) Is(target error) bool { return target == ErrInvalidSkill }

// ErrInvalidSkill is matched by every *Problem.
var ErrInvalidSkill = errors.New("invalid skill")

func problem(r Rule, detail string) *Problem { return &Problem{Rule: r, Detail: detail} }

// AsProblem returns the Problem in err's chain, or a RuleUnreadable problem
// describing err.
func AsProblem(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	return problem(RuleUnreadable, err.Error())
}

// Limits of the Skills extension.
const (
	MaxNameLen          = 64
	MaxDescriptionLen   = 1024
	MaxCompatibilityLen = 500
	MaxFiles            = 512
	MaxBytes            = 16 << 20
)

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidName reports whether name is a valid skill name: 1-64 lowercase
// letters, digits and single hyphens, no leading or trailing hyphen.
func ValidName(name string) bool {
	return len(name) > 0 && len(name) <= MaxNameLen && nameRE.MatchString(name)
}

// reservedMetadataPrefix marks metadata keys that belong to MCP.
const reservedMetadataPrefix = "io.modelcontextprotocol/"

// check applies the Agent Skills rules to a strictly decoded frontmatter.
func check(o *object) (*Frontmatter, error) {
	js, err := o.MarshalJSON()
	if err != nil {
		return nil, problem(RuleStrict, "frontmatter is not representable as JSON: "+err.Error())
	}
	// Kept for the skill's life: exactly its length, not the buffer's.
	fm := &Frontmatter{JSON: slices.Clone(js)}

	name, ok := o.vals["name"]
	switch s, isStr := name.(string); {
	case !ok || name == nil:
		return nil, problem(RuleName, "frontmatter has no name")
	case !isStr:
		return nil, problem(RuleName, "name must be a string")
	case !ValidName(s):
		return nil, problem(RuleName, fmt.Sprintf("name %q must be 1-%d lowercase letters, digits and single hyphens, not starting or ending with a hyphen", truncate(s, 80), MaxNameLen))
	default:
		fm.Name = s
	}

	desc, ok := o.vals["description"]
	switch s, isStr := desc.(string); {
	case !ok || desc == nil:
		return nil, problem(RuleDescription, "frontmatter has no description")
	case !isStr:
		return nil, problem(RuleDescription, "description must be a string")
	case strings.TrimSpace(s) == "":
		return nil, problem(RuleDescription, "description is empty")
	case utf8.RuneCountInString(s) > MaxDescriptionLen:
		return nil, problem(RuleDescription, fmt.Sprintf("description is %d characters, more than the %d allowed", utf8.RuneCountInString(s), MaxDescriptionLen))
	default:
		fm.Description = s
	}

	if v, ok := o.vals["compatibility"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr {
			return nil, problem(RuleCompatibility, "compatibility must be a string")
		}
		if n := utf8.RuneCountInString(s); n > MaxCompatibilityLen {
			return nil, problem(RuleCompatibility, fmt.Sprintf("compatibility is %d characters, more than the %d allowed", n, MaxCompatibilityLen))
		}
		fm.Compatibility = s
	}
	for _, k := range []struct {
		key  string
		rule Rule
	}{{"allowed-tools", RuleAllowedTools}, {"license", RuleLicense}} {
		if v, ok := o.vals[k.key]; ok && v != nil {
			if _, isStr := v.(string); !isStr {
				return nil, problem(k.rule, k.key+" must be a string")
			}
		}
	}
	if v, ok := o.vals["metadata"]; ok && v != nil {
		m, isMap := v.(*object)
		if !isMap {
			return nil, problem(RuleMetadata, "metadata must be a map of string to string")
		}
		fm.Metadata = make(Metadata, 0, len(m.keys))
		for _, k := range m.keys {
			s, isStr := m.vals[k].(string)
			if !isStr {
				return nil, problem(RuleMetadata, fmt.Sprintf("metadata.%s must be a string (quote it)", k))
			}
			if strings.HasPrefix(k, reservedMetadataPrefix) {
				return nil, problem(RuleMetadata, fmt.Sprintf("metadata key %q is reserved for MCP", k))
			}
			fm.Metadata = append(fm.Metadata, MetadataEntry{k, s})
		}
		// The strict reader refuses a key given twice.
		slices.SortFunc(fm.Metadata, func(a, b MetadataEntry) int { return strings.Compare(a.Key, b.Key) })
	}
	catalogFields(o, fm)
	fm.shareJSON()
	return fm, nil
}

// shareJSON points each string field at the same bytes in fm.JSON where
// the JSON holds them as they are (a value without escapes: nearly all),
// so that the decoder's copies are dropped: a frontmatter kept for the
// skill's life holds its text once, not twice. Each field is looked for
// from where the one before it was found (the JSON holds them in about
// that order), then from the start; it returns the bytes it searched,
// which shareLimit bounds: past it the other fields keep their copies.
// Searching the whole JSON for each field made a frontmatter of 4,000
// tags parse 16 times slower.
func (fm *Frontmatter) shareJSON() (searched int) {
	if len(fm.JSON) == 0 {
		return 0
	}
	js := unsafe.String(unsafe.SliceData(fm.JSON), len(fm.JSON))
	limit := shareLimit(len(js))
	from := 0
	in := func(s *string) {
		if *s == "" || searched >= limit {
			return
		}
		i := strings.Index(js[from:], *s)
		if i >= 0 {
			searched += i + len(*s)
			i += from
		} else {
			searched += len(js) - from + len(js)
			if i = strings.Index(js, *s); i < 0 {
				return
			}
		}
		*s = js[i : i+len(*s)]
		from = i + len(*s)
	}
	for _, p := range []*string{&fm.Name, &fm.Description, &fm.Compatibility, &fm.Version} {
		in(p)
	}
	for i := range fm.Metadata {
		in(&fm.Metadata[i].Key)
		in(&fm.Metadata[i].Value)
	}
	for i := range fm.Tags {
		in(&fm.Tags[i])
	}
	return searched
}

// shareLimit bounds the bytes shareJSON searches in a JSON of n bytes:
// linear in n, and room for every field of a common frontmatter however
// its fields are ordered.
func shareLimit(n int) int { return max(16*n, 64<<10) }

// catalogFields reads version, tags and deprecated: top level first, then
// metadata. Values of another shape are ignored here (they still pass
// through in JSON).
func catalogFields(o *object, fm *Frontmatter) {
	switch v := o.vals["version"].(type) {
	case string:
		fm.Version = v
	case int64, float64:
		fm.Version = fmt.Sprint(v)
	}
	if fm.Version == "" {
		fm.Version, _ = fm.Metadata.Get("version")
	}

	switch v := o.vals["tags"].(type) {
	case []value:
		for _, t := range v {
			if s, ok := t.(string); ok && strings.TrimSpace(s) != "" {
				fm.Tags = append(fm.Tags, strings.TrimSpace(s))
			}
		}
	case string:
		fm.Tags = splitTags(v)
	}
	if fm.Tags == nil {
		if s, ok := fm.Metadata.Get("tags"); ok {
			fm.Tags = splitTags(s)
		}
	}

	if b, ok := o.vals["deprecated"].(bool); ok {
		fm.Deprecated = b
	} else if s, ok := fm.Metadata.Get("deprecated"); ok {
		fm.Deprecated = strings.EqualFold(strings.TrimSpace(s), "true")
	}
}

func splitTags(s string) []string {
	var tags []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
