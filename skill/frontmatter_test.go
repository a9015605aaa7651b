package skill

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	yaml2 "gopkg.in/yaml.v2"
	yaml3 "gopkg.in/yaml.v3"

	"github.com/skillreg/skillreg/jsonbound"
)

func md(front string) []byte { return []byte("---\n" + front + "---\n# Body\n") }

func TestParseSkillMDAccepts(t *testing.T) {
	cases := []struct {
		name, front, json string
	}{
		{"minimal", "name: pdf\ndescription: Read PDFs.\n", `{"name":"pdf","description":"Read PDFs."}`},
		{"order kept", "description: d\nname: a-b\n", `{"description":"d","name":"a-b"}`},
		{"passthrough", "name: x\ndescription: d\nx-extra: [1, 2.5, true, null, \"yes\"]\n", `{"name":"x","description":"d","x-extra":[1,2.5,true,null,"yes"]}`},
		{"nested map", "name: x\ndescription: d\nmetadata:\n  version: \"1.0\"\n  author: me\n", `{"name":"x","description":"d","metadata":{"version":"1.0","author":"me"}}`},
		{"version string unquoted", "name: x\ndescription: d\nversion: 1.2.3\n", `{"name":"x","description":"d","version":"1.2.3"}`},
		{"html kept", "name: x\ndescription: \"<b>&</b>\"\n", `{"name":"x","description":"<b>&</b>"}`},
		{"crlf", "name: x\r\ndescription: d\r\n", `{"name":"x","description":"d"}`},
		{"block scalar", "name: x\ndescription: |\n  line one\n  line two\n", `{"name":"x","description":"line one\nline two\n"}`},
		{"quoted yes", "name: x\ndescription: d\nflag: 'yes'\n", `{"name":"x","description":"d","flag":"yes"}`},
		{"tilde null", "name: x\ndescription: d\nopt: ~\n", `{"name":"x","description":"d","opt":null}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(strings.ReplaceAll("---\n"+c.front+"---\nbody\n", "\n", lineEnd(c.front)))
			fm, body, err := ParseSkillMD(data)
			if err != nil {
				t.Fatalf("ParseSkillMD: %v", err)
			}
			if string(fm.JSON) != c.json {
				t.Errorf("JSON = %s, want %s", fm.JSON, c.json)
			}
			if !strings.Contains(string(body), "body") {
				t.Errorf("body = %q", body)
			}
		})
	}
}

func lineEnd(s string) string {
	if strings.Contains(s, "\r\n") {
		return "\n" // already has CRLF inside; leave the delimiters alone
	}
	return "\n"
}

func TestParseSkillMDRefuses(t *testing.T) {
	cases := []struct {
		name string
		data string
		rule Rule
	}{
		{"no frontmatter", "# Title\n", RuleFrontmatter},
		{"unclosed", "---\nname: x\n", RuleFrontmatter},
		{"empty", "---\n---\n", RuleFrontmatter},
		{"list", "---\n- a\n---\n", RuleFrontmatter},
		{"bad yaml", "---\nname: [x\n---\n", RuleYAML},
		{"bom", "\ufeff---\nname: x\ndescription: d\n---\n", RuleEncoding},
		{"not utf8", "---\nname: x\ndescription: \xff\n---\n", RuleEncoding},
		{"anchor", "---\nname: x\ndescription: &a d\n---\n", RuleStrict},
		{"alias", "---\nname: &n x\ndescription: *n\n---\n", RuleStrict},
		{"merge", "---\nname: x\ndescription: d\nm:\n  <<: {a: b}\n---\n", RuleStrict},
		{"tag", "---\nname: x\ndescription: !!str d\n---\n", RuleStrict},
		{"custom tag", "---\nname: x\ndescription: d\nv: !foo bar\n---\n", RuleStrict},
		{"int key", "---\nname: x\ndescription: d\n1: one\n---\n", RuleStrict},
		{"bool key", "---\nname: x\ndescription: d\ntrue: one\n---\n", RuleStrict},
		{"complex key", "---\nname: x\ndescription: d\n? [a]\n: b\n---\n", RuleStrict},
		{"yes", "---\nname: x\ndescription: d\nflag: yes\n---\n", RuleStrict},
		{"off", "---\nname: x\ndescription: d\nflag: off\n---\n", RuleStrict},
		{"y key", "---\nname: x\ndescription: d\ny: 1\n---\n", RuleStrict},
		{"octal", "---\nname: x\ndescription: d\nmode: 0777\n---\n", RuleStrict},
		{"octal 1.2", "---\nname: x\ndescription: d\nmode: 0o17\n---\n", RuleStrict},
		{"hex", "---\nname: x\ndescription: d\nv: 0x1F\n---\n", RuleStrict},
		{"underscore", "---\nname: x\ndescription: d\nv: 1_000\n---\n", RuleStrict},
		{"sexagesimal", "---\nname: x\ndescription: d\nv: 1:30\n---\n", RuleStrict},
		{"exponent", "---\nname: x\ndescription: d\nv: 1e3\n---\n", RuleStrict},
		{"leading dot", "---\nname: x\ndescription: d\nv: .5\n---\n", RuleStrict},
		{"inf", "---\nname: x\ndescription: d\nv: .inf\n---\n", RuleStrict},
		{"date", "---\nname: x\ndescription: d\nv: 2024-01-02\n---\n", RuleStrict},
		{"huge int", "---\nname: x\ndescription: d\nv: 123456789012345678901\n---\n", RuleStrict},
		{"two docs", "---\nname: x\ndescription: d\n---\n", RuleStrict}, // replaced below
		{"duplicate key", "---\nname: x\nname: y\ndescription: d\n---\n", RuleYAML},
		{"no name", "---\ndescription: d\n---\n", RuleName},
		{"name type", "---\nname: 12\ndescription: d\n---\n", RuleName},
		{"name upper", "---\nname: PDF\ndescription: d\n---\n", RuleName},
		{"name double hyphen", "---\nname: a--b\ndescription: d\n---\n", RuleName},
		{"name trailing hyphen", "---\nname: a-\ndescription: d\n---\n", RuleName},
		{"name too long", "---\nname: " + strings.Repeat("a", 65) + "\ndescription: d\n---\n", RuleName},
		{"no description", "---\nname: x\n---\n", RuleDescription},
		{"blank description", "---\nname: x\ndescription: \"  \"\n---\n", RuleDescription},
		{"long description", "---\nname: x\ndescription: " + strings.Repeat("é", 1025) + "\n---\n", RuleDescription},
		{"compat long", "---\nname: x\ndescription: d\ncompatibility: " + strings.Repeat("c", 501) + "\n---\n", RuleCompatibility},
		{"metadata list", "---\nname: x\ndescription: d\nmetadata: [a]\n---\n", RuleMetadata},
		{"metadata int", "---\nname: x\ndescription: d\nmetadata:\n  v: 1\n---\n", RuleMetadata},
		{"metadata reserved", "---\nname: x\ndescription: d\nmetadata:\n  io.modelcontextprotocol/x: v\n---\n", RuleMetadata},
		{"allowed-tools list", "---\nname: x\ndescription: d\nallowed-tools: [a]\n---\n", RuleAllowedTools},
		{"license map", "---\nname: x\ndescription: d\nlicense: {a: b}\n---\n", RuleLicense},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := c.data
			if c.name == "two docs" {
				data = "---\nname: x\ndescription: d\n--- \nother: doc\n...\n"
				// A "--- " line with a trailing space does not close the
				// frontmatter; YAML then sees a second document.
			}
			_, _, err := ParseSkillMD([]byte(data))
			if err == nil {
				t.Fatalf("ParseSkillMD accepted %q", data)
			}
			var p *Problem
			if !errors.As(err, &p) {
				t.Fatalf("error %v is not a *Problem", err)
			}
			if p.Rule != c.rule {
				t.Errorf("rule = %s (%s), want %s", p.Rule, p.Detail, c.rule)
			}
			if !errors.Is(err, ErrInvalidSkill) {
				t.Errorf("errors.Is(err, ErrInvalidSkill) = false")
			}
		})
	}
}

func TestCatalogFields(t *testing.T) {
	cases := []struct {
		front      string
		version    string
		tags       []string
		deprecated bool
	}{
		{"version: \"2.0\"\ntags: [a, b]\ndeprecated: true\n", "2.0", []string{"a", "b"}, true},
		{"tags: \"a, b ,\"\n", "", []string{"a", "b"}, false},
		{"metadata:\n  version: \"1.1\"\n  tags: x,y\n  deprecated: \"true\"\n", "1.1", []string{"x", "y"}, true},
		{"version: \"3\"\nmetadata:\n  version: \"1\"\n", "3", nil, false},
	}
	for _, c := range cases {
		fm, _, err := ParseSkillMD(md("name: x\ndescription: d\n" + c.front))
		if err != nil {
			t.Fatalf("%q: %v", c.front, err)
		}
		if fm.Version != c.version || !reflect.DeepEqual(fm.Tags, c.tags) || fm.Deprecated != c.deprecated {
			t.Errorf("%q: got (%q, %q, %v), want (%q, %q, %v)", c.front, fm.Version, fm.Tags, fm.Deprecated, c.version, c.tags, c.deprecated)
		}
	}
}

// normalize turns what a YAML library decoded into JSON-comparable values.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case map[any]any:
		out := map[string]any{}
		for k, e := range x {
			s, ok := k.(string)
			if !ok {
				return struct{ bad any }{k}
			}
			out[s] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case float64:
		return x
	default:
		return v
	}
}

// FuzzFrontmatterDifferential checks that whatever the strict reader
// accepts is read identically by a YAML 1.1 parser (yaml.v2) and a YAML 1.2
// parser (yaml.v3), and that both agree with the JSON we serve.
func FuzzFrontmatterDifferential(f *testing.F) {
	for _, s := range []string{
		"name: x\ndescription: d\n",
		"name: x\ndescription: d\nv: 1.2.3\n",
		"name: x\ndescription: d\nflag: yes\n",
		"name: x\ndescription: d\nn: 0777\n",
		"name: x\ndescription: d\nt: 2001-12-14t21:59:43.10-05:00\n",
		"name: x\ndescription: d\nl: [1, -2, +3, 4.5, .5, 1e3, ~, null, true, True, 'q']\n",
		"name: x\ndescription: d\nm: {a: 1, b: [x, y]}\n",
		"name: x\ndescription: >\n  folded\n  text\n",
		"name: x\ndescription: d\nk: 1:20\n",
		"name: x\ndescription: d\nk: =\n",
		"name: x\ndescription: d\nk: <<\n",
		"name: x\ndescription: d\nk: 0b101\n",
		"name: x\ndescription: d\nk: -0\n",
		"name: x\ndescription: d\nk: 1.0\n",
		"name: x\ndescription: d\nk: \"\\u00e9\"\n",
		"name: x\ndescription: d\nk: \"\\ud800\"\n",
		"name: x\ndescription: d\nk: " + strings.Repeat("[", 63) + strings.Repeat("]", 63) + "\n",
		"name: x\ndescription: d\nk: " + strings.Repeat("{a: ", 64) + "1" + strings.Repeat("}", 64) + "\n",
		"name: x\ndescription: d\nk:\n  " + strings.Repeat("- ", 70) + "a\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, front string) {
		data := []byte("---\n" + front + "\n---\n")
		fm, _, err := ParseSkillMD(data)
		if err != nil {
			return
		}
		block, _, err := splitFrontmatter(data)
		if err != nil {
			t.Fatalf("accepted but cannot split: %v", err)
		}
		front = string(block)
		// What is served must be JSON every client reads: valid UTF-8,
		// and nested no deeper than the depth rule allows.
		if !utf8.Valid(fm.JSON) {
			t.Fatalf("served JSON %q is not UTF-8", fm.JSON)
		}
		if err := jsonbound.Check(fm.JSON, jsonbound.Limits{MaxDepth: MaxFrontmatterDepth}); err != nil {
			t.Fatalf("served JSON breaks the depth rule: %v", err)
		}
		var served any
		if err := json.Unmarshal(fm.JSON, &served); err != nil {
			t.Fatalf("served JSON %s does not parse: %v", fm.JSON, err)
		}
		var v2 any
		if err := yaml2.Unmarshal([]byte(front), &v2); err != nil {
			t.Fatalf("accepted %q but yaml.v2 refuses it: %v", front, err)
		}
		var v3 any
		if err := yaml3.Unmarshal([]byte(front), &v3); err != nil {
			t.Fatalf("accepted %q but yaml.v3 refuses it: %v", front, err)
		}
		n2, n3, ns := normalize(v2), normalize(v3), normalize(served)
		if !reflect.DeepEqual(n2, n3) {
			t.Fatalf("accepted %q but YAML 1.1 reads %#v and YAML 1.2 reads %#v", front, n2, n3)
		}
		if !reflect.DeepEqual(ns, n3) {
			t.Fatalf("accepted %q: served %s, YAML reads %#v", front, fm.JSON, n3)
		}
	})
}

func TestReadFrontmatterDoesNotJudge(t *testing.T) {
	long := "---\nname: Not_A_Valid_Name\ndescription: " + strings.Repeat("d", 2000) + "\n---\n"
	js, err := ReadFrontmatter([]byte(long))
	if err != nil || !strings.Contains(string(js), `"name":"Not_A_Valid_Name"`) {
		t.Fatalf("ReadFrontmatter = %s, %v", js, err)
	}
	if _, _, err := ParseSkillMD([]byte(long)); err == nil {
		t.Fatal("ParseSkillMD must still judge")
	}
	if _, err := ReadFrontmatter([]byte("---\nflag: yes\n---\n")); err == nil {
		t.Fatal("ReadFrontmatter must still read strictly")
	}
}
