package policy

func addAll(dst, src map[string]int) {
	for t, n := range src {
		dst[t] += n
	}
}

func sum(m map[string]int) int {
	s := 0
	for _, n := range m {
		s += n
	}
	return s
}

// scaled is m times n.
func scaled(m map[string]int, n int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v * n
	}
	return out
}

func clone(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
