package packdb

import (
	"bufio"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
)

// Pack files are git's format, version 2: "PACK", version, object count,
// the objects, then the SHA-1 of everything before it.
const (
	packHeaderLen  = 12
	packTrailerLen = 20
)

// packWriter writes pack entries (whole objects, zlib-compressed) to a
// file, recording each entry's offset and CRC-32 for the index.
type packWriter struct {
	f     *os.File
	bw    *bufio.Writer
	off   int64
	count uint32
	// entries records what the index needs of each entry written.
	entries []idxEntry
	sum     hash.Hash // the pack checksum, when writing from the start
	zw      *zlib.Writer
	crc     hash.Hash32
	header  uint32 // the object count in the header
	buf     []byte // addRaw's copy buffer
}

// newPackWriter starts a pack of count objects in f (which must be empty).
func newPackWriter(f *os.File, count uint32) (*packWriter, error) {
	pw := &packWriter{f: f, bw: bufio.NewWriterSize(f, 256<<10), entries: make([]idxEntry, 0, min(count, preallocEntries)), sum: sha1.New(), crc: crc32.NewIEEE(), header: count}
	pw.zw, _ = zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	var hdr [packHeaderLen]byte
	copy(hdr[:], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], count)
	if _, err := pw.write(hdr[:]); err != nil {
		return nil, err
	}
	return pw, nil
}

// appendToPack prepares to add entries to the complete pack in f: the
// trailer is cut off and rewritten, with the count, by finish.
func appendToPack(f *os.File) (*packWriter, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	end := st.Size() - packTrailerLen
	if end < packHeaderLen {
		return nil, fmt.Errorf("%w: pack of %d bytes", ErrMalformed, st.Size())
	}
	var hdr [packHeaderLen]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, err
	}
	if err := f.Truncate(end); err != nil {
		return nil, err
	}
	if _, err := f.Seek(end, io.SeekStart); err != nil {
		return nil, err
	}
	pw := &packWriter{f: f, bw: bufio.NewWriterSize(f, 256<<10), off: end, crc: crc32.NewIEEE(),
		header: binary.BigEndian.Uint32(hdr[8:])}
	pw.zw, _ = zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	return pw, nil
}

func (pw *packWriter) write(p []byte) (int, error) {
	n, err := pw.bw.Write(p)
	pw.off += int64(n)
	if pw.sum != nil {
		pw.sum.Write(p[:n])
	}
	pw.crc.Write(p[:n])
	return n, err
}

// objectHeader encodes a pack entry header: type and size, 7 bits at a
// time after the first 4.
func objectHeader(t plumbing.ObjectType, size int64) []byte {
	b := []byte{byte(t)<<4 | byte(size&0x0f)}
	size >>= 4
	for size > 0 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
		size >>= 7
	}
	return b
}

// add writes one whole object of the given type and size read from src.
func (pw *packWriter) add(t plumbing.ObjectType, size int64, src io.Reader) error {
	offset := pw.off
	pw.crc.Reset()
	if _, err := pw.write(objectHeader(t, size)); err != nil {
		return err
	}
	h := plumbing.NewHasher(t, size)
	pw.zw.Reset(writerFunc(pw.write))
	n, err := io.Copy(io.MultiWriter(pw.zw, h), src)
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%w: object of %d bytes read as %d", ErrCorrupt, size, n)
	}
	if err := pw.zw.Close(); err != nil {
		return err
	}
	pw.count++
	pw.entries = append(pw.entries, idxEntry{id: h.Sum(), crc: pw.crc.Sum32(), off: offset})
	return nil
}

// addRaw copies one entry verbatim from another pack, checking it
// against the CRC-32 recorded for it there.
func (pw *packWriter) addRaw(id plumbing.Hash, src io.Reader, wantCRC uint32) error {
	offset := pw.off
	pw.crc.Reset()
	if pw.buf == nil {
		pw.buf = make([]byte, 32<<10) // io.Copy would allocate one per entry
	}
	if _, err := io.CopyBuffer(writerFunc(pw.write), src, pw.buf); err != nil {
		return err
	}
	if got := pw.crc.Sum32(); got != wantCRC {
		return fmt.Errorf("%w: entry of %s fails its CRC check", ErrCorrupt, id)
	}
	pw.count++
	pw.entries = append(pw.entries, idxEntry{id: id, crc: wantCRC, off: offset})
	return nil
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// finish writes the trailer (when appending, after fixing the count and
// re-hashing the file), flushes, and returns the pack's checksum.
func (pw *packWriter) finish() (plumbing.Hash, error) {
	var sum plumbing.Hash
	if err := pw.bw.Flush(); err != nil {
		return sum, err
	}
	if pw.sum == nil { // appending: patch the count, re-hash the file
		var cnt [4]byte
		binary.BigEndian.PutUint32(cnt[:], pw.header+pw.count)
		if _, err := pw.f.WriteAt(cnt[:], 8); err != nil {
			return sum, err
		}
		h := sha1.New()
		if _, err := io.Copy(h, io.NewSectionReader(pw.f, 0, pw.off)); err != nil {
			return sum, err
		}
		h.Sum(sum[:0])
		_, err := pw.f.WriteAt(sum[:], pw.off)
		return sum, err
	}
	if pw.count != pw.header {
		return sum, fmt.Errorf("pack header says %d objects, wrote %d", pw.header, pw.count)
	}
	pw.sum.Sum(sum[:0])
	if _, err := pw.bw.Write(sum[:]); err != nil {
		return sum, err
	}
	return sum, pw.bw.Flush()
}

// placePack writes the index (encoded, see encodeIndex) for the pack in
// f, whose checksum is sum, syncs both (as git does
// for packs; refs and directories are not synced, since opening a store
// verifies it) and renames them into objects/pack: the index first,
// because readers list packs by their .pack file and need its index the
// moment they see it.
func placePack(f *os.File, idx []byte, sum plumbing.Hash) (string, error) {
	dir := filepath.Dir(f.Name())
	base := filepath.Join(dir, "pack-"+sum.String())
	if _, err := os.Stat(base + ".pack"); err == nil {
		// The same pack is already in place (same objects, same order).
		f.Close()
		os.Remove(f.Name())
		return sum.String(), nil
	}
	tmpIdx, err := os.CreateTemp(dir, "tmp_idx_")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmpIdx.Name()) // a no-op once renamed
	_, err = tmpIdx.Write(idx)
	if err == nil {
		err = tmpIdx.Sync()
	}
	if cerr := tmpIdx.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmpIdx.Name(), base+".idx"); err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), base+".pack"); err != nil {
		os.Remove(base + ".idx")
		return "", err
	}
	return sum.String(), nil
}
