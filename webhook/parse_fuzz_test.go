package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/deepjson"
	"github.com/skillreg/skillreg/jsonbound"
)

// The events parse reads field by field, and one it only checks.
// (installation_repositories shares installation's decoder, and has the
// real payloads and hostile seeds of its own below.)
var fuzzEvents = []string{"ping", "push", "create", "delete", "release", "repository",
	"installation", "issues"}

// maxParseAlloc bounds what one parse of a payload within the bounds may
// allocate. The worst case is a push whose commits are MaxPayloadTokens/2
// empty objects, each decoded into a go-github struct: 93 MiB measured
// (without the token bound, a 25 MiB body of them took 1.5 GB).
const maxParseAlloc = 128 << 20

// payloadSeeds are the real payloads of testdata, and payloads carrying
// every dangerous shape (depths around 64, 1,000 and at 2,000,000; huge
// arrays; a long string) where the event's decoder walks it: small shapes in
// every event, large ones in a ping (decoded), an issues event (only
// checked) and a push's commits (decoded into a slice of structs), so that
// the fuzzer's baseline over the corpus stays within seconds.
func payloadSeeds(tb testing.TB) map[string][][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("testdata: %v", err)
	}
	seeds := map[string][][]byte{}
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		event, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(name), ".json"), "-")
		seeds[event] = append(seeds[event], body)
	}
	for _, s := range deepjson.Shapes() {
		events := fuzzEvents
		if len(s.JSON) > 64<<10 {
			events = []string{"ping", "issues"}
		}
		for _, event := range events {
			seeds[event] = append(seeds[event], deepjson.Embed(seeds[event][0], "x", s.JSON))
		}
		seeds["push"] = append(seeds["push"], deepjson.Embed(seeds["push"][0], "commits", s.JSON))
		if len(s.JSON) <= 64<<10 {
			seeds["push"] = append(seeds["push"], s.JSON)
		}
	}
	// Organisation events whose repositories are where the checks of
	// names and ids look: missing, negative, of the wrong type, paths.
	seeds["repository"] = append(seeds["repository"],
		[]byte(`{"action":"renamed","repository":{"id":-1,"full_name":"a/b"}}`),
		[]byte(`{"action":"transferred","repository":{"id":1,"full_name":"a/b","name":"b","owner":{"login":"a"}},"changes":{"owner":{"from":{"organization":{"login":"../x"}}}}}`),
		[]byte(`{"action":"deleted","repository":{"id":"1","full_name":["a/b"]}}`),
		[]byte(`{"action":"archived","repository":{"id":1,"full_name":"a/b/c","topics":[null,1]}}`))
	seeds["installation"] = append(seeds["installation"],
		[]byte(`{"action":"created","installation":{"id":1,"account":{"login":"a"}},"repositories":[{"id":0,"full_name":"a/b"},null]}`),
		[]byte(`{"action":"deleted","installation":{"id":1,"account":null},"repositories":{}}`))
	seeds["installation_repositories"] = append(seeds["installation_repositories"],
		[]byte(`{"action":"removed","installation":{"id":9,"account":{"login":"a"}},"repositories_removed":[{"id":2,"full_name":"a/"}]}`),
		manyRepos(10000))
	// The most an installation payload within the bounds could make a
	// decoder allocate: half a million repositories (469 MiB through
	// go-github's Repository, 83 MiB through the handler's own structs).
	for _, event := range []string{"installation", "installation_repositories"} {
		key := map[string]string{"installation": "repositories", "installation_repositories": "repositories_added"}[event]
		action := map[string]string{"installation": "created", "installation_repositories": "added"}[event]
		seeds[event] = append(seeds[event], []byte(`{"action":"`+action+`","installation":{"id":1,"account":{"login":"acme"}},"`+key+`":`+
			string(deepjson.EmptyObjects(MaxPayloadTokens/2-1000))+`}`))
	}
	// The most a payload within the bounds makes go-github allocate.
	seeds["push"] = append(seeds["push"], deepjson.Embed(seeds["push"][0], "commits", deepjson.EmptyObjects(MaxPayloadTokens/2-1000)))
	return seeds
}

// asFormBody is a form whose payload field holds b: unescaped when b needs
// no escaping in a query (the shapes: brackets, quotes, digits, letters),
// so that a deep seed stays its own size, else encoded as GitHub does.
func asFormBody(b []byte) []byte {
	if !bytes.ContainsAny(b, "&%+;# \n") {
		return append([]byte(formPayloadField+"="), b...)
	}
	return []byte(url.Values{formPayloadField: {string(b)}}.Encode())
}

// checkParse is what both fuzz targets assert for one body: parse never
// panics; a payload over a bound is refused with errTooComplex wrapping the
// jsonbound error, before any decoder ran (it allocates no more than the
// form's copies of the body); and a payload within the bounds allocates at
// most maxParseAlloc.
func checkParse(t *testing.T, event, contentType string, body, raw []byte) {
	overFields := contentType == contentTypeForm && strings.Count(string(body), "&")+1 > MaxFormFields
	boundErr := jsonbound.Check(raw, payloadLimits)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := parse(event, contentType, body)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc

	switch {
	case overFields:
		if !errors.Is(err, errTooComplex) {
			t.Fatalf("a form of more than %d fields: %v, want errTooComplex", MaxFormFields, err)
		}
	case raw != nil && boundErr != nil:
		if !errors.Is(err, errTooComplex) {
			t.Fatalf("a payload over the bounds (%v): %v, want errTooComplex", boundErr, err)
		}
		for _, which := range []error{jsonbound.ErrTooDeep, jsonbound.ErrTooManyTokens} {
			if errors.Is(err, which) != errors.Is(boundErr, which) {
				t.Fatalf("the refusal %q does not name the bound broken (%v)", err, boundErr)
			}
		}
		if status, outcome := httpStatus(err); status != 400 || outcome != OutcomeTooComplex {
			t.Fatalf("mapped to %d %s, want 400 %s", status, outcome, OutcomeTooComplex)
		}
	}
	if (overFields || boundErr != nil) && alloc > uint64(3*len(body))+1<<20 {
		t.Fatalf("a refused body of %d bytes allocated %d bytes: a decoder ran before the bound", len(body), alloc)
	}
	if alloc > maxParseAlloc {
		t.Fatalf("parse of %d bytes allocated %d bytes", len(body), alloc)
	}
}

// FuzzParseJSON fuzzes parse for application/json bodies.
func FuzzParseJSON(f *testing.F) {
	for event, bodies := range payloadSeeds(f) {
		for _, b := range bodies {
			f.Add(event, b)
		}
	}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		checkParse(t, event, contentTypeJSON, body, body)
	})
}

// FuzzParseForm fuzzes parse for application/x-www-form-urlencoded bodies:
// the payload field holds the JSON, and a form may carry many fields.
func FuzzParseForm(f *testing.F) {
	// The form only wraps the payload: its large seeds are the JSON
	// target's in a ping, and the field bound's neighbours.
	for event, bodies := range payloadSeeds(f) {
		for _, b := range bodies {
			if len(b) <= 64<<10 || event == "ping" {
				f.Add(event, asFormBody(b))
			}
		}
	}
	f.Add("push", []byte(strings.Repeat("a=1&", MaxFormFields-1)+"payload={}"))
	f.Add("push", []byte(strings.Repeat("a=1&", MaxFormFields)+"payload={}"))
	f.Add("push", []byte(strings.Repeat("&", 1<<20)))
	f.Add("ping", []byte("payload="+strings.Repeat("%5B", 2_000_000)))
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		// A form over the field bound is never parsed (checkParse checks
		// that parse refuses it first).
		var raw []byte
		if strings.Count(string(body), "&") < MaxFormFields {
			if form, err := url.ParseQuery(string(body)); err == nil && form.Has(formPayloadField) {
				raw = []byte(form.Get(formPayloadField))
			}
		}
		checkParse(t, event, contentTypeForm, body, raw)
	})
}

// manyRepos is an installation_repositories payload adding n valid
// repositories: all of them reach Discovery in one event.
func manyRepos(n int) []byte {
	b := []byte(`{"action":"added","installation":{"id":1,"account":{"login":"acme"}},"repositories_added":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"id":%d,"full_name":"acme/r%d","private":true}`, i+1, i)
	}
	return append(b, "]}"...)
}
