// Package jsonbound bounds the shape of JSON read from the network before
// a decoder sees it: nesting depth and the number of values. Decoders that
// recurse per nesting level (segmentio's, and most others) overflow the
// stack or allocate without limit on a body such as two million '['; a
// linear scan that refuses such a body first keeps the class of bug out of
// every decoder it guards, whatever that decoder does.
//
// The scan does not validate JSON: it only counts brackets and separators
// outside strings, so a malformed body passes it and fails in the decoder
// as before. It never allocates.
package jsonbound

import (
	"errors"
	"fmt"
	"io"
)

// Default bounds. DefaultMaxDepth is the depth at which the official Go
// MCP SDK (and so every Go client) refuses a message; a server must never
// accept or emit deeper JSON than its clients can read.
const (
	DefaultMaxDepth  = 1000
	DefaultMaxTokens = 1 << 20
)

// ErrTooDeep and ErrTooManyTokens say which bound a document broke.
var (
	ErrTooDeep       = errors.New("json nested too deeply")
	ErrTooManyTokens = errors.New("json has too many values")
)

// Limits are the bounds a document must stay within. A zero field takes
// its default.
type Limits struct {
	// MaxDepth is the deepest nesting allowed: 1 admits `[]` and `{}`,
	// 2 admits `[[]]`.
	MaxDepth int
	// MaxTokens bounds the values and member names (roughly: opening
	// brackets, commas and colons, plus one).
	MaxTokens int
}

func (l Limits) depth() int {
	if l.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return l.MaxDepth
}

func (l Limits) tokens() int {
	if l.MaxTokens <= 0 {
		return DefaultMaxTokens
	}
	return l.MaxTokens
}

// Check scans a whole document and reports the first bound it breaks.
func Check(data []byte, l Limits) error {
	var s Scanner
	s.Limits = l
	_, err := s.Write(data)
	return err
}

// Scanner checks a document written to it in pieces (as an io.Writer, for
// io.TeeReader). Once a bound is broken every later Write returns the same
// error. The zero value uses the default limits.
type Scanner struct {
	Limits Limits

	depth    int
	maxSeen  int
	tokens   int
	inString bool
	escape   bool
	err      error
}

// Write scans p, continuing from where the previous Write stopped.
func (s *Scanner) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	maxDepth, maxTokens := s.Limits.depth(), s.Limits.tokens()
	for i, c := range p {
		if s.inString {
			switch {
			case s.escape:
				s.escape = false
			case c == '\\':
				s.escape = true
			case c == '"':
				s.inString = false
			}
			continue
		}
		switch c {
		case '"':
			s.inString = true
		case '[', '{':
			s.depth++
			s.tokens++
			if s.depth > maxDepth {
				s.err = fmt.Errorf("%w: more than %d levels", ErrTooDeep, maxDepth)
				return i, s.err
			}
			s.maxSeen = max(s.maxSeen, s.depth)
		case ']', '}':
			if s.depth > 0 {
				s.depth--
			}
		case ',', ':':
			s.tokens++
		default:
			continue
		}
		if s.tokens >= maxTokens {
			s.err = fmt.Errorf("%w: more than %d", ErrTooManyTokens, maxTokens)
			return i, s.err
		}
	}
	return len(p), nil
}

// MaxDepth is the deepest nesting seen so far.
func (s *Scanner) MaxDepth() int { return s.maxSeen }

// Reader returns a reader that yields r's bytes and fails with the bound's
// error as soon as the bytes read so far break it, so a streaming decoder
// stops before it recurses or allocates past the bound.
func Reader(r io.Reader, l Limits) io.Reader {
	return &reader{r: r, s: Scanner{Limits: l}}
}

type reader struct {
	r io.Reader
	s Scanner
}

func (b *reader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		if k, serr := b.s.Write(p[:n]); serr != nil {
			return k, serr
		}
	}
	return n, err
}
