package web

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
)

// TestSourcesPageEscapesRemoteText: what a remote or a webhook sender chose
// (an error message, a repository URL, a ref, a commit, delivery fields) is
// untrusted; the sources page shows it as text, never as markup or as a
// script URL.
func TestSourcesPageEscapesRemoteText(t *testing.T) {
	hostile := []string{
		`<script>alert(1)</script>`,
		`"><img src=x onerror=alert(1)>`,
		`'><svg onload=alert(1)>`,
		`</pre><iframe src="javascript:alert(1)">`,
	}
	for _, h := range hostile {
		t.Run(h, func(t *testing.T) {
			st := catalog.State{
				Source: "team", Kind: catalog.KindGit, LastResult: "failed", Failures: 3,
				LastError:   "list refs: " + h,
				LastErrorAt: time.Now(),
				Repository:  "https://github.com/o/r" + h,
				Ref:         "branch:" + h,
				Commit:      h,
			}
			f := newFixture(t, map[string]map[string]string{"team": teamSkills}, func(o *Options) {
				o.States = func() []catalog.State { return []catalog.State{st} }
				o.Deliveries = func(int) []Delivery {
					return []Delivery{{ID: h, Event: h, Action: h, Repo: h, At: time.Now(), Outcome: h, Sources: []string{"team"}}}
				}
			})
			for _, path := range []string{"/sources", "/sources/team"} {
				res := f.do(t, request{path: path})
				b, _ := io.ReadAll(res.Body)
				page := string(b)
				if res.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d", path, res.StatusCode)
				}
				for _, raw := range []string{"<script>alert", "<img src=x", "<svg onload", "<iframe", `href="javascript:`} {
					if strings.Contains(page, raw) {
						t.Fatalf("%s renders %q raw:\n%s", path, raw, page)
					}
				}
				if !strings.Contains(page, "list refs: &lt;") && !strings.Contains(page, "list refs: &#34;&gt;") && !strings.Contains(page, "list refs: &#39;&gt;") {
					t.Fatalf("%s does not show the error as text:\n%s", path, page)
				}
			}
		})
	}
}
