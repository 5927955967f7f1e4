package slurmdbd

import "testing"

func TestTRESID(t *testing.T) {
	names := map[uint32]string{1: "cpu", 1001: "gres/gpu", 1002: "gres/gpu:a100"}
	if id, ok := TRESID(names, "gres/gpu:a100"); !ok || id != 1002 {
		t.Errorf("gres/gpu:a100: %d, %v", id, ok)
	}
	if id, ok := TRESID(names, "gres/gpu:v100"); ok {
		t.Errorf("gres/gpu:v100 found as %d", id)
	}
}
