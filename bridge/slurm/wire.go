package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Slurm's JSON comes in two generations. Slurm 22.05 (data_parser v0.0.38) prints integers as
// plain numbers and a job's state as one string. From 23.11 (v0.0.40; 24.11 prints v0.0.42,
// 26.05 v0.0.45) integers that may be unset or unlimited are {"set", "infinite", "number"}
// objects and states are arrays of a base state and flags. The wire types below accept both,
// so one decoder reads every release; which one printed an answer shows only in its meta.

// number is a Slurm JSON integer in either form.
type number struct {
	Value    int64
	Set      bool // false for null and for {"set": false}
	Infinite bool
}

func (n *number) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*n = number{}
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		var obj struct {
			Set      *bool        `json:"set"`
			Infinite bool         `json:"infinite"`
			Number   *json.Number `json:"number"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return err
		}
		if obj.Set == nil || obj.Number == nil {
			return fmt.Errorf("number object %s lacks set or number", b)
		}
		v, err := parseInteger(*obj.Number)
		if err != nil {
			return err
		}
		*n = number{Value: v, Set: *obj.Set, Infinite: obj.Infinite}
		return nil
	}
	// json.Number would also take a quoted "5"; Slurm never quotes numbers.
	var plain json.Number
	if len(b) == 0 || b[0] == '"' || json.Unmarshal(b, &plain) != nil {
		return fmt.Errorf("not a number: %s", b)
	}
	v, err := parseInteger(plain)
	if err != nil {
		return err
	}
	*n = number{Value: v, Set: true}
	return nil
}

// parseInteger takes integers only; Slurm prints some counters as floats (1.0), which are
// whole numbers too.
func parseInteger(n json.Number) (int64, error) {
	if v, err := n.Int64(); err == nil {
		return v, nil
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt64 {
		return 0, fmt.Errorf("not an integer: %s", n)
	}
	return int64(f), nil
}

// Slurm's "not set" and "unlimited" in 32-bit fields of 22.05's plain numbers (NO_VAL, INFINITE).
const (
	noVal32    = 0xfffffffe
	infinite32 = 0xffffffff
)

// uint32 is the value, or 0 when unset or unlimited.
func (n number) uint32() (uint32, error) {
	if !n.Set || n.Infinite {
		return 0, nil
	}
	if n.Value < 0 || n.Value > math.MaxUint32 {
		return 0, fmt.Errorf("%d out of range", n.Value)
	}
	if n.Value == noVal32 || n.Value == infinite32 {
		return 0, nil
	}
	return uint32(n.Value), nil
}

// uint64 is the value, or 0 when unset or unlimited.
func (n number) uint64() (uint64, error) {
	if !n.Set || n.Infinite {
		return 0, nil
	}
	if n.Value < 0 {
		return 0, fmt.Errorf("%d out of range", n.Value)
	}
	return uint64(n.Value), nil
}

// int is the value, or 0 when unset or unlimited.
func (n number) int() (int, error) {
	v, err := n.uint32()
	return int(v), err
}

// unixTime is the value as seconds since the epoch; unset, unlimited and 0 ("not known") give
// the zero time.
func (n number) unixTime() int64 {
	if !n.Set || n.Infinite {
		return 0
	}
	return n.Value
}

// stateNames is a state as one string (22.05: "RUNNING", "idle") or as an array (23.11 on:
// ["RUNNING"], ["PENDING", "REQUEUE_HOLD"], ["IDLE", "DRAIN"]).
type stateNames []string

func (s *stateNames) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stateNames{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("state is neither a string nor an array of strings: %s", b)
	}
	*s = many
	return nil
}

// splitState separates the base state from the flags, by name: the arrays list the base first,
// but 22.05's single string may be a flag alone (it prints the flag instead of the base).
func splitState(names stateNames, bases []string) (base string, flags []string) {
	for _, name := range names {
		if base == "" && slices.Contains(bases, strings.ToUpper(name)) {
			base = name
			continue
		}
		flags = append(flags, strings.ToUpper(name))
	}
	return base, flags
}

// parsePipes reads -n -P output (one record a line, fields split by "|") with n fields a line;
// the last field takes any further "|" (a job name may have one).
func parsePipes(out []byte, n int, what string) ([][]string, error) {
	var rows [][]string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, "|", n)
		if len(f) != n {
			return nil, fmt.Errorf("%s line %q: want %d fields", what, line, n)
		}
		rows = append(rows, f)
	}
	return rows, nil
}
