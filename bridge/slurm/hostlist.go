package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// maxHostList bounds how many names one expression may expand to, so that a malformed or
// hostile value ("n[0-999999999]") costs no memory.
const maxHostList = 1 << 16

// ExpandHostList expands a Slurm hostlist as slurmdbd and squeue print it, e.g.
// "a100-[1-2,4],v100-1" into a100-1, a100-2, a100-4, v100-1. Zero-padded ranges keep their
// width ("n[01-03]"). "" and "None assigned" are no nodes.
func ExpandHostList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "None assigned" || s == "(null)" {
		return nil, nil
	}
	var out []string
	for len(s) > 0 {
		// One name: up to the next comma outside brackets.
		depth, end := 0, len(s)
		for i, c := range s {
			if c == '[' {
				depth++
			} else if c == ']' {
				depth--
			} else if c == ',' && depth == 0 {
				end = i
				break
			}
		}
		names, err := expandOne(s[:end])
		if err != nil {
			return nil, err
		}
		if out = append(out, names...); len(out) > maxHostList {
			return nil, fmt.Errorf("hostlist %q: more than %d names", s, maxHostList)
		}
		s = strings.TrimPrefix(s[end:], ",")
	}
	return out, nil
}

// expandOne expands one name with at most one bracketed range list, e.g. "a100-[1-2,4]".
func expandOne(s string) ([]string, error) {
	open := strings.IndexByte(s, '[')
	if open < 0 {
		if s == "" || strings.ContainsAny(s, "]") {
			return nil, fmt.Errorf("hostlist: bad name %q", s)
		}
		return []string{s}, nil
	}
	closing := strings.IndexByte(s[open:], ']')
	if closing < 0 {
		return nil, fmt.Errorf("hostlist: %q has no ]", s)
	}
	closing += open
	prefix, suffix := s[:open], s[closing+1:]
	if strings.ContainsAny(suffix, "[]") {
		return nil, fmt.Errorf("hostlist: %q has more than one range list", s)
	}
	var out []string
	for part := range strings.SplitSeq(s[open+1:closing], ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a || b-a >= maxHostList {
			return nil, fmt.Errorf("hostlist: bad range %q in %q", part, s)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%s%0*d%s", prefix, len(lo), n, suffix))
		}
		if len(out) > maxHostList {
			return nil, fmt.Errorf("hostlist %q: more than %d names", s, maxHostList)
		}
	}
	return out, nil
}
