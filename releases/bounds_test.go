package releases

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/deepjson"
	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/jsonbound"
)

var answerLimits = jsonbound.Limits{MaxDepth: maxBodyDepth, MaxTokens: maxBodyValues}

// realAnswer is the body GitHub (the fake, which answers as GitHub does)
// gives for a repository's latest release.
func realAnswer(tb testing.TB) []byte {
	tb.Helper()
	gh := fakegithub.New(fakegithub.Options{})
	defer gh.Close()
	gh.Publish("acme/tools", fakegithub.Release{TagName: "v1.2.3", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	resp, err := http.Get(gh.URL + "/repos/acme/tools/releases/latest")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !bytes.HasPrefix(b, []byte("{")) {
		tb.Fatalf("fake GitHub: %d %q %v", resp.StatusCode, b, err)
	}
	return b
}

// TestAnswerBounds: an API answer nested deeper than maxBodyDepth, with
// more than maxBodyValues values, or over maxBodyBytes, from a real
// loopback server, fails the lookup with ErrUnavailable naming the bound
// (nothing is cached, the lookup backs off as for any bad answer); one
// level less is a release as before.
func TestAnswerBounds(t *testing.T) {
	good := realAnswer(t)
	cases := []struct {
		name   string
		status int
		body   []byte
		bound  error // nil: the release is served
	}{
		{"at the depth bound", 200, deepjson.Embed(good, "x", deepjson.Arrays(maxBodyDepth-1)), nil},
		{"over the depth bound", 200, deepjson.Embed(good, "x", deepjson.Arrays(maxBodyDepth)), jsonbound.ErrTooDeep},
		{"1,001 deep", 200, deepjson.Embed(good, "x", deepjson.Arrays(1001)), jsonbound.ErrTooDeep},
		{"2,000,000 deep", 200, deepjson.Embed(good, "x", deepjson.Arrays(2_000_000)), jsonbound.ErrTooDeep},
		{"2,000,000 objects deep", 200, deepjson.Embed(good, "assets", deepjson.Objects(2_000_000)), jsonbound.ErrTooDeep},
		{"a million assets", 200, deepjson.Embed(good, "assets", deepjson.EmptyObjects(1<<20)), jsonbound.ErrTooManyTokens},
		{"assets within the value bound", 200, deepjson.Embed(good, "assets", deepjson.EmptyObjects(maxBodyValues/2-200)), nil},
		{"over the size bound", 200, deepjson.Embed(good, "body", deepjson.String(maxBodyBytes)), errBodyTooLarge},
		{"a long string within the size bound", 200, deepjson.Embed(good, "body", deepjson.String(maxBodyBytes-len(good)-16)), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(c.status)
				_, _ = w.Write(c.body)
			}))
			defer srv.Close()
			store := NewMemoryStore()
			// A generous timeout: the 8 MiB answers are slow under -race.
			cl, err := New(Options{APIURL: srv.URL + "/", Store: store, Timeout: 5 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			rel, err := cl.Latest(context.Background(), "acme/tools")
			if c.bound == nil {
				if err != nil || rel.Tag != "v1.2.3" {
					t.Fatalf("Latest = %+v, %v; want v1.2.3", rel, err)
				}
				return
			}
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, c.bound) {
				t.Fatalf("Latest = %+v, %v; want ErrUnavailable and %v", rel, err, c.bound)
			}
			if msg := err.Error(); !strings.Contains(msg, c.bound.Error()) || len(msg) > 200 {
				t.Errorf("the error does not name the bound clearly: %.300s", msg)
			}
			if _, ok, _ := store.LoadRelease("acme/tools"); ok {
				t.Error("a refused answer was cached")
			}
		})
	}
}

// roundTripFunc answers requests without a network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// maxRequestAlloc bounds what one lookup within the bounds may allocate:
// 20 MiB measured for maxBodyValues/2 empty assets decoded into go-github
// structs, 40 MiB for a string of nearly maxBodyBytes (copied a few times
// on the way).
const maxRequestAlloc = 96 << 20

// FuzzReleaseAnswer fuzzes the decoding of a releases/latest answer, the
// whole way request takes it (pull's transport bounds, go-github's
// decoder, the checks after): no panic; an answer over the bounds is a
// ResultError naming the bound, found before the decoder allocates for it;
// any answer allocates boundedly.
func FuzzReleaseAnswer(f *testing.F) {
	good := realAnswer(f)
	for _, status := range []int{200, 304, 403, 404, 500} {
		f.Add(status, good)
	}
	for _, s := range deepjson.Shapes() {
		f.Add(200, s.JSON)
		f.Add(200, deepjson.Embed(good, "x", s.JSON))
		if len(s.JSON) < 64<<10 {
			f.Add(200, deepjson.Embed(good, "assets", s.JSON))
			f.Add(200, deepjson.Embed(good, "author", s.JSON))
			f.Add(404, deepjson.Embed([]byte(`{"message":"Not Found"}`), "errors", s.JSON))
			f.Add(403, deepjson.Embed([]byte(`{"message":"API rate limit exceeded"}`), "x", s.JSON))
		}
	}
	f.Add(200, deepjson.Embed(good, "assets", deepjson.EmptyObjects(maxBodyValues/2-200)))

	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 200 || status > 599 {
			status = 200 + (status%400+400)%400
		}
		cl, err := New(Options{APIURL: "http://127.0.0.1:1/", Timeout: 5 * time.Minute, HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
		})}})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		size := error(nil)
		if len(body) > maxBodyBytes {
			size = errBodyTooLarge
		}
		over := jsonbound.Check(body[:min(len(body), maxBodyBytes)], answerLimits)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		o := cl.request(context.Background(), "acme/tools", "", time.Now())
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc

		if status == 200 && (over != nil || size != nil) {
			if o.result != ResultError {
				t.Fatalf("an answer over the bounds (%v, %v) gave %s", over, size, o.result)
			}
			// The decoder reads as the bytes arrive: a syntax error before
			// the point where the bound breaks is found first.
			named := errors.Is(o.err, jsonbound.ErrTooDeep) || errors.Is(o.err, jsonbound.ErrTooManyTokens) || errors.Is(o.err, errBodyTooLarge)
			if !named && json.Valid(body) {
				t.Fatalf("refused with %v, want the bound (%v, %v)", o.err, over, size)
			}
			for _, which := range []error{jsonbound.ErrTooDeep, jsonbound.ErrTooManyTokens} {
				if errors.Is(o.err, which) && !errors.Is(over, which) {
					t.Fatalf("refused with %v, but the bound broken is %v", o.err, over)
				}
			}
			if over != nil && alloc > uint64(4*len(body))+1<<20 {
				t.Fatalf("a refused answer of %d bytes allocated %d bytes: the decoder ran past the bound", len(body), alloc)
			}
		}
		if o.result == ResultOK && (!validTag(o.rel.Tag) || !validPageURL(o.rel.HTMLURL)) {
			t.Fatalf("an invalid release was accepted: %+v", o.rel)
		}
		if alloc > maxRequestAlloc {
			t.Fatalf("an answer of %d bytes allocated %d bytes", len(body), alloc)
		}
	})
}
