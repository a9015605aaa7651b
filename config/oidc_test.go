package config

import (
	"slices"
	"strings"
	"testing"
)

func TestOIDCDefaults(t *testing.T) {
	dir := t.TempDir()
	c, err := Parse([]byte("public_url: https://skills.example.com/\nsources:\n  - name: acme\n    dir: "+dir+`
oidc:
  issuer: https://idp.example.com/realms/org
  scopes: [skills:read]
  client_id: skillreg-web
  client_secret_env: SKILLREG_OIDC_SECRET
  introspection:
    client_id: skillreg
    client_secret_env: SKILLREG_INTROSPECT
access:
  - groups: [platform]
    emails: ["@example.com", alice@other.org]
    sources: [acme]
  - subjects: [u-1]
    sources: ["*"]
`), "")
	if err != nil {
		t.Fatal(err)
	}
	o := c.OIDC
	if o.Audience != "https://skills.example.com/mcp" || o.GroupsClaim != "groups" || !slices.Equal(o.Scopes, []string{"skills:read"}) || o.Introspection.URL != "" {
		t.Fatalf("oidc %+v", o)
	}
	if c.MCPResource() != "https://skills.example.com/mcp" || c.ResourceMetadataURL() != "https://skills.example.com/.well-known/oauth-protected-resource" {
		t.Fatalf("resource %q, metadata %q", c.MCPResource(), c.ResourceMetadataURL())
	}
	if len(c.Access) != 2 || !slices.Equal(c.Access[0].Emails, []string{"@example.com", "alice@other.org"}) || c.Access[1].Sources[0] != "*" {
		t.Fatalf("access %+v", c.Access)
	}
	if !c.AccessControl() {
		t.Fatal("oidc alone must turn access control on")
	}
	c, err = Parse([]byte("public_url: http://127.0.0.1:18300\noidc:\n  issuer: http://127.0.0.1:18301\n  audience: api://skillreg\n  groups_claim: realm_access.roles\n"), "")
	if err != nil || c.OIDC.Audience != "api://skillreg" || c.OIDC.GroupsClaim != "realm_access.roles" {
		t.Fatalf("%+v %v", c, err)
	}
	if c, _ := Parse(nil, ""); c.AccessControl() || c.MCPResource() != "" {
		t.Fatal("the default configuration is open")
	}
}

func TestOIDCErrorsNameKey(t *testing.T) {
	dir := t.TempDir()
	src := "sources:\n  - name: acme\n    dir: " + dir + "\n"
	pub := "public_url: https://skills.example.com\n"
	iss := "oidc:\n  issuer: https://idp.example.com\n"
	for _, tc := range []struct{ yaml, want string }{
		{iss, "oidc: requires public_url"},
		{pub + "oidc:\n", "line 2: oidc: empty"},
		{pub + "oidc:\n  audience: x\n", "oidc.issuer: required"},
		{pub + "oidc:\n  issuer: http://idp.example.com\n", `oidc.issuer: "http://idp.example.com" must be https`},
		{pub + "oidc:\n  issuer: https://u:p@idp.example.com\n", "oidc.issuer: "},
		{pub + "oidc:\n  issuer: idp.example.com\n", "oidc.issuer: "},
		{pub + iss + "  colour: red\n", `line 4: unknown key "colour"`},
		{pub + iss + "  scopes: [\"a b\"]\n", `oidc.scopes[0]: "a b" is not a scope`},
		{pub + iss + "  scopes: ['a\"b']\n", `oidc.scopes[0]`},
		{pub + iss + "  scopes: [a, a]\n", `oidc.scopes[1]: "a" is listed twice`},
		{pub + iss + "  groups_claim: \"my groups\"\n", "oidc.groups_claim"},
		{pub + iss + "  client_secret_env: X\n", "oidc.client_id: required with client_secret_env"},
		{pub + iss + "  client_id: c\n  client_secret_env: not-a-name\n", "oidc.client_secret_env"},
		{pub + iss + "  introspection:\n    url: http://idp.example.com/introspect\n    client_id: c\n    client_secret_env: S\n", "oidc.introspection.url"},
		{pub + iss + "  introspection:\n    client_secret_env: S\n", "oidc.introspection.client_id: required"},
		{pub + iss + "  introspection:\n    client_id: c\n", "oidc.introspection.client_secret_env: required"},
		{src + "access:\n  - groups: [g]\n    sources: [acme]\n", "access: the rules map the provider's identities"},
		{src + pub + iss + "access:\n  - sources: [acme]\n", "access[0]: name who it is for"},
		{src + pub + iss + "access:\n  - groups: [g]\n", `access[0].sources: list the sources`},
		{src + pub + iss + "access:\n  - groups: [g]\n    sources: [nosuch]\n", `access[0].sources: "nosuch" is not a configured source`},
		{src + pub + iss + "access:\n  - emails: [example.com]\n    sources: [acme]\n", `access[0].emails[0]: "example.com" is not an address`},
		{src + pub + iss + "access:\n  - emails: [\"a@b@c\"]\n    sources: [acme]\n", `access[0].emails[0]`},
		{src + pub + iss + "access:\n  - groups: [\"\"]\n    sources: [acme]\n", `access[0].groups[0]: empty`},
		{src + pub + iss + "access:\n  - groups: [g]\n    sources: [acme]\n    teams: [x]\n", `unknown key "teams"`},
	} {
		_, err := Parse([]byte(tc.yaml), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
