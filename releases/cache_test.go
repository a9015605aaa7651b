package releases_test

import (
	"errors"
	"testing"
	"time"

	"github.com/skillreg/skillreg/releases"
)

func TestCachedRoundTrip(t *testing.T) {
	cases := []releases.Cached{
		{},
		{RetryNotBefore: epoch},
		{FetchedAt: epoch},
		{FetchedAt: epoch, ETag: `"abc"`},
		{Tag: "v1.3.0", HTMLURL: "https://github.com/o/r/releases/tag/v1.3.0", PublishedAt: epoch.Add(-time.Hour), ETag: `W/"x"`, FetchedAt: epoch, RetryNotBefore: epoch.Add(time.Minute)},
	}
	for _, c := range cases {
		b, err := releases.MarshalCached(c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		got, err := releases.UnmarshalCached(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got.Tag != c.Tag || got.HTMLURL != c.HTMLURL || got.ETag != c.ETag || !got.PublishedAt.Equal(c.PublishedAt) ||
			!got.FetchedAt.Equal(c.FetchedAt) || !got.RetryNotBefore.Equal(c.RetryNotBefore) {
			t.Errorf("round trip %+v -> %s -> %+v", c, b, got)
		}
	}
}

func TestCachedRejectsNonsense(t *testing.T) {
	invalid := []releases.Cached{
		{Tag: "v1"},
		{FetchedAt: epoch, Tag: "v1"},
		{FetchedAt: epoch, HTMLURL: "https://x.test/"},
		{FetchedAt: epoch, Tag: "v 1", HTMLURL: "https://x.test/"},
		{FetchedAt: epoch, Tag: "v1", HTMLURL: "https://user:pw@x.test/"},
		{FetchedAt: epoch, Tag: "v1", HTMLURL: "/relative"},
		{FetchedAt: epoch, ETag: "\"a\nb\""},
	}
	for _, c := range invalid {
		if err := c.Validate(); !errors.Is(err, releases.ErrCorruptCache) {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
		if _, err := releases.MarshalCached(c); err == nil {
			t.Errorf("MarshalCached(%+v) accepted", c)
		}
	}
	for _, raw := range []string{"", "null", "[]", `{"v":1}{"v":1}`, `{"v":"1"}`, `{"v":1,"fetched_at":"yesterday"}`} {
		if _, err := releases.UnmarshalCached([]byte(raw)); !errors.Is(err, releases.ErrCorruptCache) {
			t.Errorf("UnmarshalCached(%q) = %v", raw, err)
		}
	}
}

func TestVersionFromTag(t *testing.T) {
	cases := map[string]string{
		"v1.3.0":                "1.3.0",
		"1.3.0":                 "1.3.0",
		"v0.0.1":                "0.0.1",
		"v2.0.0-rc.1":           "2.0.0-rc.1",
		"v1.0.0-alpha+001":      "1.0.0-alpha+001",
		"v1.0.0+20130313144700": "1.0.0+20130313144700",
		"V1.3.0":                "",
		"vv1.3.0":               "",
		"v1.3":                  "",
		"v01.3.0":               "",
		"v1.3.0-01":             "",
		"release-7":             "",
		"":                      "",
		"v":                     "",
		"v1.3.0 ":               "",
		"v1.3.0\n":              "",
	}
	for tag, want := range cases {
		if got := releases.VersionFromTag(tag); got != want {
			t.Errorf("VersionFromTag(%q) = %q, want %q", tag, got, want)
		}
	}
}
