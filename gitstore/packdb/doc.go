// Package packdb is the pack database under one git object store's
// objects/pack directory: it indexes packs as they stream in from the
// network (index-pack), looks objects up and reads them, checked against
// their ids, writes packs, and repacks a store down to the objects it
// must keep. It knows nothing about remotes, refs or commits' meaning:
// gitstore decides what to fetch and what to keep, packdb stores it.
//
// The methods, in the order a store uses them:
//
//   - Open names the directory; nothing is read until it is needed.
//   - Verify checks one pack against its index (and, when asked, its
//     checksum) after a crash; Reload makes the packs on disk current.
//   - Ingest reads a pack from the network, indexes it in one pass,
//     completes a thin pack with bases from the store, and places it.
//   - Snapshot is a read view: Has, Object, Size. It holds the packs it
//     started with, so reads never wait for an Ingest or a Repack.
//   - Repack writes one pack of the objects to keep; Packs lists the
//     packs and Remove deletes one.
//
// Why this package exists instead of go-git's packfile.Parser and
// filesystem storage: the parser needs the whole pack on disk first and
// inflates every object twice, which made indexing a 30,000-file pack
// cost more than git clone spends in total, and it cannot complete thin
// packs without writing every object loose; the storage is not safe for
// concurrent use and does not verify what it reads.
//
// Every byte of a pack is hostile until checked: sizes an entry or a
// delta declares are bounded before anything is allocated for them
// (MaxObjectBytes), delta chains are bounded, and a pack that does not
// parse fails with ErrMalformed, never with a panic.
package packdb
