package skill

import (
	"testing"

	"github.com/skillreg/skillreg/internal/corpus"
)

func BenchmarkParseSkillMD(b *testing.B) {
	data := corpus.Skill(42, corpus.Options{})[0].Data
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := ParseSkillMD(data); err != nil {
			b.Fatal(err)
		}
	}
}
