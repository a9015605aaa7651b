package main

import (
	"fmt"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/sigverify"
)

// sourceVerify loads the trusted keys of a git source's verify section
// (nil without one). It runs when the runtime is built, at start and at
// every reload, so a SIGHUP after a key file changed trusts the new keys:
// the registry sees another KeysID and checks the served commit again.
// A key file that does not parse fails the build (a reload then changes
// nothing), its error naming the file and line. A discovered source takes
// its template's verify through here like a static one.
func sourceVerify(s config.Source) (*catalog.Verify, error) {
	v := s.Verify
	if v == nil {
		return nil, nil
	}
	keys, err := sigverify.LoadFiles(v.OpenPGPKeys, v.SSHAllowedSigners)
	if err != nil {
		return nil, fmt.Errorf("source %s: verify: %w", s.Name, err)
	}
	mode := catalog.VerifyMode(v.Mode)
	if mode == "" {
		mode = catalog.VerifyHead // config.Validate defaults it; a Source made in code may not
	}
	return &catalog.Verify{Mode: mode, Keys: keys, KeysID: keys.ID()}, nil
}
