package oidctest

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// loginTemplate is the sign-in page: a plain form Chromium fills by id.
var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in - oidctest</title></head>
<body>
<h1>Sign in</h1>
{{if .Error}}<p id="error" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="authRequestID" value="{{.ID}}">
<label for="username">Username or email</label>
<input id="username" name="username" autocomplete="username" autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password">
<button id="submit" type="submit">Sign in</button>
</form>
</body></html>
`))

type loginPage struct {
	storage *storage
	issuer  string
	logger  *slog.Logger
}

func (l *loginPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		l.render(w, http.StatusOK, r.URL.Query().Get("authRequestID"), "")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		id := r.PostForm.Get("authRequestID")
		if err := l.storage.checkLogin(id, r.PostForm.Get("username"), r.PostForm.Get("password")); err != nil {
			l.logger.Info("oidctest: sign-in refused", "err", err)
			l.render(w, http.StatusUnauthorized, id, "Wrong username or password.")
			return
		}
		http.Redirect(w, r, l.issuer+"/authorize/callback?id="+url.QueryEscape(id), http.StatusFound)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (l *loginPage) render(w http.ResponseWriter, status int, id, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = loginTemplate.Execute(w, struct{ ID, Error string }{id, msg})
}

// ErrLoginRefused is Login's error when the form answers the credentials
// with the sign-in page again.
var ErrLoginRefused = errors.New("oidctest: sign-in refused")

// Login drives a sign-in as a browser would, with a plain HTTP client: it
// follows authURL (the client's authorization request) to the login form,
// submits user and password through it, and follows the provider's
// redirects until one leaves the provider. It returns that redirect (the
// client's redirect_uri with code and state) without following it. An error
// redirect (with `error`) is returned together with an error naming it.
func (p *Provider) Login(ctx context.Context, authURL, user, password string) (*url.URL, error) {
	var last *url.URL
	hc := &http.Client{Transport: p.transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != p.addr {
			last = req.URL
			return http.ErrUseLastResponse
		}
		if len(via) > 10 {
			return errors.New("oidctest: too many redirects")
		}
		return nil
	}}
	get := func(method, target string, form url.Values) (*http.Response, []byte, error) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, target, body)
		if err != nil {
			return nil, nil, err
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp, b, err
	}
	resp, page, err := get(http.MethodGet, authURL, nil)
	if err != nil {
		return nil, fmt.Errorf("oidctest: authorization request: %w", err)
	}
	if last != nil {
		return last, redirectError(last)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("oidctest: authorization request: %s: %s", resp.Status, strings.TrimSpace(string(page)))
	}
	action, form, err := parseForm(page)
	if err != nil {
		return nil, err
	}
	target, err := resp.Request.URL.Parse(action)
	if err != nil {
		return nil, fmt.Errorf("oidctest: form action: %w", err)
	}
	form.Set("username", user)
	form.Set("password", password)
	resp, page, err = get(http.MethodPost, target.String(), form)
	if err != nil {
		return nil, fmt.Errorf("oidctest: submit login form: %w", err)
	}
	if last != nil {
		return last, redirectError(last)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, ErrLoginRefused
	}
	return nil, fmt.Errorf("oidctest: login form answered %s: %s", resp.Status, strings.TrimSpace(string(page)))
}

func redirectError(u *url.URL) error {
	if e := u.Query().Get("error"); e != "" {
		return fmt.Errorf("oidctest: authorization refused: %s: %s", e, u.Query().Get("error_description"))
	}
	return nil
}

// parseForm finds the first form of an HTML page: its action and the
// values of its named inputs.
func parseForm(page []byte) (string, url.Values, error) {
	z := html.NewTokenizer(strings.NewReader(string(page)))
	var action string
	inForm := false
	values := url.Values{}
	for {
		switch z.Next() {
		case html.ErrorToken:
			if inForm {
				return action, values, nil
			}
			return "", nil, errors.New("oidctest: no form on the login page")
		case html.StartTagToken, html.SelfClosingTagToken:
			t := z.Token()
			attr := func(k string) string {
				for _, a := range t.Attr {
					if a.Key == k {
						return a.Val
					}
				}
				return ""
			}
			switch t.Data {
			case "form":
				inForm, action = true, attr("action")
			case "input":
				if inForm && attr("name") != "" {
					values.Set(attr("name"), attr("value"))
				}
			}
		case html.EndTagToken:
			if inForm && z.Token().Data == "form" {
				return action, values, nil
			}
		}
	}
}
