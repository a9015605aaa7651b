package releases

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCompareVersions(t *testing.T) {
	// semver.org's precedence example, in order.
	ordered := []string{
		"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "1.10.0", "2.0.0",
	}
	for i := range ordered {
		for j := range ordered {
			cmp, ok := compareVersions(ordered[i], ordered[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if !ok || cmp != want {
				t.Errorf("compare(%s, %s) = %d %v, want %d", ordered[i], ordered[j], cmp, ok, want)
			}
		}
	}
	if cmp, ok := compareVersions("1.0.0+a", "1.0.0+b"); !ok || cmp != 0 {
		t.Errorf("build metadata must not count: %d %v", cmp, ok)
	}
	if _, ok := compareVersions("1.0", "1.0.0"); ok {
		t.Error("non-version compared")
	}
	// Numbers beyond 64 bits are valid versions but not ordered: Put then
	// asks GitHub instead of deciding.
	if _, ok := compareVersions("99999999999999999999999.0.0", "1.0.0"); ok {
		t.Error("a version beyond 64-bit numbers was ordered")
	}
}

func TestRetryAt(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	cases := []struct {
		name string
		h    http.Header
		want time.Time
	}{
		{"Retry-After seconds", h("Retry-After", "120"), now.Add(2 * time.Minute)},
		{"Retry-After wins over reset", h("Retry-After", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1735693200"), now.Add(5 * time.Second)},
		{"reset when spent", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1735691400"), now.Add(30 * time.Minute)},
		{"neither: a minute", h(), now.Add(time.Minute)},
		{"reset in the past: a second", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1000"), now.Add(time.Second)},
		{"absurd Retry-After capped", h("Retry-After", "99999999999"), now.Add(maxRetryWait)},
		{"absurd reset capped", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999"), now.Add(maxRetryWait)},
		{"garbage: a minute", h("Retry-After", "soon"), now.Add(time.Minute)},
	}
	for _, tc := range cases {
		if got := retryAt(tc.h, now); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestResponseBodiesAreBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 100))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		limit   int64
		wantErr error
	}{{100, nil}, {1000, nil}, {99, errBodyTooLarge}} {
		hc := &http.Client{Transport: limitedTransport{base: http.DefaultTransport, limit: tc.limit}}
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && len(b) != 100) {
			t.Errorf("limit %d: read %d bytes, err %v", tc.limit, len(b), err)
		}
	}
}
