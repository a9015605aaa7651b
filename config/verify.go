package config

import (
	"fmt"
	"os"

	"github.com/skillreg/skillreg/gitref"
)

// Verify requires a git source's commits or tags to be signed by listed
// keys: a commit or tag that does not verify is never served.
type Verify struct {
	// Mode says what must carry a valid signature: "head" (the pinned
	// commit, the default), "tag" (the annotated tag that resolved a tag,
	// semver or release pin), or "tag-and-head" (both).
	Mode string `yaml:"mode"`
	// OpenPGPKeys are files of armored (or binary) OpenPGP public keys.
	OpenPGPKeys []string `yaml:"openpgp_keys"`
	// SSHAllowedSigners is a file in git's gpg.ssh.allowedSignersFile
	// format (principals, namespaces=, valid-after, valid-before).
	SSHAllowedSigners string `yaml:"ssh_allowed_signers"`
}

// The verify modes.
const (
	VerifyHead       = "head"
	VerifyTag        = "tag"
	VerifyTagAndHead = "tag-and-head"
)

// validateVerify checks each source's verify section: a git source's
// only, a known mode (defaulted to head), at least one key file, each
// readable now (their keys are parsed when the runtime is built, at
// start and at every reload), and the tag modes only for a pin that
// resolves through a tag.
func (c *Config) validateVerify(bad func(format string, args ...any)) {
	for i := range c.Sources {
		s := &c.Sources[i]
		v := s.Verify
		if v == nil {
			continue
		}
		at := fmt.Sprintf("sources[%d].verify", i)
		if s.Line > 0 {
			at = fmt.Sprintf("line %d: sources[%d].verify", s.Line, i)
		}
		if s.Dir != "" {
			bad("%s: applies to git sources (url) only: a directory has no signatures", at)
			continue
		}
		switch v.Mode {
		case "":
			v.Mode = VerifyHead
		case VerifyHead, VerifyTag, VerifyTagAndHead:
		default:
			bad("%s.mode: %q is not one of head, tag, tag-and-head", at, v.Mode)
		}
		if (v.Mode == VerifyTag || v.Mode == VerifyTagAndHead) && s.Pin.Kind != gitref.Tag && s.Pin.Kind != gitref.Semver && s.Pin.Kind != gitref.Release {
			bad("%s.mode: %s needs a tag, semver or release ref (the ref is %s): only a tag carries a tag's signature", at, v.Mode, s.Pin)
		}
		if len(v.OpenPGPKeys) == 0 && v.SSHAllowedSigners == "" {
			bad("%s: list the trusted keys in openpgp_keys, ssh_allowed_signers, or both", at)
		}
		for j, f := range v.OpenPGPKeys {
			if err := readableFile(f); err != nil {
				bad("%s.openpgp_keys[%d]: %v", at, j, err)
			}
		}
		if f := v.SSHAllowedSigners; f != "" {
			if err := readableFile(f); err != nil {
				bad("%s.ssh_allowed_signers: %v", at, err)
			}
		}
	}
}

// readableFile checks that name is a regular file that opens.
func readableFile(name string) error {
	if name == "" {
		return fmt.Errorf("empty file name")
	}
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", name)
	}
	return nil
}
