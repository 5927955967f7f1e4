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

func TestTRESID(t *testing.T) {
	names := map[uint32]string{1: "cpu", 1001: "gres/gpu", 1002: "gres/gpu:a100"}
	if id, ok := TRESID(names, "gres/gpu:a100"); !ok || id != 1002 {
		t.Errorf("gres/gpu:a100: %d, %v", id, ok)
	}
	if id, ok := TRESID(names, "gres/gpu:v100"); ok {
		t.Errorf("gres/gpu:v100 found as %d", id)
	}
}
