package main

import "testing"

func TestGCPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 400},
		{1 << 20, 1000},  // capped
		{8 << 20, 800},   // 64 MiB of headroom over 8 MiB live
		{32 << 20, 200},  //
		{64 << 20, 100},  // the default from here on
		{110 << 20, 100}, // a 10,000-skill catalog under load
		{4 << 30, 100},   //
	} {
		if got := gcPercent(c.live); got != c.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}
