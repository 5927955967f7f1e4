package testbed

import (
	"errors"
	"strings"
)

// QuotaTableWith is a testbed quota table with settings lines (e.g. "reclaimBackoff: 60s") in
// its settings section, each in place of the table's own line of that setting: the quotad tests
// and the trace replay compare quota policies on the testbed's projects this way. A line of a
// name alone with a colon ("borrowSizeTiers:") removes the table's line, so that the setting
// takes its default.
func QuotaTableWith(table []byte, settings ...string) ([]byte, error) {
	const section = "\nsettings:\n"
	head, rest, ok := strings.Cut("\n"+string(table), section)
	if !ok {
		return nil, errors.New("the quota table has no settings section to add to")
	}
	lines := strings.SplitAfter(rest, "\n")
	end := 0 // the section's lines are indented; the next key is not
	for end < len(lines) && (strings.HasPrefix(lines[end], " ") || strings.TrimSpace(lines[end]) == "") {
		end++
	}
	kept := lines[:0:0]
	for _, l := range lines[:end] {
		if !named(settings, l) {
			kept = append(kept, l)
		}
	}
	var added []string
	for _, s := range settings {
		if _, value, _ := strings.Cut(s, ":"); strings.TrimSpace(value) != "" {
			added = append(added, "  "+s+"\n")
		}
	}
	return []byte((head + section)[1:] + strings.Join(added, "") + strings.Join(kept, "") + strings.Join(lines[end:], "")), nil
}

// named says whether the settings line l of a table sets one of the settings given.
func named(settings []string, l string) bool {
	key, _, ok := strings.Cut(strings.TrimSpace(l), ":")
	if !ok || strings.HasPrefix(key, "#") {
		return false
	}
	for _, s := range settings {
		if name, _, _ := strings.Cut(s, ":"); strings.TrimSpace(name) == key {
			return true
		}
	}
	return false
}
