package web

import (
	"strings"
	"testing"
)

func TestFlowCookieRoundTrip(t *testing.T) {
	const r43 = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP_"
	f := flow{State: r43, Nonce: strings.Repeat("n", 43), Verifier: strings.Repeat("-", 43), Expires: 1796117400, Next: "/skills/team/x?q=a b&c=ü"}
	got, ok := decodeFlow(encodeFlow(f))
	if !ok || got != f {
		t.Fatalf("round trip: %+v %v", got, ok)
	}
	good := encodeFlow(f)
	bad := map[string]string{
		"empty":            "",
		"version":          "2" + good[1:],
		"short state":      strings.Replace(good, r43, r43[:42], 1),
		"state with a dot": strings.Replace(good, r43, r43[:42]+"=", 1),
		"extra field":      good + ".x",
		"no expiry":        strings.Replace(good, ".1796117400.", "..", 1),
		"signed expiry":    strings.Replace(good, ".1796117400.", ".+1796117400.", 1),
		"zero expiry":      strings.Replace(good, ".1796117400.", ".0.", 1),
		"padded next":      good + "==",
		"huge":             good + strings.Repeat("A", maxFlowCookie),
	}
	for name, s := range bad {
		if f, ok := decodeFlow(s); ok {
			t.Errorf("%s: decoded %+v", name, f)
		}
	}
	// A next that is not a local path is no flow at all: it could only
	// come from an edited cookie.
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/login", "x"} {
		f.Next = next
		if _, ok := decodeFlow(encodeFlow(f)); ok {
			t.Errorf("next %q accepted", next)
		}
	}
}

// FuzzDecodeFlow: the flow cookie comes back from the browser, which may
// send anything. Whatever decodes is canonical and its next is local.
func FuzzDecodeFlow(f *testing.F) {
	r := strings.Repeat("A", 43)
	f.Add(encodeFlow(flow{State: r, Nonce: r, Verifier: r, Expires: 1, Next: "/"}))
	f.Add(encodeFlow(flow{State: r, Nonce: r, Verifier: r, Expires: 1 << 62, Next: "/skills/a/b?q=%00"}))
	f.Add("1.....")
	f.Add("1." + r + "." + r + "." + r + ".9223372036854775808.Lw")
	f.Fuzz(func(t *testing.T, s string) {
		fl, ok := decodeFlow(s)
		if !ok {
			return
		}
		if safeNext(fl.Next) != fl.Next {
			t.Fatalf("next %q is not local", fl.Next)
		}
		if enc := encodeFlow(fl); enc != s {
			t.Fatalf("%q decodes to %+v, which encodes to %q", s, fl, enc)
		}
	})
}

func TestFormOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://idp.example.com/oauth2/v1/logout?x=1": "https://idp.example.com",
		"http://127.0.0.1:18400/end_session":           "http://127.0.0.1:18400",
		"http://[::1]:8080/logout":                     "http://[::1]:8080",
		"":                                             "",
		"javascript:alert(1)":                          "",
		"https://user:pw@idp.example.com/logout":       "",
		"https://idp.example.com;script-src*/x":        "",
		"/relative":                                    "",
		"ftp://idp.example.com/":                       "",
		"https://idp.example.com 'unsafe-inline'/":     "",
	} {
		if got := formOrigin(in); got != want {
			t.Errorf("formOrigin(%q) = %q, want %q", in, got, want)
		}
	}
}
