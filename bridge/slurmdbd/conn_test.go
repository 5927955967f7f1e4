package slurmdbd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadPasswordRefusesSharedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pw")
	if err := os.WriteFile(path, []byte("s3cret\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPassword(path); err == nil || !strings.Contains(err.Error(), "mode 0640") || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("group-readable file: err %v, want a refusal naming the mode and the fix", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	pw, err := ReadPassword(path)
	if err != nil || pw != "s3cret" {
		t.Errorf("ReadPassword = %q, %v", pw, err)
	}
	if _, err := ReadPassword(""); err == nil {
		t.Error("no file given, no error")
	}
}
