package search

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestStem(t *testing.T) {
	// Each group must share one stem.
	groups := [][]string{
		{"migration", "migrations", "migrate", "migrating", "migrated"},
		{"commit", "commits", "committing", "committed"},
		{"test", "tests", "testing", "tested"},
		{"review", "reviews", "reviewing", "reviewed"},
		{"rotation", "rotate", "rotating", "rotated"},
		{"write", "writes", "writing"},
		{"policy", "policies"},
		{"cache", "caches", "caching", "cached"},
		{"patch", "patches"},
		{"lag", "lags", "lagging"},
		{"deploy", "deploys", "deploying", "deployment", "deployments"},
		{"local", "locally"},
		{"webhook", "webhooks"},
	}
	for _, g := range groups {
		want := stem(g[0])
		for _, w := range g[1:] {
			if got := stem(w); got != want {
				t.Errorf("stem(%q) = %q, stem(%q) = %q; want them equal", w, got, g[0], want)
			}
		}
	}
	// Words that must stay apart or stay whole.
	for w, want := range map[string]string{
		"go": "go", "redis": "redis", "status": "status", "process": "process", "string": "string",
		"speed": "speed", "used": "used", "sev1": "sev1", "café": "café", "kubernetes": "kubernet",
	} {
		if got := stem(w); got != want {
			t.Errorf("stem(%q) = %q, want %q", w, got, want)
		}
	}
}

func TestTokens(t *testing.T) {
	var a analyzer
	collect := func(text string, whole bool) (words, compounds []string) {
		a.tokens(text, whole, func(w string, upper, compound bool) {
			if upper {
				w = strings.ToLower(w)
			}
			switch {
			case compound:
				compounds = append(compounds, w)
			case !stopWords[w]:
				words = append(words, w)
			}
		})
		return
	}
	words, comp := collect("go-code-review", true)
	if !slices.Equal(words, []string{"go", "code", "review"}) || !slices.Equal(comp, []string{"gocodereview", "gocode", "codereview"}) {
		t.Errorf("go-code-review: words %q, compounds %q", words, comp)
	}
	words, comp = collect("Set lock_timeout before the ALTER; on-call SEV1 engineers.", false)
	if !slices.Equal(words, []string{"set", "lock", "timeout", "alter", "call", "sev1", "engineers"}) {
		t.Errorf("words %q", words)
	}
	if !slices.Equal(comp, []string{"locktimeout", "oncall"}) {
		t.Errorf("compounds %q", comp)
	}
	// A tag with spaces is one group.
	if _, comp = collect("code review", true); !slices.Equal(comp, []string{"codereview"}) {
		t.Errorf("tag compounds %q", comp)
	}
	// Overlong tokens are dropped.
	if words, _ = collect("a "+strings.Repeat("x", maxTokenBytes+1)+" kept", false); !slices.Equal(words, []string{"kept"}) {
		t.Errorf("overlong: %q", words)
	}
	// Queries: stop words out, one token per stem, no compounds.
	var got []string
	for _, tk := range queryTokens("How do I write tests for my tests, please? Go-code-review") {
		got = append(got, tk.word)
	}
	if !slices.Equal(got, []string{"write", "tests", "go", "code", "review"}) {
		t.Errorf("queryTokens = %q", got)
	}
}

// osa is the optimal string alignment distance, computed directly.
func osa(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func TestFuzzyMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, 2+r.IntN(9))
		for i := range b {
			b[i] = "abcdeor"[r.IntN(7)] // a small alphabet makes near misses common
		}
		return string(b)
	}
	set := map[string]bool{}
	for len(set) < 2000 {
		set[word()] = true
	}
	var words []string
	for w := range set {
		words = append(words, w)
	}
	slices.Sort(words)
	d := newDictionary(words, nil)
	for range 100 {
		q := word()
		for k := 1; k <= 2; k++ {
			got := map[string]int{}
			d.fuzzy(q, k, func(i, dist int) { got[d.words[i]] = dist })
			for _, w := range d.words {
				want := osa(q, w)
				dist, ok := got[w]
				switch {
				case want <= k && !ok:
					t.Fatalf("fuzzy(%q, %d) missed %q at distance %d", q, k, w, want)
				case ok && dist != want:
					t.Fatalf("fuzzy(%q, %d) reported %q at %d, want %d", q, k, w, dist, want)
				case want > k && ok:
					t.Fatalf("fuzzy(%q, %d) reported %q at distance %d", q, k, w, want)
				}
			}
		}
	}
}

func TestPrefixRange(t *testing.T) {
	d := newDictionary([]string{"incident", "increment", "incremental", "incur", "index"}, nil)
	lo, hi := d.prefixRange("increm")
	if got := d.words[lo:hi]; !slices.Equal(got, []string{"increment", "incremental"}) {
		t.Errorf("prefixRange(increm) = %q", got)
	}
	if lo, hi = d.prefixRange("zzz"); lo != hi {
		t.Errorf("prefixRange(zzz) = %d..%d", lo, hi)
	}
}
