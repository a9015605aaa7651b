package publish

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The archives are written by this small writer rather than archive/zip so
// that their bytes depend on nothing but the files: every field is fixed
// here (method Store, 1980-01-01 00:00, Unix "made by", UTF-8 names, no
// extra fields, no data descriptors), and a Go upgrade cannot move a
// digest. The golden test in zip_test.go pins one fixture's bytes.

// zipEntry is one file of an archive.
type zipEntry struct {
	Name string // slash path inside the archive
	Exec bool   // git mode 100755
	Size int64
	// Data returns the file's bytes (exactly Size of them), read once
	// when the entry is written: its CRC-32 is computed from them.
	Data func() ([]byte, error)
}

const (
	zipLocalSig   = 0x04034b50
	zipCentralSig = 0x02014b50
	zipEndSig     = 0x06054b50
	zipVersion    = 20         // 2.0: Store, directories
	zipMadeBy     = 3<<8 | 20  // Unix, so external attributes carry the mode
	zipFlagUTF8   = 0x0800     // names are UTF-8
	zipDate       = 1<<5 | 1   // 1980-01-01 (MS-DOS date)
	zipTime       = 0          // 00:00:00
	zipModeFile   = 0o100644   // regular file
	zipModeExec   = 0o100755   // regular file, executable
	zipMaxEntries = 0xffff     // without zip64
	zipMaxOffset  = 0xffffffff // without zip64
	zipLocalLen   = 30         // local header without the name
	zipCentralLen = 46         // central header without the name
	zipEndLen     = 22         // end of central directory, no comment
	zipMaxName    = 0xffff     // bytes of one name
)

// errArchiveTooLarge is an archive that would need zip64.
var errArchiveTooLarge = errors.New("archive needs zip64 (over 65,535 entries or 4 GiB)")

// zipSize is the exact size of the archive of entries.
func zipSize(entries []zipEntry) int64 {
	n := int64(zipEndLen)
	for _, e := range entries {
		n += zipLocalLen + zipCentralLen + 2*int64(len(e.Name)) + e.Size
	}
	return n
}

// writeZip writes the archive of entries (in the order given; callers sort
// them) to w.
func writeZip(w io.Writer, entries []zipEntry) error {
	if len(entries) > zipMaxEntries || zipSize(entries) > zipMaxOffset {
		return errArchiveTooLarge
	}
	var hdr [zipCentralLen]byte
	var off int64
	offsets := make([]int64, len(entries))
	crcs := make([]uint32, len(entries))
	for i, e := range entries {
		if len(e.Name) > zipMaxName {
			return fmt.Errorf("archive entry name of %d bytes", len(e.Name))
		}
		offsets[i] = off
		// The header holds the CRC, so the bytes are read first (one
		// file in memory at a time).
		data, err := e.Data()
		if err != nil {
			return err
		}
		if int64(len(data)) != e.Size {
			return fmt.Errorf("%s: %d bytes, the manifest says %d", e.Name, len(data), e.Size)
		}
		crcs[i] = crc32.ChecksumIEEE(data)
		h := hdr[:zipLocalLen]
		le := binary.LittleEndian
		le.PutUint32(h[0:], zipLocalSig)
		le.PutUint16(h[4:], zipVersion)
		le.PutUint16(h[6:], zipFlagUTF8)
		le.PutUint16(h[8:], 0) // Store
		le.PutUint16(h[10:], zipTime)
		le.PutUint16(h[12:], zipDate)
		le.PutUint32(h[14:], crcs[i])
		le.PutUint32(h[18:], uint32(e.Size))
		le.PutUint32(h[22:], uint32(e.Size))
		le.PutUint16(h[26:], uint16(len(e.Name)))
		le.PutUint16(h[28:], 0)
		if _, err := w.Write(h); err != nil {
			return err
		}
		if _, err := io.WriteString(w, e.Name); err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		off += zipLocalLen + int64(len(e.Name)) + e.Size
	}
	cdStart := off
	for i, e := range entries {
		h := hdr[:zipCentralLen]
		le := binary.LittleEndian
		mode := uint32(zipModeFile)
		if e.Exec {
			mode = zipModeExec
		}
		le.PutUint32(h[0:], zipCentralSig)
		le.PutUint16(h[4:], zipMadeBy)
		le.PutUint16(h[6:], zipVersion)
		le.PutUint16(h[8:], zipFlagUTF8)
		le.PutUint16(h[10:], 0)
		le.PutUint16(h[12:], zipTime)
		le.PutUint16(h[14:], zipDate)
		le.PutUint32(h[16:], crcs[i])
		le.PutUint32(h[20:], uint32(e.Size))
		le.PutUint32(h[24:], uint32(e.Size))
		le.PutUint16(h[28:], uint16(len(e.Name)))
		le.PutUint16(h[30:], 0) // extra
		le.PutUint16(h[32:], 0) // comment
		le.PutUint16(h[34:], 0) // disk
		le.PutUint16(h[36:], 0) // internal attributes
		le.PutUint32(h[38:], mode<<16)
		le.PutUint32(h[42:], uint32(offsets[i]))
		if _, err := w.Write(h); err != nil {
			return err
		}
		if _, err := io.WriteString(w, e.Name); err != nil {
			return err
		}
		off += zipCentralLen + int64(len(e.Name))
	}
	var end [zipEndLen]byte
	le := binary.LittleEndian
	le.PutUint32(end[0:], zipEndSig)
	le.PutUint16(end[8:], uint16(len(entries)))
	le.PutUint16(end[10:], uint16(len(entries)))
	le.PutUint32(end[12:], uint32(off-cdStart))
	le.PutUint32(end[16:], uint32(cdStart))
	_, err := w.Write(end[:])
	return err
}
