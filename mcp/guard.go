package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/jsonbound"
	"github.com/skillreg/skillreg/mcp/fastpath"
)

// Every POST body is checked once, before the fast path or the SDK decodes
// it, for what neither may be left to:
//
//   - its shape (jsonbound): a body nested deeper than the SDK reads
//     (jsonbound.DefaultMaxDepth, the SDK's own bound) never reaches a
//     recursive decoder of ours; the SDK refuses it itself with a linear
//     scan that stops at depth 1,001, so it is handed on untouched and the
//     SDK stays the one that answers it. Two million '[' used to overflow
//     the fast path decoder's stack;
//   - its number of values: the SDK bounds none, and decodes a small body
//     of millions of tiny values into a heap many times its size for one
//     tools/call; more than maxBodyValues, far more than any MCP request
//     carries (tool arguments are capped at 64 KiB, so 32 Ki values), is
//     refused with HTTP 400 the way the SDK refuses an over-deep body;
//   - its JSON-RPC ids: the SDK (go-sdk v1.8.0, jsonrpc2.MakeID) turns every
//     number into an int64 through a float64, so 1.5 came back as 1 and
//     1e300 and 2**70 as -9223372036854775808, and a client matched the
//     answer to another request or to none. An id must be a string or an
//     integer written plainly whose value a float64 holds exactly (at most
//     2**53 in magnitude, and not -0): what the SDK then echoes byte for
//     byte in value. Any other id (a fraction, an exponent, a huge number,
//     null, true, an object, an array) gets -32600 Invalid Request.

// maxBodyValues bounds the values (jsonbound's tokens) of any request body.
const maxBodyValues = 1 << 16

// bodyShape is what the one scan of a body found.
type bodyShape int

const (
	shapeSmall   bodyShape = iota // within the SDK's depth and fastpath.MaxTokens
	shapeLarge                    // within the SDK's depth, more values than the fast path decodes
	shapeDeep                     // deeper than the SDK reads: only the SDK may see it
	shapeTooMany                  // more than maxBodyValues: refused before any decoder
)

// scanShape bounds body's depth and values in one linear, allocation-free
// pass (a second one only for a body past fastpath.MaxTokens, never on
// the fast path).
func scanShape(body []byte) bodyShape {
	err := jsonbound.Check(body, jsonbound.Limits{MaxDepth: jsonbound.DefaultMaxDepth, MaxTokens: fastpath.MaxTokens})
	switch {
	case err == nil:
		return shapeSmall
	case errors.Is(err, jsonbound.ErrTooDeep):
		return shapeDeep
	}
	// Too many values for the fast path: scan on to the bound of any body.
	err = jsonbound.Check(body, jsonbound.Limits{MaxDepth: jsonbound.DefaultMaxDepth, MaxTokens: maxBodyValues})
	switch {
	case err == nil:
		return shapeLarge
	case errors.Is(err, jsonbound.ErrTooDeep):
		return shapeDeep
	}
	return shapeTooMany
}

// writeTooManyValues refuses a body of more than maxBodyValues values, in
// the form the SDK refuses an over-deep one (HTTP 400, plain text).
func writeTooManyValues(w http.ResponseWriter) {
	http.Error(w, fmt.Sprintf("malformed payload: unmarshaling jsonrpc message: json: more than %d values", maxBodyValues), http.StatusBadRequest)
}

// inMemory is a request body that is already in memory, whole (as the
// daemon's front door buffers /mcp bodies): its bytes are used in place.
type inMemory interface{ Bytes() []byte }

// bodyPool recycles request buffers, up to maxPooledBody each (requests
// are small; a large one's buffer is dropped).
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 64 << 10

// serveBody reads the body of a JSON POST once (up to the size limit),
// bounds its shape (refusing more values than any request has), refuses
// an id the SDK would not echo exactly, and lets the fast path (when
// fast) answer it. It reports whether it answered; when it did not,
// r.Body reads the whole body again for the SDK. A request of a session
// this process does not hold is left to the SDK (sessionUnknown). stateless is the
// request's protocol generation, sess the initialized 2025-11-25 session
// it names, if any.
func (s *Server) serveBody(w http.ResponseWriter, r *http.Request, fast, stateless bool, sess *sdk.ServerSession) (answered, tookFast bool) {
	var body []byte
	var err error
	if m, ok := r.Body.(inMemory); ok {
		// A front door holds the whole body already (within its memory
		// budget): read it in place, and give the SDK the same bytes.
		body = m.Bytes()
		r.Body = readCloser{bytes.NewReader(body), r.Body}
	} else {
		buf := bodyPool.Get().(*bytes.Buffer)
		buf.Reset()
		defer func() {
			if buf.Cap() <= maxPooledBody {
				bodyPool.Put(buf)
			}
		}()
		_, err = buf.ReadFrom(io.LimitReader(r.Body, s.o.MaxBodyBytes+1))
		body = buf.Bytes()
		// The SDK reads what was read, then the rest (and answers 413 for
		// an oversized body, or the read error).
		r.Body = readCloser{io.MultiReader(bytes.NewReader(bytes.Clone(body)), r.Body), r.Body}
	}
	if err != nil || int64(len(body)) > s.o.MaxBodyBytes {
		return false, false
	}
	shape := scanShape(body)
	switch shape {
	case shapeDeep:
		return false, false // the SDK refuses it, with its own scan
	case shapeTooMany:
		if s.sessionUnknown(r, stateless, sess) {
			return false, false
		}
		writeTooManyValues(w)
		if s.o.Observe != nil {
			s.o.Observe("other", "error", 0)
		}
		return true, false
	}
	if fast && s.fast != nil && shape == shapeSmall && (stateless || sess != nil) && s.fast.Serve(w, r, sess, body) {
		return true, true
	}
	if badIDs(body) && !s.sessionUnknown(r, stateless, sess) {
		writeInvalidID(w)
		if s.o.Observe != nil {
			s.o.Observe("other", "error", 0)
		}
		return true, false
	}
	return false, false
}

// sessionUnknown reports whether r is a request of a 2025-11-25 session
// this process does not hold (sess, when known, is it): the SDK answers
// that 404 "session not found" before it reads the body, and a client
// re-initializes only on that answer, so none of serveBody's own answers
// may come first. Behind a balancer without affinity, a replica gets the
// requests of the others' sessions. Asked only on the rare path where a
// body check would answer, it walks the SDK's sessions.
func (s *Server) sessionUnknown(r *http.Request, stateless bool, sess *sdk.ServerSession) bool {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" || stateless || sess != nil {
		return false
	}
	for ss := range s.sdk.Sessions() {
		if ss.ID() == id {
			return false
		}
	}
	return true
}

type readCloser struct {
	io.Reader
	io.Closer
}

// isJSONPost reports whether r is a POST of a JSON body, the only request
// whose body the SDK decodes.
func isJSONPost(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Body == nil {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// badIDs reports whether a body within the SDK's depth holds a JSON-RPC
// message (alone or in a batch, read as the SDK reads them: an array of
// messages first, then one message) whose id is present but not one the
// SDK echoes exactly. A body that is not such JSON is left to the SDK's
// own errors.
func badIDs(body []byte) bool {
	var batch []json.RawMessage
	if fastpath.Unmarshal(body, &batch) == nil {
		for _, m := range batch {
			if badID(m) {
				return true
			}
		}
		return false
	}
	return badID(body)
}

func badID(msg []byte) bool {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := fastpath.Parse(msg, &m); err != nil || m.ID == nil {
		return false // not a message, or a notification: the SDK's to answer
	}
	return !exactID(m.ID)
}

// maxExactID is the largest integer a float64 (and so the SDK's id) holds
// exactly, along with every smaller one.
const maxExactID = 1 << 53

// exactID reports whether raw, a JSON value, is an id the SDK echoes with
// the value it was sent: a string, or an integer in canonical decimal
// form (no fraction, exponent, leading zero or -0) of at most 2**53 in
// magnitude.
func exactID(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		return true // a JSON string (the decoder checked it)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n > maxExactID || n < -maxExactID {
		return false
	}
	return strconv.FormatInt(n, 10) == string(raw)
}

// writeInvalidID answers a request whose id breaks exactID: -32600, with
// a null id (the request's cannot be echoed), as HTTP 400 as the SDK
// answers other malformed messages.
func writeInvalidID(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a JSON-RPC id must be a string or an integer of at most 2^53 in magnitude written without fraction or exponent"}}`))
}
