package ghapp_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skillreg/skillreg/ghapp"
	"github.com/skillreg/skillreg/internal/fakegithub"
)

// An App mints an installation token for an owner once, keeps it until
// five minutes before it expires, and tells an owner without the App
// apart. Here GitHub is the loopback fake, and the clock is the test's.
func ExampleApp_Token() {
	clock := fakegithub.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	gh := fakegithub.New(fakegithub.Options{Now: clock.Now})
	defer gh.Close()
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	gh.RegisterApp(123, &key.PublicKey)
	inst := gh.Install(123, "acme", fakegithub.Organization)

	app, err := ghapp.New(ghapp.Config{
		APIURL:     gh.URL + "/",
		AppID:      123,
		PrivateKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		Now:        clock.Now,
		OnToken:    func(string) { fmt.Println("minted a token; the scrubber is told") },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	tok, _ := app.Token(ctx, "acme")
	fmt.Println("installation token:", strings.HasPrefix(tok, "ghs_"))
	again, _ := app.Token(ctx, "acme")
	fmt.Println("kept:", again == tok)
	clock.Advance(55 * time.Minute)
	fresh, _ := app.Token(ctx, "acme")
	fmt.Println("replaced 5 minutes before it expires:", fresh != tok, gh.TokensIssued(inst))
	_, err = app.Token(ctx, "someone-else")
	fmt.Println("not installed:", errors.Is(err, ghapp.ErrNotInstalled))

	gh.Publish("acme/skills", fakegithub.Release{TagName: "v1.0.0"})
	resp, err := app.Client("acme").Get(gh.URL + "/repos/acme/skills/releases/latest")
	if err == nil {
		resp.Body.Close()
		fmt.Println("releases as the installation:", resp.StatusCode == http.StatusOK)
	}
	// Output:
	// minted a token; the scrubber is told
	// installation token: true
	// kept: true
	// minted a token; the scrubber is told
	// replaced 5 minutes before it expires: true 2
	// not installed: true
	// releases as the installation: true
}
