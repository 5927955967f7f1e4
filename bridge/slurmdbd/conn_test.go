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

// A systemd of Debian sid (262) hands LoadCredential= copies over as 0440 root:root with an ACL
// for the service; 252 as 0400 owned by the service. Both are the service's alone; the same
// mode outside $CREDENTIALS_DIRECTORY, or others' bits inside it, are refused.
func TestReadPasswordTakesSystemdCredential(t *testing.T) {
	creds := t.TempDir()
	path := filepath.Join(creds, "db-password")
	if err := os.WriteFile(path, []byte("s3cret\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o440); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	if _, err := ReadPassword(path); err == nil {
		t.Error("0440 outside systemd's credentials directory was taken")
	}
	t.Setenv("CREDENTIALS_DIRECTORY", creds)
	if pw, err := ReadPassword(path); err != nil || pw != "s3cret" {
		t.Errorf("systemd's 0440 credential: ReadPassword = %q, %v", pw, err)
	}
	other := filepath.Join(t.TempDir(), "db-password")
	if err := os.WriteFile(other, []byte("s3cret\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPassword(other); err == nil {
		t.Error("0440 in another directory than $CREDENTIALS_DIRECTORY was taken")
	}
	for _, mode := range []os.FileMode{0o444, 0o460} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPassword(path); err == nil {
			t.Errorf("mode %04o in the credentials directory was taken", mode)
		}
	}
}
