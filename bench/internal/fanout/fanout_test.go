package fanout

import (
	"errors"
	"sync"
	"testing"
)

func TestRunDoesEveryIndexOnceAndReturnsAnError(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	if err := Run(100, func(i int) error { mu.Lock(); seen[i]++; mu.Unlock(); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if seen[i] != 1 {
			t.Fatalf("index %d done %d times", i, seen[i])
		}
	}
	boom := errors.New("boom")
	if err := Run(20, func(i int) error {
		if i == 7 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}
