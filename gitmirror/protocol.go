package gitmirror

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Bounds of one upload-pack request.
const (
	MaxRequestBytes = 1 << 20 // the body, after gzip
	MaxWants        = 256
	MaxHaves        = 4096
	MaxDepth        = 1 << 20
	maxPktLine      = 65520
)

// ErrProtocol is a request that does not follow git's protocol or
// exceeds its bounds.
var ErrProtocol = errors.New("git protocol error")

// pkt-line special packets.
const (
	pktFlush = -1
	pktDelim = -2
	pktEnd   = -3
)

// readPkt returns the next pkt-line of b: its payload, or a special
// packet's code, and the rest.
func readPkt(b []byte) (payload []byte, special int, rest []byte, err error) {
	if len(b) < 4 {
		return nil, 0, nil, fmt.Errorf("%w: truncated pkt-line", ErrProtocol)
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("%w: bad pkt-line length %q", ErrProtocol, b[:4])
	}
	switch n {
	case 0:
		return nil, pktFlush, b[4:], nil
	case 1:
		return nil, pktDelim, b[4:], nil
	case 2:
		return nil, pktEnd, b[4:], nil
	case 3:
		return nil, 0, nil, fmt.Errorf("%w: pkt-line length 3", ErrProtocol)
	}
	if int(n) > maxPktLine || int(n) > len(b) {
		return nil, 0, nil, fmt.Errorf("%w: pkt-line of %d bytes exceeds the request", ErrProtocol, n)
	}
	return b[4:n], 0, b[n:], nil
}

// pkt encodes one pkt-line.
func pkt(s string) []byte {
	return fmt.Appendf(nil, "%04x%s", len(s)+4, s)
}

// Command is one protocol v2 request.
type Command struct {
	Name string   // "ls-refs" or "fetch"
	Caps []string // capability lines before the delimiter
	Args []string // argument lines after it
}

// ParseCommand parses a protocol v2 request body: "command=NAME",
// capabilities, a delimiter, arguments and a flush.
func ParseCommand(body []byte) (*Command, error) {
	c := &Command{}
	inArgs := false
	for first := true; ; first = false {
		line, special, rest, err := readPkt(body)
		if err != nil {
			return nil, err
		}
		body = rest
		switch special {
		case pktFlush:
			if first {
				return nil, fmt.Errorf("%w: empty request", ErrProtocol)
			}
			if len(body) != 0 {
				return nil, fmt.Errorf("%w: data after the request", ErrProtocol)
			}
			if c.Name == "" {
				return nil, fmt.Errorf("%w: no command", ErrProtocol)
			}
			return c, nil
		case pktDelim:
			if inArgs {
				return nil, fmt.Errorf("%w: two delimiters", ErrProtocol)
			}
			inArgs = true
			continue
		case pktEnd:
			return nil, fmt.Errorf("%w: unexpected response-end packet", ErrProtocol)
		}
		s := strings.TrimSuffix(string(line), "\n")
		switch {
		case inArgs:
			if len(c.Args) >= MaxWants+MaxHaves+64 {
				return nil, fmt.Errorf("%w: too many arguments", ErrProtocol)
			}
			c.Args = append(c.Args, s)
		case first:
			name, ok := strings.CutPrefix(s, "command=")
			if !ok {
				return nil, fmt.Errorf("%w: the request does not start with command=", ErrProtocol)
			}
			c.Name = name
		default:
			if len(c.Caps) >= 64 {
				return nil, fmt.Errorf("%w: too many capabilities", ErrProtocol)
			}
			c.Caps = append(c.Caps, s)
		}
	}
}

// FetchRequest is a parsed fetch command.
type FetchRequest struct {
	Wants, Haves, Shallows []string
	Depth                  int
	Done, NoProgress       bool
}

// addID appends an object id of a want, have or shallow line, within the
// bounds of its kind.
func (r *FetchRequest) addID(kind, id string) error {
	list, limit := &r.Wants, MaxWants
	switch kind {
	case "have":
		list, limit = &r.Haves, MaxHaves
	case "shallow":
		list, limit = &r.Shallows, MaxHaves
	}
	if len(*list) >= limit {
		return fmt.Errorf("%w: more than %d %s lines", ErrProtocol, limit, kind)
	}
	if !isID(id) {
		return fmt.Errorf("%w: %s %q is not an object id", ErrProtocol, kind, id)
	}
	*list = append(*list, id)
	return nil
}

// parseDepth reads a deepen line's depth.
func parseDepth(val string) (int, error) {
	n, err := strconv.Atoi(val)
	if err != nil || n <= 0 || n > MaxDepth {
		return 0, fmt.Errorf("%w: deepen %q is not a depth from 1 to %d", ErrProtocol, val, MaxDepth)
	}
	return n, nil
}

// ParseFetch checks a fetch command's arguments.
func ParseFetch(c *Command) (*FetchRequest, error) {
	r := &FetchRequest{}
	for _, a := range c.Args {
		key, val, _ := strings.Cut(a, " ")
		switch key {
		case "want", "have", "shallow":
			if err := r.addID(key, val); err != nil {
				return nil, err
			}
		case "deepen":
			n, err := parseDepth(val)
			if err != nil {
				return nil, err
			}
			r.Depth = n
		case "done":
			r.Done = true
		case "no-progress":
			r.NoProgress = true
		case "thin-pack", "ofs-delta", "include-tag", "deepen-relative":
			// Harmless: no deltas are sent and there are no tags.
		default:
			return nil, fmt.Errorf("%w: unsupported fetch argument %q", ErrProtocol, key)
		}
	}
	if len(r.Wants) == 0 {
		return nil, fmt.Errorf("%w: fetch without a want", ErrProtocol)
	}
	return r, nil
}

func isID(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && s == strings.ToLower(s)
}

// advertisement is the protocol v2 capability advertisement.
func advertisement() []byte {
	var b bytes.Buffer
	b.Write(pkt("# service=git-upload-pack\n"))
	b.WriteString("0000")
	for _, l := range []string{"version 2", "agent=skillreg", "ls-refs", "fetch=shallow", "object-format=sha1"} {
		b.Write(pkt(l + "\n"))
	}
	b.WriteString("0000")
	return b.Bytes()
}

// checkCaps refuses capabilities the advertisement did not offer: a
// client only sends what it was offered.
func checkCaps(caps []string) error {
	for _, c := range caps {
		key, val, _ := strings.Cut(c, "=")
		switch key {
		case "agent":
		case "object-format":
			if val != "sha1" {
				return fmt.Errorf("%w: object format %q is not served", ErrProtocol, val)
			}
		default:
			return fmt.Errorf("%w: capability %q was not offered", ErrProtocol, key)
		}
	}
	return nil
}
