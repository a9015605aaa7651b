// Package gitref is skillreg's vocabulary for what a source points at: a
// Pin (which commit of a remote a source follows), a Repo (a remote's
// identity, in one canonical form that carries no credentials) and a
// Digest (the SHA-256 of a file's bytes, as manifests spell it).
//
// Every value is validated when it is made: config parses pins and
// repositories once, at load and at reload, and every package above
// (registry, gitstore, webhook, releases, publish, pull) takes them as
// they are. It imports nothing of skillreg.
package gitref
