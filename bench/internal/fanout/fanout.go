// Package fanout runs the benchmarks' many small submissions side by side.
package fanout

import (
	"sync"
	"sync/atomic"
)

// Run runs do(0..n-1) on 8 workers and returns the first error.
func Run(n int, do func(i int) error) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
