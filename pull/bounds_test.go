package pull

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/deepjson"
	"github.com/skillreg/skillreg/internal/hostile"
	"github.com/skillreg/skillreg/jsonbound"
)

// TestPullRefusesHostileResponses runs pull against a real loopback MCP
// server that answers one method with JSON nested 2,000,000 levels deep
// (and the neighbours of the bound), with too many values, or with a body
// over the size bound, as JSON and as an event stream: the run ends with
// ErrProtocol naming the bound broken, and nothing is written.
func TestPullRefusesHostileResponses(t *testing.T) {
	const smallMax = 1 << 20
	// The result is the second level of a message, so x nested n deep
	// makes a message n+2 deep.
	nested := func(n int) []byte { return deepjson.Embed([]byte(`{"skills":[]}`), "x", deepjson.Arrays(n)) }
	cases := []struct {
		name     string
		a        hostile.Answer
		want     error  // nil: the run succeeds
		protocol string // "" for the newest
	}{
		{"server/discover 2,000,000 deep", hostile.Answer{Method: "server/discover", Result: deepjson.Arrays(2_000_000)}, jsonbound.ErrTooDeep, ""},
		{"initialize 2,000,000 deep", hostile.Answer{Method: "initialize", Result: deepjson.Arrays(2_000_000)}, jsonbound.ErrTooDeep, "2025-11-25"},
		{"initialize over the size bound", hostile.Answer{Method: "initialize", Result: []byte("{}"), Pad: smallMax}, ErrResponseTooLarge, "2025-11-25"},
		{"skills/list 2,000,000 deep, 2025-11-25", hostile.Answer{Method: "skills/list", Result: nested(2_000_000)}, jsonbound.ErrTooDeep, "2025-11-25"},
		{"skills/list 2,000,000 deep", hostile.Answer{Method: "skills/list", Result: nested(2_000_000)}, jsonbound.ErrTooDeep, ""},
		{"skills/list 2,000,000 deep, event stream", hostile.Answer{Method: "skills/list", Result: nested(2_000_000), SSE: true}, jsonbound.ErrTooDeep, ""},
		{"skills/list 2,000,000 objects deep", hostile.Answer{Method: "skills/list", Result: deepjson.Embed([]byte(`{"skills":[]}`), "x", deepjson.Objects(2_000_000))}, jsonbound.ErrTooDeep, ""},
		{"skills/list 1,001 deep", hostile.Answer{Method: "skills/list", Result: nested(999)}, jsonbound.ErrTooDeep, ""},
		{"skills/list 1,001 deep, event stream", hostile.Answer{Method: "skills/list", Result: nested(999), SSE: true}, jsonbound.ErrTooDeep, ""},
		{"skills/list 1,000 deep", hostile.Answer{Method: "skills/list", Result: nested(998)}, nil, ""},
		{"skills/list 1,000 deep, event stream", hostile.Answer{Method: "skills/list", Result: nested(998), SSE: true}, nil, ""},
		{"skills/list 999 deep", hostile.Answer{Method: "skills/list", Result: nested(997)}, nil, ""},
		{"skills/list with too many values", hostile.Answer{Method: "skills/list", Result: deepjson.Embed([]byte(`{"skills":[]}`), "x", deepjson.EmptyObjects(deepjson.HugeArrayLen))}, jsonbound.ErrTooManyTokens, ""},
		{"skills/list over the size bound", hostile.Answer{Method: "skills/list", Result: []byte(`{"skills":[]}`), Pad: smallMax}, ErrResponseTooLarge, ""},
		{"skills/list over the size bound, event stream", hostile.Answer{Method: "skills/list", Result: []byte(`{"skills":[]}`), Pad: smallMax, SSE: true}, ErrResponseTooLarge, ""},
		{"resources/read 2,000,000 deep", hostile.Answer{Method: "resources/read", Result: deepjson.Embed([]byte(`{"contents":[]}`), "x", deepjson.Arrays(2_000_000))}, jsonbound.ErrTooDeep, ""},
		{"skills/get 2,000,000 deep", hostile.Answer{Method: "skills/get", Result: deepjson.Embed([]byte(`{"skill":null}`), "x", deepjson.Arrays(2_000_000))}, jsonbound.ErrTooDeep, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inner := hostile.New(t, hostile.Options{Skills: hostileSkills()})
			srv := hostile.NewRaw(t, inner, c.a)
			dir := t.TempDir()
			names := []string(nil)
			if c.a.Method == "skills/get" {
				names = []string{"skill://acme/good/SKILL.md"} // a URI is resolved with skills/get
			}
			var rep *Report
			var err error
			if c.a.Pad > 0 {
				// The size bound, made small (the CLI test in cmd/skillreg
				// sends 128 MiB at the default): Pull takes no option.
				var cl *Client
				cl, err = Connect(context.Background(), ClientOptions{Server: srv.URL, ProtocolVersion: c.protocol, MaxResponseBytes: smallMax})
				if err == nil {
					_, err = cl.List(context.Background())
					cl.Close()
				}
			} else {
				rep, err = Pull(context.Background(), Options{Dir: dir, Server: srv.URL, ProtocolVersion: c.protocol}, names)
			}
			if srv.Answered.Load() == 0 {
				t.Fatalf("the hostile answer was never asked for (err %v)", err)
			}
			if c.want == nil {
				if err != nil {
					t.Fatalf("Pull = %v, want success", err)
				}
				return
			}
			if !errors.Is(err, ErrProtocol) || !errors.Is(err, c.want) {
				t.Fatalf("Pull = %v, want ErrProtocol and %v", err, c.want)
			}
			if msg := err.Error(); !strings.Contains(msg, c.want.Error()) || len(msg) > 300 {
				t.Errorf("the error does not name the bound clearly: %.400s", msg)
			}
			if rep != nil && len(rep.Installed) > 0 {
				t.Errorf("installed %+v", rep.Installed)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("wrote %d entries into the target, want none", len(ents))
			}
		})
	}
}
