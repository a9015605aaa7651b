package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Every value the store decodes (skill records, snapshot headers, states,
// digest entries, release cache entries, deliveries and their id counts)
// ends in a 4-byte big-endian CRC-32C (Castagnoli) of its key followed by
// the value's other bytes. bbolt checksums only its meta pages, so without
// this a flipped byte inside a record decodes as a different, plausible
// value and is served. CRC-32C because it runs in hardware on amd64 and
// arm64 (several GB/s, a few microseconds for a 10,000-skill restart whose
// records decode in parallel anyway), is in the standard library, and
// detects every burst of up to 32 flipped bits; it is an integrity check
// against a bad disk, not a defence against someone who can write the file.
// Covering the key too means a record that lands under another key (a
// damaged branch page) fails as well.
const sumLen = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errChecksum is the failure of a value whose bytes are not the ones
// written.
var errChecksum = errors.New("checksum mismatch")

// recordSum is the checksum of a value's payload stored under key.
func recordSum(key, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, payload)
}

// seal appends the checksum of payload under key to payload.
func seal(key, payload []byte) []byte {
	return binary.BigEndian.AppendUint32(payload, recordSum(key, payload))
}

// unseal verifies a sealed value read under key and returns its payload
// (a subslice of v).
func unseal(key, v []byte) ([]byte, error) {
	if len(v) < sumLen {
		return nil, fmt.Errorf("%w: value of %d bytes has no checksum", errChecksum, len(v))
	}
	payload := v[:len(v)-sumLen]
	if binary.BigEndian.Uint32(v[len(payload):]) != recordSum(key, payload) {
		return nil, errChecksum
	}
	return payload, nil
}

// appendContiguousSum seals the key and value held one after the other in
// b[start:], appending the checksum to b.
func appendContiguousSum(b []byte, start int) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// contiguousSumOK verifies a key and its sealed value held one after the
// other in kv, as the restart path copies them into its arena.
func contiguousSumOK(kv []byte) bool {
	if len(kv) < sumLen {
		return false
	}
	n := len(kv) - sumLen
	return binary.BigEndian.Uint32(kv[n:]) == crc32.Checksum(kv[:n], castagnoli)
}
