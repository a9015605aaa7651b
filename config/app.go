package config

import (
	"os"
)

// App is a GitHub App (github.app): its installation tokens are the git
// credential of repositories on the GitHub host without their own auth,
// and the Releases API's. serve reads the private key file; the
// configuration only names it.
type App struct {
	// AppID is the App's numeric id (its settings page: "App ID").
	AppID int64 `yaml:"app_id"`
	// PrivateKeyFile is the PEM file GitHub generated for the App.
	PrivateKeyFile string `yaml:"private_key_file"`
	// InstallationID, when set, is the one installation used for every
	// repository; unset, the installation is found per owner.
	InstallationID int64 `yaml:"installation_id"`
}

// validate checks github.app (nil: no App).
func (a *App) validate(bad func(format string, args ...any)) {
	if a == nil {
		return
	}
	if a.AppID <= 0 {
		bad("github.app.app_id: required, the App's numeric id (its settings page shows it)")
	}
	switch {
	case a.PrivateKeyFile == "":
		bad("github.app.private_key_file: required, the PEM file GitHub generated for the App")
	default:
		// Read by serve; here only its existence, so a typo fails at load.
		if info, err := os.Stat(a.PrivateKeyFile); err != nil {
			bad("github.app.private_key_file: %v", err)
		} else if !info.Mode().IsRegular() {
			bad("github.app.private_key_file: %s is not a regular file", a.PrivateKeyFile)
		}
	}
	if a.InstallationID < 0 {
		bad("github.app.installation_id: %d must be positive (or unset to find the installation per owner)", a.InstallationID)
	}
}
