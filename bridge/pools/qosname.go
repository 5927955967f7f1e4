package pools

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The QOS naming rule: how quotad, elasticd, the job_submit plugin, doctor and the benchmarks
// build each project's guaranteed, borrow and elastic QOS names from its account, and how they
// recognise one.
//
// Case: Slurm compares QOS names without case and sacctmgr stores them in lower case
// ("sacctmgr add qos Borrow-A" creates borrow-a). A name is built in lower case, as Slurm will
// print it, and a name from anywhere else (a user's --qos, a config, a job's QOS) is compared
// by its QOSKey, never as written.
//
// Projects: a project is a Slurm account, which sacctmgr stores in lower case too, and squeue
// reports a job's account by that stored name. A quota table naming "Proj-A" would never meet
// a job of proj-a, so CheckAccount refuses it rather than fold it.
//
// Patterns: "{account}" stands for the account. quotad builds every QOS per project
// (PerProject); pools.yaml may also name one shared QOS, since a quotad from before per-project
// QOS lends in one and the plugin must guard it while that quotad runs.
const (
	AccountPlaceholder = "{account}"
	// DefaultGuaranteedQOS, DefaultBorrowQOS and DefaultElasticQOS are the patterns when the
	// quota table (settings.guaranteedQOS, borrowQOS, elasticQOS) names none, and pools.yaml's
	// borrow_qos and elastic_qos when it names none.
	DefaultGuaranteedQOS = "guar-{account}"
	DefaultBorrowQOS     = "borrow-{account}"
	DefaultElasticQOS    = "elastic-{account}"
	// MaxQOSName is the longest QOS name slurmdbd can store: its qos_table.name is a TINYTEXT.
	MaxQOSName = 255
)

// QOSName is the QOS pattern names for account: the pattern with the account in place of
// {account} (a pattern without it is one shared name), in lower case.
func QOSName(pattern, account string) string {
	return QOSKey(strings.ReplaceAll(strings.TrimSpace(pattern), AccountPlaceholder, account))
}

// QOSKey is the form in which Slurm compares a QOS name: trimmed, in lower case. Names built by
// QOSName already are; a name read elsewhere is compared and kept in maps by its key.
func QOSKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// MatchQOS says whether qos is a QOS pattern names: that name, or, when pattern holds
// "{account}", the pattern with any non-empty account in its place; compared by QOSKey.
func MatchQOS(pattern, qos string) bool {
	pattern, qos = QOSKey(pattern), QOSKey(qos)
	if qos == "" {
		return false
	}
	if !strings.Contains(pattern, AccountPlaceholder) {
		return qos == pattern
	}
	_, ok := accountIn(pattern, qos)
	return ok
}

// accountIn is what stands for "{account}" in qos under a templated pattern, both QOSKeys;
// false when qos is not a name the pattern builds.
func accountIn(pattern, qos string) (string, bool) {
	prefix, suffix, _ := strings.Cut(pattern, AccountPlaceholder)
	if len(qos) <= len(prefix)+len(suffix) || !strings.HasPrefix(qos, prefix) || !strings.HasSuffix(qos, suffix) {
		return "", false
	}
	return qos[len(prefix) : len(qos)-len(suffix)], true
}

// BorrowTierName is the QOS, under a borrow QOS pattern, of account's borrowers of at most
// gpus GPUs (quotad's settings.borrowSizeTiers): the pattern's name for the account
// "ACCOUNT-gN", so that every rule recognising a borrow QOS by its pattern (MatchQOS: the
// job_submit plugin's guard, doctor, the reclaim backoff) recognises the tiers too.
func BorrowTierName(pattern, account string, gpus int) string {
	return QOSName(pattern, account+"-g"+strconv.Itoa(gpus))
}

// BorrowTierOf reads a name BorrowTierName built under pattern: the account and the tier's
// GPUs. An account that itself ends in "-gN" reads as a tier: a caller that knows the projects
// tells the two apart (quotad), and quotad refuses a table whose tiers are another project's
// borrow QOS.
func BorrowTierOf(pattern, qos string) (account string, gpus int, ok bool) {
	pattern = QOSKey(pattern)
	if !strings.Contains(pattern, AccountPlaceholder) {
		return "", 0, false
	}
	inner, ok := accountIn(pattern, QOSKey(qos))
	i := strings.LastIndex(inner, "-g")
	if !ok || i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(inner[i+2:])
	if err != nil || n < 1 || strconv.Itoa(n) != inner[i+2:] {
		return "", 0, false
	}
	return inner[:i], n, true
}

// protectedSuffix ends the account part of a protected borrow QOS' name.
const protectedSuffix = "-hipri"

// ProtectedBorrowName is the QOS, under a borrow QOS pattern, of account's borrowers that a
// claim below the project's reclaim priority threshold may not take (quotad's
// reclaimPriorityThreshold): the pattern's name for the account "ACCOUNT-hipri", so that every
// rule recognising a borrow QOS by its pattern recognises it too, as BorrowTierName.
func ProtectedBorrowName(pattern, account string) string {
	return QOSName(pattern, account+protectedSuffix)
}

// ProtectedBorrowOf reads a name ProtectedBorrowName built under pattern: the project's account.
// An account that itself ends in "-hipri" reads as one, as with BorrowTierOf.
func ProtectedBorrowOf(pattern, qos string) (account string, ok bool) {
	pattern = QOSKey(pattern)
	if !strings.Contains(pattern, AccountPlaceholder) {
		return "", false
	}
	inner, ok := accountIn(pattern, QOSKey(qos))
	account, found := strings.CutSuffix(inner, protectedSuffix)
	if !ok || !found || account == "" {
		return "", false
	}
	return account, true
}

// PerProject says whether pattern names one QOS per project: it holds "{account}" exactly once.
func PerProject(pattern string) bool { return strings.Count(pattern, AccountPlaceholder) == 1 }

// CheckQOSPattern says what is wrong with a QOS pattern, or nil: "{account}" at most once, and
// the names it builds valid QOS names (CheckQOSName, the pattern in either case).
func CheckQOSPattern(pattern string) error {
	if strings.Count(pattern, AccountPlaceholder) > 1 {
		return fmt.Errorf("holds %s more than once", AccountPlaceholder)
	}
	if CheckQOSName(QOSName(pattern, "a")) != nil {
		return fmt.Errorf("is not a QOS name (letters, digits, '_', '-', '.', and %s for the account)", AccountPlaceholder)
	}
	return nil
}

// CheckQOSName says what is wrong with a QOS name quotad would create, or nil: sacctmgr splits
// its arguments at ',' and '=' and stores the name lower case, and slurmdbd keeps MaxQOSName
// bytes of it.
func CheckQOSName(name string) error {
	switch {
	case name == "" || !nameChars(name) || !alnum(name[0]):
		return errors.New("is not a valid QOS name (lowercase letters, digits, '_', '.', '-')")
	case len(name) > MaxQOSName:
		return fmt.Errorf("is %d bytes long, more than the %d slurmdbd stores", len(name), MaxQOSName)
	}
	return nil
}

// CheckAccount says what is wrong with account as a project's name, or nil: it must be the
// name Slurm stores and reports, lower case, and short enough for slurmdbd.
func CheckAccount(account string) error {
	lower := strings.ToLower(account)
	switch {
	case lower == "" || !nameChars(lower) || !alnum(lower[0]):
		return errors.New("is not a valid Slurm account name (lowercase letters, digits, '_', '.', '-')")
	case lower != account:
		return fmt.Errorf("is not a valid Slurm account name: sacctmgr stores accounts in lower case, and jobs report this one as %s", lower)
	case len(account) > MaxQOSName:
		return fmt.Errorf("is %d bytes long, more than the %d slurmdbd stores", len(account), MaxQOSName)
	}
	return nil
}

// nameChars: lowercase letters, digits, '_', '.', '-' only (sacctmgr takes more; quotad's names
// need no more, and none of these is a separator in sacctmgr's arguments).
func nameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
