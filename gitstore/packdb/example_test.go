package packdb_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/skillreg/skillreg/gitstore/packdb"
)

// Example stores a pack as a fetch receives it and reads an object back,
// checked against its id.
func Example() {
	dir, err := os.MkdirTemp("", "packdb-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	pack, err := os.ReadFile("testdata/packs/base.pack") // made by git pack-objects
	if err != nil {
		log.Fatal(err)
	}

	db := packdb.Open(dir, packdb.Options{})
	defer db.Close()
	name, idx, err := db.Ingest(context.Background(), bytes.NewReader(pack), packdb.IngestOptions{})
	if err != nil {
		log.Fatal(err)
	}
	n := idx.Count()
	fmt.Println(name, "holds", n, "objects")
	if err := db.Reload(nil); err != nil { // readers see the new pack
		log.Fatal(err)
	}

	s, err := db.Snapshot()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Release()
	commit := plumbing.NewHash("7e74b4891d57dedd09ac49e06e1dcc4d40084747") // base.pack's commit
	fmt.Println("has the commit:", s.Has(commit))
	obj, err := s.Object(plumbing.CommitObject, commit)
	if err != nil {
		log.Fatal(err)
	}
	first, _, _ := bytes.Cut(obj.Data, []byte("\n"))
	fmt.Println(obj.Type, obj.Size, "bytes:", string(first))
	_, err = s.Object(plumbing.AnyObject, plumbing.ZeroHash)
	fmt.Println(err)

	// Output:
	// pack-d2b47fc4218cc3352b91b67268a81d50e1ff3070 holds 9 objects
	// has the commit: true
	// commit 149 bytes: tree bcf5a02d94f5347dcafea3c168f1c6613208ab4f
	// object not found: 0000000000000000000000000000000000000000
}
