package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxTokenBytes is the longest word indexed.
const maxTokenBytes = 48

// token is one query word: its surface form (lowercased) and the stem it
// is scored under.
type token struct {
	word, stem string
}

// splitWords cuts text into words of letters and digits; every other
// character separates words. It reports each word as written (w may point
// into text), whether it needs lowercasing (upper), and whether it was
// attached to the previous word by a single hyphen or underscore
// ("go-code-review", "lock_timeout"), which is what makes compounds.
// Words longer than maxTokenBytes (hashes, base64, minified code) are
// skipped: nobody searches for them.
func splitWords(text string, fn func(w string, upper, joined bool)) {
	start := -1
	upper, joined := false, false
	for i := 0; i < len(text); {
		c := text[i]
		size := 1
		isWord := false
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			isWord = true
		case 'A' <= c && c <= 'Z':
			isWord, upper = true, true
		case c >= utf8.RuneSelf:
			var r rune
			r, size = utf8.DecodeRuneInString(text[i:])
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				isWord, upper = true, true
			}
		}
		if isWord {
			if start < 0 {
				start = i
			}
			i += size
			continue
		}
		if start >= 0 {
			if i-start <= maxTokenBytes {
				fn(text[start:i], upper, joined)
			}
			start, upper = -1, false
			joined = (c == '-' || c == '_') && i+1 < len(text) && isWordStart(text[i+1:])
		} else {
			joined = false
		}
		i += size
	}
	if start >= 0 && len(text)-start <= maxTokenBytes {
		fn(text[start:], upper, joined)
	}
}

func isWordStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// analyzer turns field text into index words, plus compounds of
// hyphenated groups so that "go-code-review" is found by "gocodereview"
// and "codereview".
type analyzer struct {
	group []string // the current hyphenated group, as written
	upper bool     // some word of the group needs lowercasing
}

// tokens calls fn for every word of text, stop words included (the caller
// decides), then for the compounds of its hyphenated groups, lowercased,
// with compound set (they do not count towards field length). When
// wholeGroup is set, all of text is one group (a name, a tag). A word may
// point into text and may need lowercasing (upper).
func (a *analyzer) tokens(text string, wholeGroup bool, fn func(w string, upper, compound bool)) {
	a.group, a.upper = a.group[:0], false
	flush := func() {
		if len(a.group) >= 2 {
			if a.upper { // lowercase only the groups that make compounds
				for i, w := range a.group {
					a.group[i] = strings.ToLower(w)
				}
			}
			a.compounds(a.group, fn)
		}
		a.group, a.upper = a.group[:0], false
	}
	splitWords(text, func(w string, upper, joined bool) {
		if !joined && !wholeGroup {
			flush()
		}
		fn(w, upper, false)
		a.group = append(a.group, w)
		a.upper = a.upper || upper
	})
	flush()
}

// compounds emits the whole group joined, and each adjacent pair of
// non-stop words joined.
func (a *analyzer) compounds(g []string, fn func(w string, upper, compound bool)) {
	if len(g) > 6 {
		g = g[:6]
	}
	if whole := strings.Join(g, ""); len(whole) <= maxTokenBytes {
		fn(whole, false, true)
	}
	if len(g) == 2 {
		return
	}
	for i := 0; i+1 < len(g); i++ {
		if stopWords[g[i]] || stopWords[g[i+1]] {
			continue
		}
		if p := g[i] + g[i+1]; len(p) <= maxTokenBytes {
			fn(p, false, true)
		}
	}
}

// queryTokens analyses a query: words minus stop words, with stems, in
// order, each stem once. No compounds: a query's words are matched one by
// one, and a compound typed by the user matches the indexed compounds.
func queryTokens(q string) []token {
	var out []token
	seen := map[string]bool{}
	splitWords(q, func(w string, upper, _ bool) {
		if upper {
			w = strings.ToLower(w)
		}
		if stopWords[w] {
			return
		}
		t := token{w, stem(w)}
		if !seen[t.stem] {
			seen[t.stem] = true
			out = append(out, t)
		}
	})
	return out
}

// stem folds English inflections so that "migrations", "migrating" and
// "migrate" meet: plurals, -ing, -ed, -ly, -ment, -tion/-sion and a final
// -e. It is deliberately light (no Porter rules for -ize, -ful, -ness, ...):
// prefix and typo matching cover much of the rest, and an over-eager
// stemmer merges words users keep apart. Words with non-ASCII letters or
// digits are left alone.
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	// Plurals.
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "zzes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	// Verb and adverb endings.
	switch {
	case strings.HasSuffix(w, "ing") && hasVowel(w[:len(w)-3]) && len(w) >= 6:
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed") && hasVowel(w[:len(w)-2]) && len(w) >= 5:
		w = undouble(w[:len(w)-2])
	case strings.HasSuffix(w, "ly") && len(w) >= 6:
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ment") && len(w) >= 8:
		w = w[:len(w)-4]
	case (strings.HasSuffix(w, "tion") || strings.HasSuffix(w, "sion")) && len(w) >= 7:
		w = w[:len(w)-3]
	}
	if len(w) > 4 && w[len(w)-1] == 'e' {
		w = w[:len(w)-1]
	}
	return w
}

func hasVowel(s string) bool { return strings.ContainsAny(s, "aeiouy") }

// undouble turns "runn" (from "running") into "run"; l, s and z stay double
// ("install", "miss", "buzz").
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeioulsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

// stopWords are dropped from documents and queries: function words, and the
// phrasing of questions ("how do I ...", "please").
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
a about after again all also am an and any are aren as at be because been
before being both but by can could did didn do does doesn doing don down
during each either few for from further had has have having he her here him
his how i if in into is isn it its itself just let me more most my myself no
nor not of off on once only or other our ours out over own please same she
should so some such t s than that the their theirs them then there these they
this those through to too under until up us very was we were what when where
which while who whom why will with won would you your yours want wants`) {
		m[w] = true
	}
	return m
}()
