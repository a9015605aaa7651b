package sigverify

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// allowedSigner is one line of an allowed_signers file (ssh-keygen(1),
// ALLOWED SIGNERS): principals, options, a public key.
type allowedSigner struct {
	line       int
	principals string   // as written, comma-separated patterns
	namespaces []string // the namespaces= pattern list; nil: any
	after      time.Time
	before     time.Time
	key        ssh.PublicKey
	keyBytes   []byte // key.Marshal(), to compare
}

// maxAllowedSigners bounds an allowed_signers file.
const maxAllowedSigners = 1 << 20

// parseAllowedSigners parses an allowed_signers file: one signer a line,
// "principals [options] keytype base64-key [comment]"; empty lines and
// lines starting with '#' are skipped. Errors name the line.
func parseAllowedSigners(data []byte) ([]allowedSigner, error) {
	if len(data) > maxAllowedSigners {
		return nil, fmt.Errorf("allowed_signers of %d bytes, more than %d: %w", len(data), maxAllowedSigners, ErrMalformed)
	}
	var out []allowedSigner
	for n, line := range bytes.Split(data, []byte("\n")) {
		s, err := parseAllowedSigner(bytes.TrimSpace(line))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if s != nil {
			s.line = n + 1
			out = append(out, *s)
		}
	}
	return out, nil
}

func parseAllowedSigner(line []byte) (*allowedSigner, error) {
	if len(line) == 0 || line[0] == '#' {
		return nil, nil
	}
	principals, rest, err := principalsField(line)
	if err != nil {
		return nil, err
	}
	rest = bytes.TrimLeft(rest, " \t")
	if len(rest) == 0 {
		return nil, fmt.Errorf("no public key after the principals: %w", ErrMalformed)
	}
	// What follows is authorized_keys syntax: [options] keytype key
	// [comment]; a second key on the line is part of the comment, as
	// ssh-keygen reads it.
	key, _, options, _, err := ssh.ParseAuthorizedKey(rest)
	if err != nil {
		return nil, fmt.Errorf("public key: %v: %w", err, ErrMalformed)
	}
	s := &allowedSigner{principals: principals, key: key, keyBytes: key.Marshal()}
	for _, o := range options {
		name, value, hasValue := strings.Cut(o, "=")
		switch strings.ToLower(name) {
		case "cert-authority":
			return nil, fmt.Errorf("cert-authority is not supported (list the signers' own keys): %w", ErrMalformed)
		case "namespaces":
			v, err := optionValue(name, value, hasValue)
			if err != nil {
				return nil, err
			}
			s.namespaces = strings.Split(v, ",")
		case "valid-after", "valid-before":
			v, err := optionValue(name, value, hasValue)
			if err != nil {
				return nil, err
			}
			t, err := parseSSHTime(v)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: %w", name, v, err)
			}
			if strings.EqualFold(name, "valid-after") {
				s.after = t
			} else {
				s.before = t
			}
		default:
			return nil, fmt.Errorf("unknown option %q: %w", name, ErrMalformed)
		}
	}
	return s, nil
}

// principalsField splits off the first field, which may be quoted.
func principalsField(line []byte) (principals string, rest []byte, err error) {
	if line[0] == '"' {
		end := bytes.IndexByte(line[1:], '"')
		if end < 0 {
			return "", nil, fmt.Errorf("unterminated quoted principals: %w", ErrMalformed)
		}
		p := string(line[1 : end+1])
		if p == "" {
			return "", nil, fmt.Errorf("empty principals: %w", ErrMalformed)
		}
		return p, line[end+2:], nil
	}
	end := bytes.IndexAny(line, " \t")
	if end < 0 {
		return "", nil, fmt.Errorf("no public key after the principals: %w", ErrMalformed)
	}
	return string(line[:end]), line[end:], nil
}

func optionValue(name, value string, hasValue bool) (string, error) {
	if !hasValue {
		return "", fmt.Errorf("option %s without a value: %w", name, ErrMalformed)
	}
	// ssh-keygen refuses an unquoted value ("missing start quote"), so a
	// file means the same to git and here.
	if len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
		return "", fmt.Errorf("option %s=%s: the value must be quoted (%s=\"...\"), as ssh-keygen reads it: %w", name, value, name, ErrMalformed)
	}
	value = value[1 : len(value)-1]
	if value == "" {
		return "", fmt.Errorf("option %s with an empty value: %w", name, ErrMalformed)
	}
	return value, nil
}

// parseSSHTime parses ssh-keygen's YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]:
// UTC with a trailing Z, else the local time zone (as ssh-keygen reads
// it).
func parseSSHTime(v string) (time.Time, error) {
	loc := time.Local
	if s, ok := strings.CutSuffix(v, "Z"); ok {
		v, loc = s, time.UTC
	}
	layouts := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}
	layout, ok := layouts[len(v)]
	if !ok {
		return time.Time{}, fmt.Errorf("not YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]: %w", ErrMalformed)
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return time.Time{}, fmt.Errorf("not YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]: %w", ErrMalformed)
		}
	}
	t, err := time.ParseInLocation(layout, v, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("%v: %w", err, ErrMalformed)
	}
	return t, nil
}

// allows reports whether the signer may sign in namespace ns at time at
// (inclusive at both ends, as ssh-keygen checks), and if not, why.
func (s *allowedSigner) allows(ns string, at time.Time, known bool) error {
	if s.namespaces != nil && !matchPatternList(ns, s.namespaces) {
		return fmt.Errorf("allowed_signers line %d (%s) does not allow namespace %q", s.line, s.principals, ns)
	}
	if !s.after.IsZero() || !s.before.IsZero() {
		if !known {
			return fmt.Errorf("allowed_signers line %d (%s) has a validity period and the object has no signing time", s.line, s.principals)
		}
		if !s.after.IsZero() && at.Before(s.after) {
			return fmt.Errorf("allowed_signers line %d (%s) is valid after %s, signed at %s", s.line, s.principals, s.after.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
		}
		if !s.before.IsZero() && at.After(s.before) {
			return fmt.Errorf("allowed_signers line %d (%s) is valid before %s, signed at %s", s.line, s.principals, s.before.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// matchPatternList is OpenSSH's match_pattern_list: comma-separated
// patterns with * and ?, a leading ! negates; a negated match wins.
func matchPatternList(s string, patterns []string) bool {
	matched := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		if matchPattern(s, p) {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}

// matchPattern matches s against p, where * is any run and ? any one
// byte. Iterative, so a hostile pattern costs O(len(s)*len(p)) at most.
func matchPattern(s, p string) bool {
	si, pi, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si++
			pi++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// canonical is the signer in one normalised line, for Keys.ID.
func (s *allowedSigner) canonical() string {
	var b strings.Builder
	b.WriteString(s.principals)
	b.WriteString(" namespaces=" + strings.Join(s.namespaces, ","))
	if !s.after.IsZero() {
		b.WriteString(" valid-after=" + s.after.UTC().Format(time.RFC3339))
	}
	if !s.before.IsZero() {
		b.WriteString(" valid-before=" + s.before.UTC().Format(time.RFC3339))
	}
	b.WriteString(" ")
	b.Write(bytes.TrimSpace(ssh.MarshalAuthorizedKey(s.key)))
	return b.String()
}
