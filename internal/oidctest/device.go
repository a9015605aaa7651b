package oidctest

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// The device authorization grant (RFC 8628), for command-line tools such as
// the marketplace headersHelper: the library's device_authorization
// endpoint and device_code grant over the device requests kept here, and
// /device, the page where a person enters the user code and signs in
// (ApproveDevice drives it). The `resource` of the device authorization
// request becomes the access token's `aud`, as in the other flows.

// deviceConfig is the device flow's timing: a one-second poll interval so
// that tests do not wait.
var deviceConfig = op.DeviceAuthorizationConfig{
	Lifetime:     5 * time.Minute,
	PollInterval: time.Second,
	UserFormPath: "/device",
	UserCode:     op.UserCodeBase20,
}

// deviceStore holds the device requests; its zero value is empty.
type deviceStore struct {
	mu     sync.Mutex
	byCode map[string]*op.DeviceAuthorizationState // device code -> state
	byUser map[string]string                       // user code -> device code
}

// DeviceAuthorization carries the request's RFC 8707 resource to the
// storage, like Authorize.
func (s *server) DeviceAuthorization(ctx context.Context, r *op.ClientRequest[oidc.DeviceAuthorizationRequest]) (*op.Response, error) {
	return s.LegacyServer.DeviceAuthorization(context.WithValue(ctx, resourceKey, r.Form["resource"]), r)
}

// --- op.DeviceAuthorizationStorage ---

func (s *storage) StoreDeviceAuthorization(ctx context.Context, clientID, deviceCode, userCode string, expires time.Time, scopes []string) error {
	res := resourcesFrom(ctx)
	if err := validResources(res); err != nil {
		return err
	}
	d := &s.devices
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byCode == nil {
		d.byCode, d.byUser = map[string]*op.DeviceAuthorizationState{}, map[string]string{}
	}
	if _, dup := d.byUser[userCode]; dup {
		return op.ErrDuplicateUserCode
	}
	d.byCode[deviceCode] = &op.DeviceAuthorizationState{ClientID: clientID, Audience: s.audience(res), Scopes: slices.Clone(scopes), Expires: expires}
	d.byUser[userCode] = deviceCode
	return nil
}

func (s *storage) GetDeviceAuthorizatonState(_ context.Context, clientID, deviceCode string) (*op.DeviceAuthorizationState, error) {
	d := &s.devices
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.byCode[deviceCode]
	if !ok || st.ClientID != clientID {
		return nil, errors.New("unknown device code")
	}
	c := *st
	c.Audience, c.Scopes, c.AMR = slices.Clone(st.Audience), slices.Clone(st.Scopes), slices.Clone(st.AMR)
	return &c, nil
}

// approveDevice signs username in for the request of userCode.
func (s *storage) approveDevice(userCode, username, password string) error {
	u, ok := s.user(username)
	if !ok || subtle.ConstantTimeCompare([]byte(u.Password), []byte(password)) != 1 {
		return errors.New("wrong username or password")
	}
	d := &s.devices
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.byCode[d.byUser[strings.ToUpper(strings.TrimSpace(userCode))]]
	if !ok || time.Now().After(st.Expires) {
		return errors.New("unknown or expired user code")
	}
	st.Done, st.Subject, st.AuthTime, st.AMR = true, u.Subject, time.Now(), []string{"pwd"}
	return nil
}

var deviceTemplate = template.Must(template.New("device").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in a device - oidctest</title></head>
<body>
<h1>Sign in a device</h1>
{{if .Error}}<p id="error" role="alert">{{.Error}}</p>{{end}}
{{if .Done}}<p id="done">The device is signed in. You can close this page.</p>{{else}}
<form method="post" action="/device">
<label for="user_code">Code</label>
<input id="user_code" name="user_code" value="{{.Code}}">
<label for="username">Username or email</label>
<input id="username" name="username" autocomplete="username" autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password">
<button id="submit" type="submit">Sign in</button>
</form>{{end}}
</body></html>
`))

// devicePage is the verification URI: the code (from verification_uri_complete's
// user_code, or typed) and the person's username and password.
type devicePage struct{ storage *storage }

func (p devicePage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	render := func(status int, code, msg string, done bool) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = deviceTemplate.Execute(w, struct {
			Code, Error string
			Done        bool
		}{code, msg, done})
	}
	switch r.Method {
	case http.MethodGet:
		render(http.StatusOK, r.URL.Query().Get("user_code"), "", false)
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		code := r.PostForm.Get("user_code")
		if err := p.storage.approveDevice(code, r.PostForm.Get("username"), r.PostForm.Get("password")); err != nil {
			render(http.StatusUnauthorized, code, "Wrong code, username or password.", false)
			return
		}
		render(http.StatusOK, "", "", true)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// ApproveDevice is the person at the device flow's verification page:
// it opens verificationURIComplete (the device authorization answer's
// verification_uri_complete, holding the user code) and signs user in
// there with password, approving the device's request.
func (p *Provider) ApproveDevice(ctx context.Context, verificationURIComplete, user, password string) error {
	u, err := url.Parse(verificationURIComplete)
	if err != nil {
		return fmt.Errorf("oidctest: verification URI: %w", err)
	}
	form := url.Values{"user_code": {u.Query().Get("user_code")}, "username": {user}, "password": {password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.issuer+deviceConfig.UserFormPath, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("oidctest: device page: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("oidctest: device sign-in refused: %s", resp.Status)
	}
	return nil
}
