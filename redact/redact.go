// Package redact keeps secrets and hostile remote text out of what skillreg
// shows: sync errors stored in a source's state (and so /readyz, /sources,
// diagnose), log lines and metrics.
//
// It has two jobs. A Set knows the configured secrets (git tokens, the
// GitHub API token, webhook secrets) and replaces every spelling of them a
// remote could echo back: the secret itself, its base64 (standard and URL
// alphabets, padded or not), the base64 of "user:secret" as sent in an HTTP
// basic Authorization header, its URL encodings, and the user information
// of any URL. Remote sanitises text a remote chose (an HTTP reason phrase, a
// git protocol error line): printable characters only, bounded length.
//
// Scrubbing happens where errors become state or log lines, not where they
// are made: a remote's bytes can reach an error through many layers, and one
// place that scrubs everything is easier to trust than many that each
// remember to.
package redact

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Placeholder replaces every secret found.
const Placeholder = "<redacted>"

// MinSecretLen is the shortest secret a Set scrubs: replacing every "ab" of
// a message would make it unreadable and hide nothing worth hiding.
const MinSecretLen = 4

// maxSecrets bounds a Set: rotated tokens are added at every sync, so the
// oldest are forgotten once this many are known.
const maxSecrets = 256

// Set is the set of secrets to scrub. The zero value and a nil *Set scrub
// only what needs no configuration (URL user information and the
// credentials of Authorization headers). It is safe for concurrent use.
type Set struct {
	mu      sync.Mutex
	secrets []string // insertion order, for forgetting the oldest
	known   map[string]bool
	rep     atomic.Pointer[strings.Replacer]
}

// New returns a Set holding secrets.
func New(secrets ...string) *Set {
	s := &Set{}
	s.Add(secrets...)
	return s
}

// Add records secrets (and their encodings, see the package comment).
// Empty and very short values are ignored.
func (s *Set) Add(secrets ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, v := range secrets {
		if len(v) < MinSecretLen || s.known[v] {
			continue
		}
		if s.known == nil {
			s.known = map[string]bool{}
		}
		s.known[v] = true
		s.secrets = append(s.secrets, v)
		changed = true
	}
	if !changed {
		return
	}
	for len(s.secrets) > maxSecrets {
		delete(s.known, s.secrets[0])
		s.secrets = s.secrets[1:]
	}
	s.rep.Store(newReplacer(s.secrets))
}

// AddBasic records the password of HTTP basic credentials: the password
// alone and the base64 of "user:password" that an Authorization header
// carries.
func (s *Set) AddBasic(user, password string) {
	if len(password) < MinSecretLen {
		return
	}
	s.Add(password, "\x00basic\x00"+user+":"+password)
}

// forms lists the spellings of one recorded secret, longest first.
func forms(v string) []string {
	var out []string
	if basic, ok := strings.CutPrefix(v, "\x00basic\x00"); ok {
		// Only the encoded pair: the user name alone is no secret.
		out = append(out, encodings(basic)[1:]...)
	} else {
		out = append(out, encodings(v)...)
	}
	return out
}

// encodings is v, its base64 spellings and its URL encodings.
func encodings(v string) []string {
	b := []byte(v)
	return []string{
		v,
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
		url.QueryEscape(v),
		url.PathEscape(v),
		url.UserPassword("u", v).String()[2:], // userinfo escaping
	}
}

func newReplacer(secrets []string) *strings.Replacer {
	seen := map[string]bool{}
	var all []string
	for _, v := range secrets {
		for _, f := range forms(v) {
			if len(f) >= MinSecretLen && !seen[f] {
				seen[f] = true
				all = append(all, f)
			}
		}
	}
	// strings.Replacer tries patterns in argument order at each position:
	// longest first, so a secret's encoding is not half-replaced by a
	// shorter secret it happens to contain.
	slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(all))
	for _, f := range all {
		pairs = append(pairs, f, Placeholder)
	}
	return strings.NewReplacer(pairs...)
}

var (
	// userinfoRE finds the user information of a URL ("scheme://user:pw@").
	userinfoRE = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@]*@`)
	// authRE finds the credentials of an Authorization header echoed back:
	// "Basic <base64>", "Bearer <token>" (see credential).
	authRE = regexp.MustCompile(`(?i)\b(basic|bearer)(\s+|%20|\+)([A-Za-z0-9+/=._~%-]{8,})`)
)

// String returns text with every secret of s replaced by Placeholder, and
// URL user information and Authorization credentials replaced whether or
// not they are known.
func (s *Set) String(text string) string {
	if s != nil {
		if rep := s.rep.Load(); rep != nil {
			text = rep.Replace(text)
		}
	}
	if strings.Contains(text, "@") {
		text = userinfoRE.ReplaceAllString(text, "${1}"+Placeholder+"@")
	}
	return authRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := authRE.FindStringSubmatch(m)
		if !credential(sub[3]) {
			return m // "basic authentication" is prose, not a header
		}
		return sub[1] + " " + Placeholder
	})
}

// credential tells a token or base64 blob from a word: it holds a digit or
// a symbol that words do not.
func credential(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsDigit(r) || strings.ContainsRune("+/=_~%-", r) })
}

// Error returns err with its message scrubbed; errors.Is and errors.As
// still see the original chain. Nil stays nil.
func (s *Set) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := s.String(msg)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

// Clean is Error, and the message made printable and at most max bytes as
// Remote does: for errors shown where remote text must not pass raw.
func (s *Set) Clean(err error, max int) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := Remote(s.String(msg), max)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// Remote returns text chosen by a remote, made safe to show: invalid UTF-8,
// control and other non-printable characters become spaces, runs of spaces
// shrink to one, and the result is at most max bytes (cut at a character
// boundary, "…" marking the cut). It does not scrub secrets: pass the
// result through a Set as well.
func Remote(text string, max int) string {
	var b strings.Builder
	space := false
	for i, r := range text {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(text[i:]); n <= 1 {
				r = ' '
			}
		}
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		if b.Len()+utf8.RuneLen(r) > max {
			out := strings.TrimRight(b.String(), " ")
			for len(out)+len("…") > max && len(out) > 0 {
				_, n := utf8.DecodeLastRuneInString(out)
				out = out[:len(out)-n]
			}
			return out + "…"
		}
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), " ")
}

// Handler returns a slog.Handler that scrubs the message and every string,
// error and Stringer attribute of each record (groups included) before h
// sees it. Attributes bound with WithAttrs are scrubbed when bound.
func (s *Set) Handler(h slog.Handler) slog.Handler {
	return &handler{set: s, next: h}
}

type handler struct {
	set  *Set
	next slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.set.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &handler{set: h.set, next: h.next.WithAttrs(clean)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{set: h.set, next: h.next.WithGroup(name)}
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.set.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, ga := range g {
			clean[i] = h.attr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.set.String(x.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, h.set.String(x.String()))
		case []string:
			clean := make([]string, len(x))
			for i, e := range x {
				clean[i] = h.set.String(e)
			}
			return slog.Any(a.Key, clean)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// Status describes an HTTP answer by its status code and its reason
// phrase ("401 Unauthorized"), the phrase sanitised (printable, at most 64
// bytes): the remote chose it.
func Status(resp *http.Response) string {
	reason := strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)))
	if reason == "" {
		reason = http.StatusText(resp.StatusCode)
	}
	return strconv.Itoa(resp.StatusCode) + " " + Remote(reason, 64)
}
