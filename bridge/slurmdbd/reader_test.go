package slurmdbd

import (
	"strings"
	"testing"
)

func TestAssocRowsQueryNeedsNoTreeColumns(t *testing.T) {
	// slurmdbd 25.05 and later have no lft/rgt in <cluster>_assoc_table; naming either is an
	// SQL error there.
	q := assocRowsQuery("`testbed_assoc_table`")
	for _, word := range strings.FieldsFunc(q, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' }) {
		if word == "lft" || word == "rgt" {
			t.Fatalf("query names %s: %s", word, q)
		}
	}
	if !strings.HasSuffix(q, "ORDER BY id_assoc") {
		t.Fatalf("query does not order by id_assoc: %s", q)
	}
}
