package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// Answer is the raw bytes a RawServer answers one method with: what no SDK
// server would send (JSON nested millions of levels deep, a body over any
// bound), written straight to the connection.
type Answer struct {
	// Method is the JSON-RPC method whose answer is replaced ("initialize",
	// "skills/list", "resources/read", ...). Every other request goes to
	// the honest server behind.
	Method string
	// URI, when set, narrows Method to the requests whose params.uri is
	// URI (one resource's read).
	URI string
	// Result is the raw JSON of the result member.
	Result []byte
	// Pad, when > 0, adds that many spaces inside the answer (streamed,
	// never held in memory): a valid but oversized body.
	Pad int64
	// SSE answers as a text/event-stream of one event instead of
	// application/json.
	SSE bool
}

// RawServer is an MCP endpoint in front of a Server that answers one
// method with raw bytes; the rest of the conversation is the Server's.
type RawServer struct {
	// URL is the MCP endpoint.
	URL string
	// Answered counts the requests answered with the raw bytes.
	Answered atomic.Int64
}

// NewRaw starts a RawServer on loopback in front of inner; it stops when
// the test ends.
func NewRaw(tb testing.TB, inner *Server, a Answer) *RawServer {
	tb.Helper()
	target, err := url.Parse(inner.URL)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	rs := &RawServer{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				URI string `json:"uri"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.Unmarshal(body, &msg) != nil || msg.Method != a.Method || msg.ID == nil || (a.URI != "" && msg.Params.URI != a.URI) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			proxy.ServeHTTP(w, r)
			return
		}
		rs.Answered.Add(1)
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":`, msg.ID)
		parts := []io.Reader{strings.NewReader(head), bytes.NewReader(a.Result), &spaces{left: a.Pad}, strings.NewReader("}")}
		if a.SSE {
			w.Header().Set("Content-Type", "text/event-stream")
			parts = append(append([]io.Reader{strings.NewReader("event: message\ndata: ")}, parts...), strings.NewReader("\n\n"))
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(http.StatusOK)
		// The client may hang up once a bound breaks.
		_, _ = io.Copy(w, io.MultiReader(parts...))
	}))
	tb.Cleanup(ts.Close)
	rs.URL = ts.URL + target.Path
	return rs
}

// spaces reads as left spaces.
type spaces struct{ left int64 }

func (s *spaces) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), s.left))
	for i := range n {
		p[i] = ' '
	}
	s.left -= int64(n)
	return n, nil
}
