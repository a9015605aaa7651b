package web

import (
	"net/http"
	"testing"
)

// /sources shows every repository a template's owner lists and why it is
// or is not a source, to viewers who see the template.
func TestSourcesPageShowsDiscoveredRepositories(t *testing.T) {
	t.Parallel()
	f := newFixture(t, defaultSources(), func(o *Options) {
		authOptions(o)
		o.Discovered = func() []Discovered {
			return []Discovered{
				{Group: "team", Repository: "acme/skills", Source: "acme-skills", Included: true},
				{Group: "team", Repository: "acme/old", Reason: "archived (set archived: true to include archived repositories)"},
				{Group: "team", Repository: "acme/<b>x</b>", Reason: `topic "agent-skills" missing`},
				{Group: "secret", Repository: "acme/payroll", Source: "acme-payroll", Included: true, ListError: "GET /orgs/acme/repos: status 502"},
			}
		}
	})
	res, body := f.get(t, "/sources", f.login(t, "tok-team"))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	mustContain(t, "sources", body,
		`<h3 id="grp-team">Template <code>team</code></h3>`,
		`<tr><td><code>acme/skills</code></td><td><a href="/sources/acme-skills">acme-skills</a></td><td><span class="badge ok">yes</span></td><td></td></tr>`,
		`<td><code>acme/old</code></td><td><span class="muted">none</span></td><td><span class="badge">no</span></td><td>archived (set archived: true to include archived repositories)</td>`,
		`<code>acme/&lt;b&gt;x&lt;/b&gt;</code>`, `topic &#34;agent-skills&#34; missing`)
	mustNotContain(t, "sources", body, "acme/payroll", "grp-secret")
	_, body = f.get(t, "/sources", f.login(t, "tok-all"))
	mustContain(t, "sources", body, `<h3 id="grp-secret">`, "Last listing failed (the last discovered set stays): <code>GET /orgs/acme/repos: status 502</code>")
	// A template's own page shows its repositories.
	res, body = f.get(t, "/sources/secret", f.login(t, "tok-all"))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/sources/secret: status %d", res.StatusCode)
	}
	mustContain(t, "sources", body, "acme/payroll")
	mustNotContain(t, "sources", body, "acme/old")
}
