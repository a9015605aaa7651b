package ghapp

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/skillreg/skillreg/internal/deepjson"
)

// FuzzDecodeAnswer feeds GitHub's answers to the App's requests (an
// installation, a token, an error) to the decoders: they never panic, a
// decoded answer is within the bounds, and an error message shown is
// printable and bounded.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{
		`{"id":1001,"account":{"login":"acme","type":"Organization"},"suspended_at":null}`,
		`{"id":1001,"suspended_at":"2026-12-01T12:00:00Z"}`,
		`{"token":"ghs_16C7e42F292c6912E7710c838347Ae178B4a","expires_at":"2026-12-01T13:00:00Z","permissions":{"contents":"read"},"repository_selection":"selected","repositories":[{"id":1,"full_name":"acme/skills"}]}`,
		`{"message":"A JSON web token could not be decoded","documentation_url":"https://docs.github.com/rest","status":"401"}`,
		`{"message":"\u001b[31mred\u0000","status":"403"}`,
		`{"id":"1"}`, `[]`, `null`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range deepjson.Shapes() {
		f.Add(deepjson.Embed([]byte(`{"token":"ghs_x","expires_at":"2026-12-01T13:00:00Z"}`), "repositories", s.JSON))
		if len(s.JSON) <= 64<<10 {
			f.Add(s.JSON)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var inst installationJSON
		if err := decode(body, &inst); err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("installation: %v is not ErrUnavailable", err)
		}
		var tok tokenJSON
		if err := decode(body, &tok); err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("token: %v is not ErrUnavailable", err)
		}
		msg := message(body)
		if len(msg) > maxMessage || !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x00\x1b\n\r") {
			t.Fatalf("message %q is not bounded and printable", msg)
		}
	})
}
