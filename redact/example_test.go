package redact_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/skillreg/skillreg/redact"
)

// A Set scrubs a configured token in every spelling a remote could echo
// back, and URL user information whether or not it is known.
func ExampleSet_String() {
	s := redact.New("ghp_s3cretT0ken")
	encoded := base64.StdEncoding.EncodeToString([]byte("ghp_s3cretT0ken"))
	fmt.Println(s.String("fetch https://x-access-token:ghp_s3cretT0ken@github.com/team/skills.git: 401"))
	fmt.Println(s.String("server echoed " + encoded))
	fmt.Println(s.String("token=ghp_s3cretT0ken"))
	fmt.Println(s.String("clone https://someone:unknown-password@git.example.com/x.git"))
	// Output:
	// fetch https://<redacted>@github.com/team/skills.git: 401
	// server echoed <redacted>
	// token=<redacted>
	// clone https://<redacted>@git.example.com/x.git
}

// Error keeps the error's chain for errors.Is while its message is clean.
func ExampleSet_Error() {
	s := redact.New("hunter2-secret")
	err := fmt.Errorf("open /run/hunter2-secret: %w", fs.ErrNotExist)
	clean := s.Error(err)
	fmt.Println(clean)
	fmt.Println(errors.Is(clean, fs.ErrNotExist))
	// Output:
	// open /run/<redacted>: file does not exist
	// true
}

// Remote makes text a remote chose safe to show: printable, one line,
// bounded.
func ExampleRemote() {
	fmt.Println(redact.Remote("fatal:\x1b[31m repository\r\n\tnot found\x00", 64))
	fmt.Println(redact.Remote("a very long line from a remote", 12))
	// Output:
	// fatal: [31m repository not found
	// a very lo…
}

// Handler scrubs every record before the next handler sees it, so a secret
// that reached an error never reaches the log.
func ExampleSet_Handler() {
	s := redact.New("ghp_s3cretT0ken")
	text := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a fixed output for the example
			}
			return a
		},
	})
	log := slog.New(s.Handler(text))
	log.LogAttrs(context.Background(), slog.LevelWarn, "sync failed", slog.Any("err", errors.New("auth ghp_s3cretT0ken refused")))
	// Output:
	// level=WARN msg="sync failed" err="auth <redacted> refused"
}
