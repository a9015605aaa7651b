package main

import (
	"fmt"
	"os"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
)

// sshAuth gives a source on an ssh URL its SSH settings (validated at
// load: a key file, known_hosts or the insecure flag) instead of a token:
// there is nothing to send a token with, and github.token_env must not be
// read for it. Other sources are left as they are.
func sshAuth(g *catalog.GitSource, a *config.Auth) {
	if !g.Repo.IsSSH() {
		return
	}
	g.Token, g.TokenID = nil, ""
	if a == nil {
		return
	}
	g.SSH = catalog.SSHAuth{KeyFile: a.SSHKeyFile, KnownHostsFile: a.KnownHostsFile, InsecureIgnoreHostKey: a.InsecureIgnoreHostKey}
	if env := a.SSHPassphraseEnv; env != "" {
		// Read at every sync, like a token; the registry tells the
		// scrubber before anything can echo it.
		g.SSH.PassphraseID = "env:" + env
		g.SSH.Passphrase = func() (string, error) {
			v := os.Getenv(env)
			if v == "" {
				return "", fmt.Errorf("ssh passphrase environment variable %s is empty", env)
			}
			return v, nil
		}
	}
}

// learnPassphrases tells the scrubber the SSH key passphrases configured
// now, as learnTokens does the tokens: before any sync reads them, so a
// restored last_error or a log line of the start cannot show one. The
// registry adds those read later at each sync.
func (c *core) learnPassphrases(srcs []catalog.Source) {
	for _, s := range srcs {
		if s.Git == nil || s.Git.SSH.Passphrase == nil {
			continue
		}
		if pass, err := s.Git.SSH.Passphrase(); err == nil {
			c.secrets.Add(pass)
		}
	}
}
