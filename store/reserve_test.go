package store

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/skillreg/skillreg/internal/fulldisk"
)

// TestStateWriteOnFullDisk: on a real, full file system a snapshot too
// large for the space left fails and leaves the stored one, while a
// state write still succeeds in the store's preallocated reserve (that is
// how a restart learns the stored catalog is stale); nothing is damaged,
// and with space again the snapshot is stored.
func TestStateWriteOnFullDisk(t *testing.T) {
	mnt, ok := fulldisk.Mount(t, 32<<20)
	if !ok {
		return
	}
	path := filepath.Join(mnt, FileName)
	small := saveCorpus(t, path, 20)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	free := fulldisk.Fill(t, mnt)
	big := corpusSnapshot(t, "src", 2000)
	big.Commit = "c2"
	if err := s.SaveSnapshot(big, stateOf(big)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save on a full disk: %v, want ENOSPC", err)
	}
	st := stateOf(small)
	st.PersistError = "save snapshot of src at c2: no space left on device"
	st.Commit = "c2"
	if err := s.SaveState(st); err != nil {
		t.Fatalf("state write on a full disk, with the reserve: %v", err)
	}
	p := load(t, s)["src"]
	sameSnapshot(t, p.Snapshot, small)
	if p.State.PersistError != st.PersistError || p.State.Commit != "c2" {
		t.Fatalf("state after the full-disk writes: %+v", p.State)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	free()
	if err := s.SaveSnapshot(big, stateOf(big)); err != nil {
		t.Fatalf("save once space returns: %v", err)
	}
	sameSnapshot(t, load(t, s)["src"].Snapshot, big)
}
