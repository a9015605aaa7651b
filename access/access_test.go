package access

import (
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	tok, hash, err := NewToken()
	if err != nil || !strings.HasPrefix(tok, TokenPrefix) {
		t.Fatal(tok, err)
	}
	h, err := ParseHash(hash)
	if err != nil {
		t.Fatal(err)
	}
	cs := New([]Client{{Name: "a", Hash: h, Sources: []string{"x"}}})
	if c, ok := cs.Check(tok); !ok || c.Name != "a" || !c.Filter().Allows("x") || c.Filter().Allows("y") {
		t.Fatalf("Check(good) = %+v %v", c, ok)
	}
	for _, bad := range []string{"", tok + "x", strings.ToUpper(tok), hash} {
		if _, ok := cs.Check(bad); ok {
			t.Errorf("Check(%q) accepted", bad)
		}
	}
	if _, err := ParseHash("abc"); err == nil {
		t.Error("short hash accepted")
	}
	all := Client{Sources: []string{"*"}}
	if all.Filter().Private() {
		t.Error("* should allow every source")
	}
	var none *Clients
	if none.Required() || New(nil).Required() {
		t.Error("no clients must mean open access")
	}
}

func TestBearer(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": "", "": ""} {
		if got := Bearer(in); got != want {
			t.Errorf("Bearer(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	l := NewLimiter(time.Second, 3)
	l.now = func() time.Time { return now }
	for range 3 {
		if !l.Allow("a") {
			t.Fatal("refused within the burst")
		}
		l.Failed("a")
	}
	if l.Allow("a") || !l.Allow("b") {
		t.Fatal("limit is not per address")
	}
	now = now.Add(time.Second)
	if !l.Allow("a") {
		t.Fatal("did not recover")
	}
	l.maxKeys = 2
	l.Failed("c")
	l.Failed("d")
	if len(l.byAddr) > 2 {
		t.Fatalf("limiter holds %d addresses, bound 2", len(l.byAddr))
	}
}
