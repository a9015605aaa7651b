package webhook

import (
	"slices"
	"testing"
)

func TestRepoKey(t *testing.T) {
	want := "github.com/codertocat/hello-world"
	for _, raw := range []string{
		"https://github.com/Codertocat/Hello-World.git",
		"https://github.com/Codertocat/Hello-World",
		"https://github.com/Codertocat/Hello-World/",
		"https://github.com/Codertocat/Hello-World.git/",
		"http://github.com/codertocat/hello-world",
		"https://x-access-token:s3cr3t@github.com/Codertocat/Hello-World.git",
		"https://github.com:443/Codertocat/Hello-World.git",
		"ssh://git@github.com/Codertocat/Hello-World.git",
		"ssh://git@github.com:22/codertocat/hello-world",
		"git@github.com:Codertocat/Hello-World.git",
		"git@GitHub.com:codertocat/hello-world",
		"github.com:Codertocat/Hello-World.git",
		"git://github.com/Codertocat/Hello-World.git",
		"  https://GITHUB.COM/CODERTOCAT/HELLO-WORLD.GIT  ",
		"github.com/Codertocat/Hello-World",
	} {
		if got := repoKey(raw); got != want {
			t.Errorf("repoKey(%q) = %q, want %q", raw, got, want)
		}
	}
	for raw, want := range map[string]string{
		"":                                     "",
		"https://github.com":                   "",
		"https://github.com/":                  "",
		"https://github.com/.git":              "",
		"::::":                                 "",
		"https://ghe.example.com:8443/a/b":     "ghe.example.com/a/b",
		"file:///srv/git/skills.git":           "/srv/git/skills",
		"https://api.github.com/repos/a/b":     "api.github.com/repos/a/b",
		"https://github.com/other/Hello-World": "github.com/other/hello-world",
	} {
		if got := repoKey(raw); got != want {
			t.Errorf("repoKey(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "",
		"github.com":                  "github.com",
		"GitHub.com":                  "github.com",
		"ghe.example.com:8443":        "ghe.example.com",
		"https://ghe.example.com/":    "ghe.example.com",
		"https://GHE.example.com:443": "ghe.example.com",
		"ghe.example.com/api/v3":      "ghe.example.com",
	} {
		if got := hostOf(in); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSameRepo(t *testing.T) {
	targets := []Target{
		{Source: "https", URL: "https://github.com/Codertocat/Hello-World.git"},
		{Source: "scp", URL: "git@github.com:codertocat/hello-world.git"},
		{Source: "ghe", URL: "https://ghe.example.com/Codertocat/Hello-World.git"},
		{Source: "other", URL: "https://github.com/Codertocat/Hello-World-2.git"},
		{Source: "empty", URL: ""},
	}
	byURL := repository{urls: []string{"https://github.com/Codertocat/Hello-World.git"}}
	byName := repository{fullName: "Codertocat/Hello-World"}
	tests := []struct {
		name string
		repo repository
		host string
		want []string
	}{
		{"clone url", byURL, "github.com", []string{"https", "scp"}},
		{"full name on github.com", byName, "github.com", []string{"https", "scp"}},
		{"full name on enterprise", byName, "ghe.example.com", []string{"ghe"}},
		{"nothing known", repository{}, "github.com", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, tg := range sameRepo(targets, tt.repo, tt.host) {
				got = append(got, tg.Source)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRefAffects(t *testing.T) {
	tests := []struct {
		pin     PinKind
		value   string
		ref     string
		deflt   string
		affects bool
	}{
		{PinBranch, "main", "refs/heads/main", "main", true},
		{PinBranch, "refs/heads/main", "refs/heads/main", "main", true},
		{PinBranch, "main", "refs/heads/dev", "main", false},
		{PinBranch, "main", "refs/tags/main", "main", false},
		{PinDefault, "", "refs/heads/main", "main", true},
		{PinDefault, "", "refs/heads/dev", "main", false},
		{PinDefault, "", "refs/heads/dev", "", true},
		{PinDefault, "", "refs/tags/v1", "main", false},
		{PinTag, "v1.0.0", "refs/tags/v1.0.0", "main", true},
		{PinTag, "refs/tags/v1.0.0", "refs/tags/v1.0.0", "main", true},
		{PinTag, "v1.0.0", "refs/tags/v1.0.1", "main", false},
		{PinTag, "v1.0.0", "refs/heads/v1.0.0", "main", false},
		{PinSemver, ">=1.0.0", "refs/tags/anything", "main", true},
		{PinSemver, ">=1.0.0", "refs/heads/main", "main", false},
		{PinRelease, "latest", "refs/tags/v2", "main", true},
		{PinRelease, "latest", "refs/heads/main", "main", false},
		{PinCommit, "6113728f27ae82c7b1a177c8d03f9e96e0adf246", "refs/heads/main", "main", false},
		{PinCommit, "6113728f27ae82c7b1a177c8d03f9e96e0adf246", "refs/tags/v1", "main", false},
		{PinBranch, "main", "refs/pull/1/head", "main", false},
	}
	for _, tt := range tests {
		got := refAffects(Target{Pin: tt.pin, PinValue: tt.value}, tt.ref, tt.deflt)
		if got != tt.affects {
			t.Errorf("%s %q, ref %q (default %q): got %v, want %v", tt.pin, tt.value, tt.ref, tt.deflt, got, tt.affects)
		}
	}
}
