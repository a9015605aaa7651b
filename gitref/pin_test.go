package gitref

import (
	"errors"
	"strings"
	"testing"
)

// Moved from gitstore's pin tests, with the kinds gitref adds (release)
// and the normalisations it does (a refs/ prefix, an upper-case id).
func TestParsePin(t *testing.T) {
	sha := strings.Repeat("ab", 20)
	tests := []struct {
		kind, value string
		want        Pin
		ok          bool
	}{
		{kind: "", value: "", want: Pin{Kind: Default}, ok: true},
		{kind: "default", value: "", want: Pin{Kind: Default}, ok: true},
		{kind: "branch", value: "main", want: Pin{Kind: Branch, Value: "main"}, ok: true},
		{kind: "branch", value: "feature/x-1", want: Pin{Kind: Branch, Value: "feature/x-1"}, ok: true},
		{kind: "branch", value: "refs/heads/main", want: Pin{Kind: Branch, Value: "main"}, ok: true},
		{kind: "tag", value: "v1.4.0", want: Pin{Kind: Tag, Value: "v1.4.0"}, ok: true},
		{kind: "tag", value: "refs/tags/v1.4.0", want: Pin{Kind: Tag, Value: "v1.4.0"}, ok: true},
		{kind: "commit", value: strings.ToUpper(sha), want: Pin{Kind: Commit, Value: sha}, ok: true},
		{kind: "semver", value: ">=1.2.0 <2.0.0", want: Pin{Kind: Semver, Value: ">=1.2.0 <2.0.0"}, ok: true},
		{kind: "semver", value: "^1.2", want: Pin{Kind: Semver, Value: "^1.2"}, ok: true},
		{kind: "release", value: "latest", want: Pin{Kind: Release, Value: "latest"}, ok: true},
		{kind: "", value: "main"},
		{kind: "branch", value: ""},
		{kind: "branch", value: "a..b"},
		{kind: "branch", value: "feature..x"},
		{kind: "branch", value: "-rf"},
		{kind: "branch", value: "x y"},
		{kind: "branch", value: "main:refs/heads/evil"},
		{kind: "branch", value: "HEAD@{1}"},
		{kind: "branch", value: "@"},
		{kind: "branch", value: "a/.hidden"},
		{kind: "branch", value: "x.lock"},
		{kind: "branch", value: "trailing/"},
		{kind: "branch", value: "/leading"},
		{kind: "branch", value: "a//b"},
		{kind: "branch", value: "dot."},
		{kind: "branch", value: "tab\tx"},
		{kind: "branch", value: "glob*"},
		{kind: "branch", value: `back\slash`},
		{kind: "tag", value: "v1^{}"},
		{kind: "tag", value: "v1~1"},
		{kind: "commit", value: "abc123"},
		{kind: "commit", value: strings.Repeat("g", 40)},
		{kind: "semver", value: "not a range"},
		{kind: "release", value: "v1.0.0"},
		{kind: "release", value: ""},
		{kind: "revision", value: "main"},
	}
	for _, tt := range tests {
		got, err := ParsePin(tt.kind, tt.value)
		if tt.ok != (err == nil) {
			t.Errorf("ParsePin(%q, %q) error = %v, want ok=%v", tt.kind, tt.value, err, tt.ok)
			continue
		}
		if !tt.ok {
			if !errors.Is(err, ErrInvalidPin) {
				t.Errorf("ParsePin(%q, %q) error %v is not ErrInvalidPin", tt.kind, tt.value, err)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("ParsePin(%q, %q) = %+v, want %+v", tt.kind, tt.value, got, tt.want)
		}
	}
}

func TestPinValidateUnknownKind(t *testing.T) {
	if err := (Pin{Kind: Kind(42), Value: "x"}).Validate(); !errors.Is(err, ErrInvalidPin) {
		t.Fatalf("Validate of kind 42: %v", err)
	}
	if s := Kind(42).String(); s != "Kind(42)" {
		t.Fatalf("Kind(42).String() = %q", s)
	}
}

// TestPinString: provenance and the store record pins in this spelling;
// a change would make every stored snapshot look like another source's.
func TestPinString(t *testing.T) {
	for pin, want := range map[Pin]string{
		{}:                               "default-branch",
		{Kind: Branch, Value: "main"}:    "branch:main",
		{Kind: Tag, Value: "v1.2.0"}:     "tag:v1.2.0",
		{Kind: Commit, Value: "ab"}:      "commit:ab",
		{Kind: Semver, Value: "^1"}:      "semver:^1",
		{Kind: Release, Value: "latest"}: "release:latest",
	} {
		if got := pin.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", pin, got, want)
		}
	}
}

func TestPinConstraint(t *testing.T) {
	c, err := Pin{Kind: Semver, Value: ">=1.2.0 <2.0.0"}.Constraint()
	if err != nil || c.String() != ">=1.2.0 <2.0.0" {
		t.Fatalf("Constraint = %v, %v", c, err)
	}
	for _, p := range []Pin{{Kind: Tag, Value: "v1"}, {Kind: Semver, Value: "nope"}} {
		if _, err := p.Constraint(); !errors.Is(err, ErrInvalidPin) {
			t.Errorf("%v.Constraint() error = %v, want ErrInvalidPin", p, err)
		}
	}
}

// Moved from webhook's refAffects test: which pushed ref moves which pin.
func TestPinMovedBy(t *testing.T) {
	frozen := "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
	tests := []struct {
		pin     Pin
		ref     string
		deflt   string
		affects bool
	}{
		{pin: Pin{Kind: Branch, Value: "main"}, ref: "refs/heads/main", deflt: "main", affects: true},
		{pin: Pin{Kind: Branch, Value: "main"}, ref: "refs/heads/dev", deflt: "main"},
		{pin: Pin{Kind: Branch, Value: "main"}, ref: "refs/tags/main", deflt: "main"},
		{pin: Pin{}, ref: "refs/heads/main", deflt: "main", affects: true},
		{pin: Pin{}, ref: "refs/heads/dev", deflt: "main"},
		{pin: Pin{}, ref: "refs/heads/dev", deflt: "", affects: true},
		{pin: Pin{}, ref: "refs/tags/v1", deflt: "main"},
		{pin: Pin{Kind: Tag, Value: "v1.0.0"}, ref: "refs/tags/v1.0.0", deflt: "main", affects: true},
		{pin: Pin{Kind: Tag, Value: "v1.0.0"}, ref: "refs/tags/v1.0.1", deflt: "main"},
		{pin: Pin{Kind: Tag, Value: "v1.0.0"}, ref: "refs/heads/v1.0.0", deflt: "main"},
		{pin: Pin{Kind: Semver, Value: ">=1.0.0"}, ref: "refs/tags/anything", deflt: "main", affects: true},
		{pin: Pin{Kind: Semver, Value: ">=1.0.0"}, ref: "refs/heads/main", deflt: "main"},
		{pin: Pin{Kind: Release, Value: "latest"}, ref: "refs/tags/v2", deflt: "main", affects: true},
		{pin: Pin{Kind: Release, Value: "latest"}, ref: "refs/heads/main", deflt: "main"},
		{pin: Pin{Kind: Commit, Value: frozen}, ref: "refs/heads/main", deflt: "main"},
		{pin: Pin{Kind: Commit, Value: frozen}, ref: "refs/tags/v1", deflt: "main"},
		{pin: Pin{Kind: Branch, Value: "main"}, ref: "refs/pull/1/head", deflt: "main"},
	}
	for _, tt := range tests {
		if got := tt.pin.MovedBy(tt.ref, tt.deflt); got != tt.affects {
			t.Errorf("%s, ref %q (default %q): got %v, want %v", tt.pin, tt.ref, tt.deflt, got, tt.affects)
		}
	}
	// A pin written with its refs/ prefix is moved by its ref (config
	// strips the prefix when it parses the pin).
	for _, c := range [][3]string{{"branch", "refs/heads/main", "refs/heads/main"}, {"tag", "refs/tags/v1.0.0", "refs/tags/v1.0.0"}} {
		p, err := ParsePin(c[0], c[1])
		if err != nil || !p.MovedBy(c[2], "main") {
			t.Errorf("ParsePin(%q, %q) = %v, %v; want a pin moved by %s", c[0], c[1], p, err, c[2])
		}
	}
}

func TestIsCommitID(t *testing.T) {
	for s, want := range map[string]bool{
		strings.Repeat("0", 40):  true,
		strings.Repeat("af", 20): true,
		strings.Repeat("AF", 20): false,
		strings.Repeat("0", 39):  false,
		strings.Repeat("0", 64):  false,
		"":                       false,
	} {
		if IsCommitID(s) != want {
			t.Errorf("IsCommitID(%q) = %v", s, !want)
		}
	}
}
