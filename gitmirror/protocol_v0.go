package gitmirror

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
)

// v0Caps is what a protocol v0/v1 advertisement offers. thin-pack,
// ofs-delta and include-tag cost nothing: no deltas and no tags are sent.
const v0Caps = "multi_ack_detailed no-done side-band-64k shallow no-progress thin-pack ofs-delta include-tag symref=HEAD:refs/heads/main object-format=sha1 agent=skillreg"

var v0Offered = map[string]bool{}

func init() {
	for _, c := range strings.Fields(v0Caps) {
		k, _, _ := strings.Cut(c, "=")
		v0Offered[k] = true
	}
}

// advertisementV0 is the protocol v0 (v1 with version1) ref advertisement.
func advertisementV0(s *served, version1 bool) []byte {
	head := s.gens[0].commit
	var b bytes.Buffer
	b.Write(pkt("# service=git-upload-pack\n"))
	b.WriteString("0000")
	if version1 {
		b.Write(pkt("version 1\n"))
	}
	b.Write(pkt(head + " HEAD\x00" + v0Caps + "\n"))
	b.Write(pkt(head + " refs/heads/main\n"))
	// Where the held history stops, as a shallow repository says it: a
	// v0 client that does not deepen has no other way to learn it.
	if oldest := s.gens[len(s.gens)-1]; oldest.parent != "" {
		b.Write(pkt("shallow " + oldest.commit + "\n"))
	}
	b.WriteString("0000")
	return b.Bytes()
}

// V0Request is a parsed protocol v0/v1 upload-pack request (one round of
// the stateless HTTP exchange).
type V0Request struct {
	FetchRequest
	Caps    map[string]bool
	Flushes int // have batches ended by a flush
}

// ParseV0 parses a v0/v1 upload-pack request body: wants (the first with
// capabilities), shallow and deepen lines, a flush, then have lines in
// batches, each ended by a flush, and perhaps done.
func ParseV0(body []byte) (*V0Request, error) {
	r := &V0Request{Caps: map[string]bool{}}
	wantsDone := false
	for {
		if len(body) == 0 {
			if !wantsDone {
				return nil, fmt.Errorf("%w: request ends before the wants' flush", ErrProtocol)
			}
			break
		}
		line, special, rest, err := readPkt(body)
		if err != nil {
			return nil, err
		}
		body = rest
		if special == pktFlush {
			if !wantsDone {
				wantsDone = true
				continue
			}
			r.Flushes++
			continue
		}
		if special != 0 {
			return nil, fmt.Errorf("%w: unexpected special packet", ErrProtocol)
		}
		s := strings.TrimSuffix(string(line), "\n")
		if r.Done {
			return nil, fmt.Errorf("%w: data after done", ErrProtocol)
		}
		key, val, _ := strings.Cut(s, " ")
		if !wantsDone {
			switch key {
			case "want":
				id, caps, _ := strings.Cut(val, " ")
				if len(r.Wants) == 0 {
					for _, c := range strings.Fields(caps) {
						k, _, _ := strings.Cut(c, "=")
						if !v0Offered[k] {
							return nil, fmt.Errorf("%w: capability %q was not offered", ErrProtocol, k)
						}
						r.Caps[k] = true
					}
				} else if caps != "" {
					return nil, fmt.Errorf("%w: capabilities after the first want", ErrProtocol)
				}
				if err := r.addID("want", id); err != nil {
					return nil, err
				}
			case "shallow":
				if err := r.addID("shallow", val); err != nil {
					return nil, err
				}
			case "deepen":
				n, err := parseDepth(val)
				if err != nil {
					return nil, err
				}
				r.Depth = n
			default:
				return nil, fmt.Errorf("%w: unsupported line %q", ErrProtocol, key)
			}
			continue
		}
		switch key {
		case "have":
			if err := r.addID("have", val); err != nil {
				return nil, err
			}
		case "done":
			r.Done = true
		default:
			return nil, fmt.Errorf("%w: unsupported line %q", ErrProtocol, key)
		}
	}
	if len(r.Wants) == 0 {
		return nil, fmt.Errorf("%w: no want", ErrProtocol)
	}
	return r, nil
}

// uploadPackV0 answers one round of a stateless v0/v1 fetch, as git's
// upload-pack does: the shallow section when deepening; ACK ... common
// for each have in the history; at a flush "ACK ... ready" once a common
// commit is known (the history is short: nothing to gain from more
// rounds), NAK, and with no-done the pack at once; at done the final ACK
// (or NAK) and the pack.
func (h *Handler) uploadPackV0(ctx context.Context, w http.ResponseWriter, s *served, body []byte) error {
	r, err := ParseV0(body)
	if err != nil {
		return &httpError{code: http.StatusBadRequest, msg: err.Error()}
	}
	p, err := plan(s, &r.FetchRequest, h.list(ctx), h.available(ctx))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	bw := bufio.NewWriterSize(w, 64<<10)
	if r.Depth > 0 {
		for _, l := range p.shallow {
			bw.Write(pkt(l + "\n"))
		}
		bw.WriteString("0000")
	}
	band := r.Caps["side-band-64k"]
	for _, c := range p.common {
		bw.Write(pkt("ACK " + c + " common\n"))
	}
	switch {
	case r.Done:
		if len(p.common) > 0 {
			bw.Write(pkt("ACK " + p.common[len(p.common)-1] + "\n"))
		} else {
			bw.Write(pkt("NAK\n"))
		}
		return h.sendPack(ctx, bw, p.objs, band)
	case r.Flushes > 0:
		if len(p.common) > 0 {
			last := p.common[len(p.common)-1]
			bw.Write(pkt("ACK " + last + " ready\n"))
			bw.Write(pkt("NAK\n"))
			if r.Caps["no-done"] {
				bw.Write(pkt("ACK " + last + "\n"))
				return h.sendPack(ctx, bw, p.objs, band)
			}
		} else {
			bw.Write(pkt("NAK\n"))
		}
	}
	return bw.Flush()
}
