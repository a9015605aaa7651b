package webhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/deepjson"
	"github.com/skillreg/skillreg/webhook"
)

// TestPayloadBounds: a signed body whose JSON nests deeper than
// MaxPayloadDepth, holds more than MaxPayloadTokens values, or comes as a
// form of more than MaxFormFields fields is answered 400 with a message
// naming the bound, recorded as too_complex and counted, and asks for
// nothing; one level less is served as before, in both content types.
func TestPayloadBounds(t *testing.T) {
	ping, push, issues := load(t, "ping.json"), load(t, "push.json"), load(t, "issues-opened.json")
	depth := func(doc []byte, d int) []byte { return deepjson.Embed(doc, "x", deepjson.Arrays(d)) }
	tests := []struct {
		name, event string
		form        bool
		body        []byte
		status      int
		message     string // in the error answered, for a refusal
	}{
		{"ping at the depth bound", "ping", false, depth(ping, webhook.MaxPayloadDepth-1), 200, ""},
		{"ping over the depth bound", "ping", false, depth(ping, webhook.MaxPayloadDepth), 400, "more than 64 levels"},
		{"ping 1,001 deep", "ping", false, depth(ping, 1001), 400, "nested too deeply"},
		{"ping 2,000,000 deep", "ping", false, depth(ping, 2_000_000), 400, "nested too deeply"},
		{"push, deep objects", "push", false, deepjson.Embed(push, "x", deepjson.Objects(1000)), 400, "more than 64 levels"},
		{"push at the depth bound", "push", false, depth(push, webhook.MaxPayloadDepth-1), 202, ""},
		{"ignored event over the depth bound", "issues", false, depth(issues, 65), 400, "more than 64 levels"},
		{"push with too many values", "push", false, deepjson.Embed(push, "x", deepjson.Array(deepjson.HugeArrayLen)), 400, "too many values"},
		{"form, ping over the depth bound", "ping", true, depth(ping, 65), 400, "more than 64 levels"},
		{"form, push 2,000,000 deep", "push", true, depth(push, 2_000_000), 400, "nested too deeply"},
		{"form, push at the depth bound", "push", true, depth(push, webhook.MaxPayloadDepth-1), 202, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			d := delivery{event: tt.event, id: "deep-1", body: tt.body}
			if tt.form {
				d.contentType, d.body = "application/x-www-form-urlencoded", asForm(tt.body)
			}
			status, out := r.send(t, d)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %.200s", status, tt.status, out)
			}
			r.h.Close()
			recent, _ := r.log.Recent(0)
			if len(recent) != 1 || recent[0].ID != "deep-1" {
				t.Fatalf("recorded %+v, want the delivery", recent)
			}
			if tt.status != 400 {
				return
			}
			var answer struct{ Error string }
			if err := json.Unmarshal(out, &answer); err != nil || !strings.Contains(answer.Error, tt.message) {
				t.Errorf("answer %.200q (%v), want an error naming %q", out, err, tt.message)
			}
			if recent[0].Outcome != webhook.OutcomeTooComplex {
				t.Errorf("recorded outcome %q, want %q", recent[0].Outcome, webhook.OutcomeTooComplex)
			}
			if n := r.metric(tt.event, webhook.OutcomeTooComplex); n != 1 {
				t.Errorf("too_complex metric %d, want 1", n)
			}
			if got := r.j.all(); len(got) != 0 {
				t.Errorf("a refused delivery asked for %v", got)
			}
		})
	}
}

// TestFormFieldBound: GitHub's form has one field; a form of more than
// MaxFormFields fields is refused before it is parsed.
func TestFormFieldBound(t *testing.T) {
	push := load(t, "push.json")
	for _, c := range []struct {
		extra  int
		status int
	}{{webhook.MaxFormFields - 1, 202}, {webhook.MaxFormFields, 400}, {1 << 20, 400}} {
		r := newRig(t)
		body := append(bytes.Repeat([]byte("a=1&"), c.extra), asForm(push)...)
		status, out := r.send(t, delivery{event: "push", id: "form-1", contentType: "application/x-www-form-urlencoded", body: body})
		if status != c.status {
			t.Fatalf("%d extra fields: status %d, want %d: %.200s", c.extra, status, c.status, out)
		}
		if status == http.StatusBadRequest && !strings.Contains(string(out), "more than 64") {
			t.Errorf("%d extra fields: answer %.200q does not name the bound", c.extra, out)
		}
		r.h.Close()
		if recent, _ := r.log.Recent(0); len(recent) != 1 || (status == 400 && recent[0].Outcome != webhook.OutcomeTooComplex) {
			t.Errorf("%d extra fields: recorded %+v", c.extra, recent)
		}
	}
}
