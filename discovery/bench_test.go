package discovery_test

import (
	"fmt"
	"testing"

	"github.com/skillreg/skillreg/discovery"
	"github.com/skillreg/skillreg/internal/fakegithub"
)

// BenchmarkRefresh800 is one refresh of an organisation of 800
// repositories, 50 with the topic and skills: the first (cold) and the
// unchanged ones after it (all 304). It reports the requests each asks
// and what they cost of the authenticated rate limit.
func BenchmarkRefresh800(b *testing.B) {
	for _, cold := range []bool{true, false} {
		b.Run(fmt.Sprintf("cold=%v", cold), func(b *testing.B) {
			e := &env{clock: fakegithub.NewClock(epoch)}
			e.gh = fakegithub.New(fakegithub.Options{Now: e.clock.Now, Token: token, AuthenticatedLimit: 1 << 30})
			defer e.gh.Close()
			for i := range 800 {
				r := fakegithub.Repo{FullName: fmt.Sprintf("acme/r%03d", i), Files: []string{"README.md"}}
				if i%16 == 0 {
					r.Topics, r.Files = []string{"agent-skills"}, skillFiles
				}
				e.gh.AddRepo(r)
			}
			o := e.options(b)
			tpl := discovery.Template{Name: "acme", Owner: "acme", Topic: "agent-skills"}
			var m *discovery.Manager
			if !cold {
				m = newManager(b, o, tpl)
				refresh(b, m)
			}
			requests, spent := 0, 0
			b.ResetTimer()
			for b.Loop() {
				if cold {
					b.StopTimer()
					m = newManager(b, o, tpl)
					b.StartTimer()
				}
				total := e.gh.Total()
				_, before, _ := e.gh.RateLimit(true)
				refresh(b, m)
				_, after, _ := e.gh.RateLimit(true)
				requests += e.gh.Total() - total
				spent += before - after
			}
			if n := len(m.Included()); n != 50 {
				b.Fatalf("%d included", n)
			}
			b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
			b.ReportMetric(float64(spent)/float64(b.N), "ratelimit/op")
		})
	}
}
