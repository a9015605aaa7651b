package config

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// maxSSHFileBytes bounds the key and known_hosts files read to check them
// at load (an OpenSSH RSA-16384 key is about 13 KiB).
const maxSSHFileBytes = 1 << 20

// validateAuth checks a git source's auth against its URL's scheme: an
// ssh URL takes only ssh_key_file (with ssh_passphrase_env when the key is
// protected) and known_hosts_file, which is required unless
// insecure_ignore_host_key is set; every other URL takes only a token
// (exactly one of token_env and token_file). The key and known_hosts files
// are read and parsed here, so a wrong path, a public key given for the
// private one or a protected key without its passphrase fails at load and
// at reload, naming the key; the passphrase itself is read at each sync.
// Nothing read is kept, and no message holds a byte of the key.
func validateAuth(at string, s *Source) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	a := s.Auth
	if s.Repo.IsZero() {
		return nil // the url's own error says what is wrong
	}
	if !s.Repo.IsSSH() {
		if a == nil {
			return nil
		}
		if a.SSHKeyFile != "" || a.SSHPassphraseEnv != "" || a.KnownHostsFile != "" || a.InsecureIgnoreHostKey {
			bad("%s.auth: ssh_key_file, ssh_passphrase_env, known_hosts_file and insecure_ignore_host_key apply to ssh URLs (ssh://user@host/path or user@host:path) only", at)
		}
		if (a.TokenEnv == "") == (a.TokenFile == "") {
			bad("%s.auth: set exactly one of token_env and token_file", at)
		}
		return errs
	}
	if a == nil || a.SSHKeyFile == "" {
		return []error{fmt.Errorf("%s.auth.ssh_key_file: required for an ssh URL (the private key of a deploy key; with auth.known_hosts_file)", at)}
	}
	if a.TokenEnv != "" || a.TokenFile != "" {
		bad("%s.auth: token_env and token_file apply to https URLs; an ssh URL takes ssh_key_file", at)
	}
	switch {
	case a.KnownHostsFile == "" && !a.InsecureIgnoreHostKey:
		bad("%s.auth.known_hosts_file: required for an ssh URL (the server's host keys, as ssh-keyscan prints them after you checked them); insecure_ignore_host_key: true skips the check", at)
	case a.KnownHostsFile != "" && a.InsecureIgnoreHostKey:
		bad("%s.auth: set known_hosts_file or insecure_ignore_host_key, not both", at)
	case a.KnownHostsFile != "":
		if err := checkKnownHosts(a.KnownHostsFile); err != nil {
			bad("%s.auth.known_hosts_file: %v", at, err)
		}
	}
	if err := checkSSHKey(a.SSHKeyFile, a.SSHPassphraseEnv); err != nil {
		bad("%s.auth.ssh_key_file: %v", at, err)
	}
	return errs
}

// checkSSHKey reads a private key file and checks that it is one, and
// that a passphrase is configured exactly when it is protected; when the
// passphrase's variable is set now, that it decrypts the key (a daemon
// started without it fails at its first sync instead, naming the
// variable).
func checkSSHKey(file, passphraseEnv string) error {
	b, err := readSmall(file)
	if err != nil {
		return err
	}
	hasPassphrase := passphraseEnv != ""
	_, err = ssh.ParseRawPrivateKey(b)
	var missing *ssh.PassphraseMissingError
	switch {
	case err == nil && hasPassphrase:
		return fmt.Errorf("%s is not protected by a passphrase: remove auth.ssh_passphrase_env", file)
	case err == nil:
		return nil
	case errors.As(err, &missing) && !hasPassphrase:
		return fmt.Errorf("%s is protected by a passphrase: set auth.ssh_passphrase_env", file)
	case errors.As(err, &missing):
		if pass := os.Getenv(passphraseEnv); pass != "" {
			if _, err := ssh.ParseRawPrivateKeyWithPassphrase(b, []byte(pass)); err != nil {
				return fmt.Errorf("the passphrase in %s does not decrypt %s", passphraseEnv, file)
			}
		}
		return nil
	}
	if _, _, _, _, perr := ssh.ParseAuthorizedKey(b); perr == nil {
		return fmt.Errorf("%s is a public key: give the private key (the file without .pub)", file)
	}
	return fmt.Errorf("%s is not an SSH private key (OpenSSH or PEM)", file)
}

// checkKnownHosts reads a known_hosts file as the sync will.
func checkKnownHosts(file string) error {
	if _, err := readSmall(file); err != nil {
		return err
	}
	if _, err := knownhosts.New(file); err != nil {
		return err // "knownhosts: FILE:LINE: ..."
	}
	return nil
}

func readSmall(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSSHFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSSHFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, maxSSHFileBytes)
	}
	return b, nil
}
