package redact

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

const tok = "ghp_S3cr3t/T0ken+with=odd&chars"

// TestSetScrubsEverySpelling covers the ways a remote echoes a credential
// back: as sent in a basic or bearer Authorization header, encoded into a
// URL, or as typed.
func TestSetScrubsEverySpelling(t *testing.T) {
	s := New()
	s.AddBasic("x-access-token", tok)
	pair := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tok))
	cases := map[string]string{
		"plain":             "denied for " + tok,
		"basic header":      "Authorization: Basic " + pair,
		"basic, no padding": "auth " + base64.RawStdEncoding.EncodeToString([]byte("x-access-token:"+tok)),
		"basic, url b64":    "auth " + base64.URLEncoding.EncodeToString([]byte("x-access-token:"+tok)),
		"token b64":         "got " + base64.StdEncoding.EncodeToString([]byte(tok)),
		"token raw url b64": "got " + base64.RawURLEncoding.EncodeToString([]byte(tok)),
		"query escaped":     "GET /?t=" + url.QueryEscape(tok),
		"path escaped":      "GET /" + url.PathEscape(tok),
		"userinfo":          "fetch " + (&url.URL{Scheme: "https", User: url.UserPassword("x-access-token", tok), Host: "h", Path: "/r"}).String(),
		"bearer":            "Authorization: Bearer " + tok,
		"in the middle":     "a" + tok + "b",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			out := s.String(in)
			for _, f := range append(encodings(tok), pair) {
				if strings.Contains(out, f) {
					t.Fatalf("%q still holds %q", out, f)
				}
			}
			if !strings.Contains(out, Placeholder) {
				t.Fatalf("%q: nothing replaced", out)
			}
		})
	}
}

// TestSetUnknownCredentials: what looks like credentials is scrubbed even
// when no secret was configured; prose is left alone.
func TestSetUnknownCredentials(t *testing.T) {
	var s *Set // nil works
	for in, want := range map[string]string{
		"https://user:pw1234@example.com/r.git":    "https://" + Placeholder + "@example.com/r.git",
		"echo: Basic dXNlcjpwYXNzd29yZDEy":         "echo: Basic " + Placeholder,
		"Bearer abc123def456":                      "Bearer " + Placeholder,
		"basic authentication required":            "basic authentication required",
		"list refs https://example.com/r.git: 401": "list refs https://example.com/r.git: 401",
		"mail me at someone@example.com":           "mail me at someone@example.com",
	} {
		if got := s.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSetShortAndForgotten(t *testing.T) {
	s := New("abc") // too short to scrub
	if got := s.String("abcabc"); got != "abcabc" {
		t.Fatalf("short secret scrubbed: %q", got)
	}
	for i := range maxSecrets + 1 {
		s.Add(fmt.Sprintf("secret-%04d", i))
	}
	if got := s.String("secret-0000 secret-0256"); got != "secret-0000 "+Placeholder {
		t.Fatalf("got %q: want the oldest forgotten and the newest scrubbed", got)
	}
}

func TestErrorKeepsChain(t *testing.T) {
	base := errors.New("sentinel")
	err := fmt.Errorf("fetch: %w: %s", base, tok)
	got := New(tok).Error(err)
	if strings.Contains(got.Error(), tok) || !errors.Is(got, base) {
		t.Fatalf("Error() = %q, Is(base) = %v", got, errors.Is(got, base))
	}
	if New(tok).Error(nil) != nil {
		t.Fatal("nil error became non-nil")
	}
}

func TestRemote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Unauthorized", "Unauthorized"},
		{"a\r\nb\tc\x00d\x1b[31me", "a b c d [31me"},
		{"\xff\xfebad", "bad"},
		{"  lead and trail  ", "lead and trail"},
		{"zero\u200bwidth\u202eRTL", "zero width RTL"},
		{strings.Repeat("x", 100), strings.Repeat("x", 61) + "…"},
		{strings.Repeat("é", 40), strings.Repeat("é", 30) + "…"},
	}
	for _, c := range cases {
		got := Remote(c.in, 64)
		if got != c.want {
			t.Errorf("Remote(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzRemote(f *testing.F) {
	f.Add("401 Unauthorized", 64)
	f.Add("a\x00\r\n\xff"+strings.Repeat("é", 100), 16)
	f.Fuzz(func(t *testing.T, in string, max int) {
		if max < 4 || max > 1<<12 {
			return
		}
		out := Remote(in, max)
		if len(out) > max || !utf8.ValidString(out) {
			t.Fatalf("Remote(%q, %d) = %q: too long or invalid", in, max, out)
		}
		for _, r := range out {
			if !unicode.IsPrint(r) && r != ' ' {
				t.Fatalf("Remote kept %U", r)
			}
		}
	})
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	s := New(tok)
	log := slog.New(s.Handler(slog.NewJSONHandler(&buf, nil))).With("bound", "b "+tok)
	log.Info("msg "+tok, "err", errors.New("e "+tok), "s", tok, "list", []string{tok},
		slog.Group("g", "inner", tok), "n", 3)
	if strings.Contains(buf.String(), tok) {
		t.Fatalf("log holds the secret: %s", buf.String())
	}
	if strings.Count(buf.String(), Placeholder) != 6 || !strings.Contains(buf.String(), `"n":3`) {
		t.Fatalf("unexpected record: %s", buf.String())
	}
}

func TestClean(t *testing.T) {
	base := errors.New("sentinel")
	got := New(tok).Clean(fmt.Errorf("%w: %s\x1b[2J\n%s", base, tok, strings.Repeat("x", 100)), 40)
	if !errors.Is(got, base) || len(got.Error()) > 40 || strings.ContainsAny(got.Error(), "\x1b\n") || strings.Contains(got.Error(), tok) {
		t.Fatalf("Clean: %q", got)
	}
}

// TestStatus: the reason phrase a remote chose is cleaned and bounded; a
// missing one is the standard text.
func TestStatus(t *testing.T) {
	for _, c := range []struct {
		status string
		code   int
		want   string
	}{
		{status: "401 Unauthorized", code: 401, want: "401 Unauthorized"},
		{status: "404", code: 404, want: "404 Not Found"},
		{status: "500 \x1b[31mboom\x00", code: 500, want: "500 " + Remote("\x1b[31mboom\x00", 64)},
		{status: "418 " + strings.Repeat("x", 200), code: 418, want: "418 " + Remote(strings.Repeat("x", 200), 64)},
	} {
		got := Status(&http.Response{Status: c.status, StatusCode: c.code})
		if got != c.want || strings.ContainsAny(got, "\x1b\x00") || len(got) > 4+64+3 {
			t.Errorf("Status(%q) = %q, want %q", c.status, got, c.want)
		}
	}
}
