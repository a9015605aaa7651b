// Package gitstore keeps one bare, shallow git object store per remote
// repository and reads commits straight from it: list the remote's refs,
// resolve a pin to a commit, fetch only what is new, walk a commit's tree,
// read blobs by id, and prune what no kept commit needs. It never checks
// out a working tree and knows nothing about skills.
//
// go-git v5 supplies the transport (smart HTTP, file, and SSH, whose key,
// host key check and context-bound connections are set up in ssh.go), the protocol
// messages, the pack index format and delta patching. Two parts are this
// package's own, because go-git's were measured wrong or slow on a
// 10,000-skill, 30,000-file repository:
//
//   - The fetch negotiation. Fetch asks for the one commit at "deepen 1",
//     sending the commits the store holds as both "have" and "shallow",
//     and asks for a thin pack. go-git's Fetch with Depth: 1 refetches the
//     whole tree on every update (it never asks for a thin pack, and git's
//     pack-objects only leaves out the client's objects at depth 1 when
//     the pack may be thin); with Depth: 0 it sends no shallow lines, so
//     after a force-push the server assumes the client holds history it
//     does not, and go-git reports success with blobs missing.
//   - The pack database (package packdb): index-pack, object lookup,
//     pack writer and repack. Packs are indexed in one pass while they
//     stream in, each object inflated once, thin-pack bases taken from
//     the store and appended; go-git's parser waits for the whole pack,
//     then inflates every object twice. Packs are read with ReadAt
//     through reference-counted snapshots, so reads run concurrently,
//     never wait for a fetch or a prune, and every object read is checked
//     against its id; go-git's filesystem storage is not safe for
//     concurrent use and does not verify what it reads.
//
// This package decides what the store must hold (which commit to fetch,
// what a prune keeps, when a store needs repair); packdb stores it.
//
// Layout of a store (a valid bare repository; the git CLI can inspect it):
// objects/pack holds the packs, refs/skillreg/commit/<id> names every
// commit held completely (commit and whole tree, no parents), and
// "shallow" lists the same commits. A ref is written only after its
// objects are durably in place, so after a crash Pool.Repo repairs the
// store: temporary files, packs that fail their checksum and refs of
// incomplete commits are removed, and the next Fetch downloads again.
//
// Disk bound: after Prune(keep), the store is exactly one pack holding the
// kept commits and the trees and blobs they reach, each object once
// (shared blobs are stored once across kept commits), compressed as the
// server sent them, with deltas stored whole. Between prunes every Fetch
// adds one pack with the objects that were new to the store.
package gitstore
