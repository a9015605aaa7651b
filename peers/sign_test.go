package peers

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSignMatchesOpenSSL: the signature is the HMAC-SHA256 of the
// documented message, as a tool that knows nothing of this package
// computes it, so another implementation of the contract interoperates.
func TestSignMatchesOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	const secret, from, event, delivery, body = "peer secret", "0123abcd", "push", "d-1", `{"ref":"refs/heads/main"}`
	cmd := exec.Command(openssl, "dgst", "-sha256", "-hmac", secret, "-r")
	cmd.Stdin = strings.NewReader(from + "\n" + event + "\n" + delivery + "\n" + body)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "sha256=" + strings.Fields(string(out))[0]
	if got := Sign([]byte(secret), from, event, delivery, []byte(body)); got != want {
		t.Fatalf("Sign = %s, openssl says %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	old, cur := []byte("old secret"), []byte("current secret")
	body := []byte(`{"ref":"refs/heads/main"}`)
	sig := Sign(cur, "a1", "push", "d-1", body)
	if !Verify(sig, [][]byte{old, cur}, "a1", "push", "d-1", body) {
		t.Fatal("signed with the second of two secrets: refused")
	}
	if !Verify(Sign(old, "a1", "push", "d-1", body), [][]byte{old, cur}, "a1", "push", "d-1", body) {
		t.Fatal("signed with the first of two secrets: refused")
	}
	for name, c := range map[string]struct {
		sig                   string
		secrets               [][]byte
		from, event, id, body string
	}{
		"other secret":    {sig, [][]byte{old}, "a1", "push", "d-1", string(body)},
		"no secret":       {sig, nil, "a1", "push", "d-1", string(body)},
		"empty secret":    {Sign(nil, "a1", "push", "d-1", body), [][]byte{{}}, "a1", "push", "d-1", string(body)},
		"other sender":    {sig, [][]byte{cur}, "a2", "push", "d-1", string(body)},
		"other event":     {sig, [][]byte{cur}, "a1", "release", "d-1", string(body)},
		"other delivery":  {sig, [][]byte{cur}, "a1", "push", "d-2", string(body)},
		"other body":      {sig, [][]byte{cur}, "a1", "push", "d-1", string(body) + " "},
		"fields shifted":  {sig, [][]byte{cur}, "a1\npush", "d-1", "", string(body)},
		"upper-case hex":  {strings.ToUpper(sig[:7]) + sig[7:], [][]byte{cur}, "a1", "push", "d-1", string(body)},
		"truncated":       {sig[:len(sig)-2], [][]byte{cur}, "a1", "push", "d-1", string(body)},
		"github's prefix": {"sha1=" + sig[7:], [][]byte{cur}, "a1", "push", "d-1", string(body)},
		"not hex":         {"sha256=" + strings.Repeat("zz", 32), [][]byte{cur}, "a1", "push", "d-1", string(body)},
		"empty":           {"", [][]byte{cur}, "a1", "push", "d-1", string(body)},
	} {
		if Verify(c.sig, c.secrets, c.from, c.event, c.id, []byte(c.body)) {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestInstanceID(t *testing.T) {
	a, b := NewInstanceID(), NewInstanceID()
	if len(a) != 32 || a == b || !ValidInstanceID(a) {
		t.Fatalf("ids %q %q", a, b)
	}
	for _, bad := range []string{"", strings.Repeat("a", MaxInstanceIDLen+1), "a\nb", "a b", "a/b"} {
		if ValidInstanceID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
