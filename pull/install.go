package pull

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/skillreg/skillreg/skill"
)

// File modes of installed files. Nothing a server says makes a file
// executable (the extension carries no mode): a file is 0755 only when it
// sits under the skill's top-level scripts/ folder and starts with "#!",
// the Agent Skills convention for runnable helpers; everything else is
// 0644. Folders are 0755.
const (
	fileMode = 0o644
	execMode = 0o755
	dirMode  = 0o755
)

// rename is os.Rename; tests replace it to make a step of a replacement fail.
var rename = os.Rename

// modeFor returns the mode an installed file gets.
func modeFor(rel string, data []byte) os.FileMode {
	if strings.HasPrefix(rel, "scripts/") && bytes.HasPrefix(data, []byte("#!")) {
		return execMode
	}
	return fileMode
}

// install writes a verified skill into dir/<name>/ so that a reader of that
// folder sees either the old version or the new one, never a mixture: the
// files go into a temporary folder inside dir, which is renamed into place
// once complete. An existing version is renamed aside first and removed only
// after the new one is in place; if moving the new one in fails, the old one
// is moved back. Every path is checked to stay inside the skill's folder.
func install(dir string, s *Skill) (err error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	final := filepath.Join(dir, s.Name)
	if filepath.Dir(final) != filepath.Clean(dir) {
		return fmt.Errorf("skill name %q is not a single folder name", s.Name)
	}
	tmp, err := os.MkdirTemp(dir, ".skillreg-new-"+s.Name+"-")
	if err != nil {
		return fmt.Errorf("install %s: %w", s.Name, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, dirMode); err != nil {
		return fmt.Errorf("install %s: %w", s.Name, err)
	}
	for _, f := range s.Files {
		if err := writeFile(tmp, f); err != nil {
			return fmt.Errorf("install %s: %w", s.Name, err)
		}
	}

	old := ""
	switch _, err := os.Lstat(final); {
	case err == nil:
		// Reserve a unique name beside the skill, then move the old
		// version onto it.
		aside, err := os.MkdirTemp(dir, ".skillreg-old-"+s.Name+"-")
		if err != nil {
			return fmt.Errorf("install %s: %w", s.Name, err)
		}
		if err := os.Remove(aside); err != nil {
			return fmt.Errorf("install %s: %w", s.Name, err)
		}
		if err := rename(final, aside); err != nil {
			return fmt.Errorf("install %s: move the installed version aside: %w", s.Name, err)
		}
		old = aside
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("install %s: %w", s.Name, err)
	}
	if err := rename(tmp, final); err != nil {
		if old != "" {
			if rerr := rename(old, final); rerr != nil {
				return fmt.Errorf("install %s: %w (and restoring the old version from %s failed: %v)", s.Name, err, old, rerr)
			}
		}
		return fmt.Errorf("install %s: move the new version in: %w", s.Name, err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("install %s: remove the old version %s: %w", s.Name, old, err)
		}
	}
	return nil
}

// checkInstallPath applies skill.CheckPath to a path inside a skill:
// every path pull writes passes it, whatever the server checked.
func checkInstallPath(rel string) *skill.Problem {
	return skill.CheckPath(rel)
}

// checkOf is the check a path problem fails.
func checkOf(p *skill.Problem) Check {
	if p.Rule == skill.RuleGitMetadata {
		return CheckGitMetadata
	}
	return CheckPath
}

// writeFile writes one file under root, refusing any path that would leave
// it or that skill.CheckPath refuses, and never following or replacing
// anything already there.
func writeFile(root string, f File) error {
	if p := checkInstallPath(f.Path); p != nil {
		return p
	}
	if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
		return fmt.Errorf("path %q is not inside the skill", f.Path)
	}
	full := filepath.Join(root, filepath.FromSlash(f.Path))
	if rel, err := filepath.Rel(root, full); err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("path %q is not inside the skill", f.Path)
	}
	if err := os.MkdirAll(filepath.Dir(full), dirMode); err != nil {
		return err
	}
	mode := modeFor(f.Path, f.Data)
	out, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := out.Write(f.Data); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// The umask may have taken bits away; the modes are part of what
	// install promises.
	return os.Chmod(full, mode)
}
