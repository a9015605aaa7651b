package store

import (
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// mappedSpan gathers the part of bbolt's mapping of the file that a read
// went through, so that its pages can be handed back to the kernel once
// the values are copied out. A restart reads every skill record once:
// left mapped, those pages stay resident (112 MiB at 100,000 skills)
// on top of the decoded heap, and count in the process's peak. Handing
// them back costs nothing: the mapping is a shared, read-only mapping of
// the file, whose bytes stay in the page cache, and a later read faults
// them in again.
type mappedSpan struct {
	start, end uintptr // the mapping's pages in use: only these are released
	lo, hi     uintptr
}

// newMappedSpan returns a span over the pages tx reads from.
func newMappedSpan(tx *bolt.Tx) *mappedSpan {
	start := tx.DB().Info().Data
	return &mappedSpan{start: start, end: start + uintptr(tx.Size())}
}

// add records that b was read; b outside the mapping (a value bbolt
// holds on the heap) is ignored.
func (m *mappedSpan) add(b []byte) {
	if len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	e := p + uintptr(len(b))
	if p < m.start || e > m.end {
		return
	}
	if m.hi == 0 || p < m.lo {
		m.lo = p
	}
	if e > m.hi {
		m.hi = e
	}
}

// release hands the pages of what was read back, and starts over.
func (m *mappedSpan) release() {
	if m.hi > m.lo {
		releasePages(m.start, m.end, m.lo, m.hi)
	}
	m.lo, m.hi = 0, 0
}
