package testbed

import (
	"errors"
	"strings"
)

// QuotaTableWith is a testbed quota table with settings lines (e.g. "reclaimBackoff: 60s")
// added to its settings section: the quotad tests and the trace replay compare quota policies
// on the testbed's projects this way.
func QuotaTableWith(table []byte, settings ...string) ([]byte, error) {
	const section = "\nsettings:\n"
	if !strings.Contains(string(table), section) {
		return nil, errors.New("the quota table has no settings section to add to")
	}
	return []byte(strings.Replace(string(table), section, section+"  "+strings.Join(settings, "\n  ")+"\n", 1)), nil
}
