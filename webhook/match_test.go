package webhook

import (
	"slices"
	"testing"

	"github.com/skillreg/skillreg/gitref"
)

func TestSameRepo(t *testing.T) {
	repo := func(raw string) gitref.Repo {
		r, err := gitref.ParseRepo(raw)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	targets := []Target{
		{Source: "https", Repo: repo("https://github.com/Codertocat/Hello-World.git")},
		{Source: "lower", Repo: repo("https://github.com:443/codertocat/hello-world/")},
		{Source: "ghe", Repo: repo("https://ghe.example.com/Codertocat/Hello-World.git")},
		{Source: "other", Repo: repo("https://github.com/Codertocat/Hello-World-2.git")},
		{Source: "empty"},
	}
	byURL := repository{urls: []string{"https://github.com/Codertocat/Hello-World.git"}}
	bySSH := repository{urls: []string{"git@github.com:Codertocat/Hello-World.git"}}
	byName := repository{fullName: "Codertocat/Hello-World"}
	tests := []struct {
		name string
		repo repository
		host string
		want []string
	}{
		{"clone url", byURL, "github.com", []string{"https", "lower"}},
		{"ssh url", bySSH, "github.com", []string{"https", "lower"}},
		{"full name on github.com", byName, "github.com", []string{"https", "lower"}},
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
