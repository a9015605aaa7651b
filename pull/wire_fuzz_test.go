package pull

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"

	"github.com/skillreg/skillreg/internal/deepjson"
	"github.com/skillreg/skillreg/jsonbound"
)

// maxDecodeAlloc bounds what reading and decoding one response within the
// bounds may allocate. The worst case is a skills/list of 2^19 empty
// entries (the token bound's worth): 141 MiB measured, decoded into each of
// the five wire shapes; without the token bound a 128 MiB body of them
// would take gigabytes.
const maxDecodeAlloc = 256 << 20

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// readResponse reads body as the SDK does, through pull's transport: the
// response bytes, the transport, and the error the read ended with.
func readResponse(body []byte, contentType string, limits jsonbound.Limits) ([]byte, *transport, error) {
	server, _ := url.Parse("http://127.0.0.1/mcp")
	tr := &transport{
		base: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(bytes.NewReader(body))}, nil
		}),
		server: server, max: defaultMaxBytes, limits: limits,
	}
	req, _ := http.NewRequest(http.MethodPost, server.String(), nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return got, tr, err
}

// sseMessages splits an event stream the way the SSE specification says
// (lines end with CRLF, CR or LF; a blank line ends an event; the data lines
// of an event are joined by newlines; one space after the colon is not part
// of the value), keeping the data of an unterminated last event too. It is
// the oracle the eventScanner is checked against.
func sseMessages(body []byte) [][]byte {
	s := strings.ReplaceAll(strings.ReplaceAll(string(body), "\r\n", "\n"), "\r", "\n")
	var msgs [][]byte
	var data []string
	flush := func() {
		if data != nil {
			msgs = append(msgs, []byte(strings.Join(data, "\n")))
		}
		data = nil
	}
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			flush()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		if field == "data" {
			data = append(data, strings.TrimPrefix(value, " "))
		}
	}
	flush()
	return msgs
}

// decodeMessage decodes one message the way the SDK client does
// (segmentio's decoder, the one that overflowed the stack) and then the
// way pull does, into every wire shape.
func decodeMessage(msg []byte) {
	var wire struct {
		Result json.RawMessage `json:"result"`
	}
	dec := func(b []byte, v any) error {
		d := segjson.NewDecoder(bytes.NewReader(b))
		d.DontMatchCaseInsensitiveStructFields()
		return d.Decode(v)
	}
	if dec(msg, &wire) != nil || wire.Result == nil {
		return
	}
	var list listSkillsResult
	var get getSkillResult
	var dir readDirectoryResult
	var read sdk.ReadResourceResult
	var tool sdk.CallToolResult
	var entries []Entry
	if dec(wire.Result, &list) == nil {
		entries = list.Skills
	}
	if dec(wire.Result, &get) == nil && get.Skill != nil {
		entries = append(entries, *get.Skill)
	}
	_ = dec(wire.Result, &dir)
	_ = dec(wire.Result, &read)
	_ = dec(wire.Result, &tool)
	for i, e := range entries {
		if i == 64 {
			break // the checks are per entry; a few show they hold
		}
		if m, err := checkEntry(e); err == nil {
			m.sameEntry(e)
		}
		provenance(e)
	}
}

// checkResponse is what the fuzz target asserts for one response body: no
// panic; a body over a bound fails to read with a typed error, the same
// one the transport keeps for the Client to report (so the SDK, which
// decodes only a body it read whole, never decodes it); a body within the
// bounds reads unchanged and decodes with bounded allocation.
func checkResponse(t *testing.T, body []byte, sse bool) {
	contentType := "application/json"
	var msgs [][]byte
	if sse {
		contentType, msgs = "text/event-stream", sseMessages(body)
	} else {
		msgs = [][]byte{body}
	}
	var over error
	for _, m := range msgs {
		if over = jsonbound.Check(m, jsonbound.Limits{}); over != nil {
			break
		}
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, tr, err := readResponse(body, contentType, jsonbound.Limits{})
	if err == nil {
		for _, m := range msgs {
			decodeMessage(m)
		}
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc

	switch {
	case over != nil:
		if err == nil {
			t.Fatalf("a response over the bounds (%v) was read whole", over)
		}
		for _, which := range []error{jsonbound.ErrTooDeep, jsonbound.ErrTooManyTokens} {
			if errors.Is(err, which) != errors.Is(over, which) {
				t.Fatalf("read failed with %v, want the bound %v", err, over)
			}
		}
		if tr.broken() != err {
			t.Fatalf("the transport keeps %v, the read failed with %v", tr.broken(), err)
		}
	case err != nil:
		t.Fatalf("a response within the bounds failed to read: %v", err)
	case !bytes.Equal(got, body):
		t.Fatalf("the transport changed the body")
	}
	if alloc > maxDecodeAlloc {
		t.Fatalf("a response of %d bytes allocated %d bytes", len(body), alloc)
	}
}

// responseSeeds are results of each method pull calls carrying the
// dangerous shapes where a decoder walks them, and the bare shapes.
func responseSeeds() [][]byte {
	results := []string{
		`{"skills":[{"uri":"skill://acme/pdf/SKILL.md","frontmatter":{"name":"pdf","description":"d"},"resources":[{"uri":"skill://acme/pdf/SKILL.md","digest":"sha256:00","size":1}],"_meta":{"dev.skillreg/provenance":{"repository":"r","commit":"c"}}}],"nextCursor":"2"}`,
		`{"skill":{"uri":"skill://acme/pdf/SKILL.md","frontmatter":{"name":"pdf"},"resources":"dynamic"}}`,
		`{"contents":[{"uri":"skill://acme/pdf/SKILL.md","mimeType":"text/markdown","text":"---\nname: pdf\n---\n"}]}`,
		`{"resources":[{"uri":"skill://acme/pdf/scripts","mimeType":"inode/directory"}],"nextCursor":"x"}`,
		`{"content":[{"type":"text","text":"{\"protocol_version\":1}"}],"structuredContent":{"protocol_version":1}}`,
	}
	message := func(result []byte) []byte {
		return append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), result...), '}')
	}
	var seeds [][]byte
	for _, r := range results {
		seeds = append(seeds, message([]byte(r)))
	}
	for _, s := range deepjson.Shapes() {
		seeds = append(seeds, message(s.JSON))
		if len(s.JSON) < 64<<10 {
			seeds = append(seeds, s.JSON)
		}
		for _, r := range results {
			if len(s.JSON) < 64<<10 {
				seeds = append(seeds, message(deepjson.Embed([]byte(r), "x", s.JSON)))
			}
		}
		// Where pull decodes into a slice of structs.
		seeds = append(seeds, message(deepjson.Embed([]byte(`{}`), "skills", s.JSON)))
	}
	// The most a response within the bounds makes the decoders allocate.
	seeds = append(seeds, message(deepjson.Embed([]byte(`{}`), "skills", deepjson.EmptyObjects(jsonbound.DefaultMaxTokens/2-100))))
	return seeds
}

// FuzzResponseBody fuzzes what pull reads from a server, as
// application/json and as an event stream: the transport's bounds, then
// the SDK's decoder and pull's own.
func FuzzResponseBody(f *testing.F) {
	sse := func(msg []byte) []byte { return append(append([]byte("event: message\ndata: "), msg...), "\n\n"...) }
	for _, s := range responseSeeds() {
		f.Add(s, false)
		if len(s) < 64<<10 {
			f.Add(sse(s), true)
		}
	}
	// The large shapes once each as a stream.
	f.Add(sse(deepjson.Arrays(2_000_000)), true)
	f.Add(sse(deepjson.Array(deepjson.HugeArrayLen)), true)
	f.Add(sse(deepjson.String(deepjson.LongStringLen)), true)
	for _, s := range []string{
		"id: \"\ndata: " + string(deepjson.Arrays(1001)) + "\n\n",
		"data: [[\r\ndata: ]]\r\n\r\ndata: " + string(deepjson.Arrays(1001)) + "\r\r",
		"data:" + strings.Repeat("[", 600) + "\ndata:" + strings.Repeat("[", 600) + "\n\n",
		":" + strings.Repeat("[", 2000) + "\n\ndata: {}\n\n",
		"event: message\ndata: {\"a\":\"\\\"[[[\"}\n\n",
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(checkResponse)
}

// TestEventScanner: the stream's framing never hides a message's brackets
// from the scan, and each event is held to the bounds on its own.
func TestEventScanner(t *testing.T) {
	deep := string(deepjson.Arrays(1001))
	ok := string(deepjson.Arrays(1000))
	tests := []struct {
		name   string
		stream string
		over   bool
	}{
		{"one event at the bound", "data: " + ok + "\n\n", false},
		{"one event over the bound", "data: " + deep + "\n\n", true},
		{"many events at the bound", strings.Repeat("data: "+ok+"\n\n", 50), false},
		{"a quote in the id", "id: \"\ndata: " + deep + "\n\n", true},
		{"a quote in the event name", "event: \"x\ndata: " + deep + "\n\n", true},
		{"a comment with brackets", ":" + deep[:1001] + "\n\ndata: {}\n\n", false},
		{"an unbalanced event, then a deep one", "data: [\"\n\ndata: " + deep + "\n\n", true},
		{"split over data lines", "data:" + deep[:600] + "\ndata:" + deep[600:] + "\n\n", true},
		{"CR line ends", "data: " + deep + "\r\r", true},
		{"CRLF line ends", "data: " + ok + "\r\n\r\ndata: " + ok + "\r\n\r\n", false},
		{"a field named like data", "datum: " + deep + "\n\n", false},
		{"unterminated", "data: " + deep, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if oracle := checkAll(sseMessages([]byte(tt.stream))) != nil; oracle != tt.over {
				t.Fatalf("the oracle says over=%v, the table %v", oracle, tt.over)
			}
			// Whole, and one byte per write.
			for _, step := range []int{len(tt.stream), 1} {
				e := &eventScanner{lineStart: true}
				var err error
				for i := 0; i < len(tt.stream) && err == nil; i += step {
					_, err = e.Write([]byte(tt.stream[i:min(i+step, len(tt.stream))]))
				}
				if (err != nil) != tt.over || (err != nil && !errors.Is(err, jsonbound.ErrTooDeep)) {
					t.Errorf("writes of %d bytes: %v, want over=%v", step, err, tt.over)
				}
			}
		})
	}
}

func checkAll(msgs [][]byte) error {
	for _, m := range msgs {
		if err := jsonbound.Check(m, jsonbound.Limits{}); err != nil {
			return err
		}
	}
	return nil
}
