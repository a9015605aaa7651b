package gitmirror

import (
	"bufio"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"hash"
	"io"

	"github.com/skillreg/skillreg/catalog"
)

// sideband writes pack bytes as side-band-64k data packets.
type sideband struct {
	w *bufio.Writer
}

const sidebandMax = 65515

func (s sideband) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), sidebandMax)
		if _, err := fmt.Fprintf(s.w, "%04x\x01", c+5); err != nil {
			return n, err
		}
		if _, err := s.w.Write(p[:c]); err != nil {
			return n, err
		}
		n += c
		p = p[c:]
	}
	return n, nil
}

// packObject is one object to send.
type packObject struct {
	id   string
	typ  int
	data []byte           // trees, commits, generated blobs
	file *catalog.FileRef // a served file, read when written
}

// writePack streams a pack of objs (no deltas: memory stays one object
// at a time, whatever the repository's size) to w.
func writePack(ctx context.Context, w io.Writer, cat Catalog, objs []packObject) error {
	h := sha1.New()
	out := io.MultiWriter(w, h)
	var hdr [12]byte
	copy(hdr[:4], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(objs)))
	if _, err := out.Write(hdr[:]); err != nil {
		return err
	}
	zw := zlib.NewWriter(io.Discard)
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return err
		}
		data := o.data
		if o.file != nil {
			b, err := cat.ReadFile(ctx, *o.file)
			if err != nil {
				return fmt.Errorf("read %s: %w", o.file.URI, err)
			}
			if objectID(typeBlob, b) != o.id {
				return fmt.Errorf("read %s: the bytes do not hash to blob %s", o.file.URI, o.id)
			}
			data = b
		}
		if err := writeObjectHeader(out, o.typ, len(data)); err != nil {
			return err
		}
		zw.Reset(out)
		if _, err := zw.Write(data); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
	}
	_, err := w.Write(h.Sum(nil))
	return err
}

func writeObjectHeader(w io.Writer, typ, size int) error {
	var b []byte
	c := byte(typ<<4) | byte(size&0x0f)
	size >>= 4
	for size > 0 {
		b = append(b, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	b = append(b, c)
	_, err := w.Write(b)
	return err
}

var _ hash.Hash = sha1.New()
