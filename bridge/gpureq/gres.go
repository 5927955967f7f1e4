// Package gpureq is Slurm's vocabulary for GPU requests and TRES strings, from 22.05 to 26.05.
//
// It reads the four job_desc GRES fields (tres_per_job, tres_per_node, tres_per_socket,
// tres_per_task) in each release's spelling: "gres:gpu:a100:1,gres:mps:100" (22.05),
// "gres/gpu:a100:1" and "cpu:4" (23.11), "gres/gpu:a100=1", "gres/gpu=2" and "cpu=4" (24.05
// on); the GRES of a node as sinfo prints it ("gpu:a100:4(S:0)"), and accounting TRES strings in both the named form
// ("cpu=1,mem=1000M,gres/gpu:a100=1") and the id form ("1=16,2=128000,1001=4").
//
// Every parser takes untrusted input: it allocates little, never panics, and its errors name
// the offending token. It does no I/O, so the job_submit plugin may call it in slurmctld's RPC
// thread.
package gpureq

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// GPUName is the GRES name that means GPUs; other GRES (mps, shard, nic...) are kept apart.
const GPUName = "gpu"

// Gres is one entry of a GRES list: "gres:gpu:a100:2" is {Name: "gpu", Type: "a100", Count: 2}.
// Type is empty when the request accepts any type.
type Gres struct {
	Name  string
	Type  string
	Count uint64
}

// IsGPU reports whether the entry counts GPUs.
func (g Gres) IsGPU() bool { return g.Name == GPUName }

// String spells the entry as job_desc does, "gres:NAME[:TYPE]:COUNT".
func (g Gres) String() string {
	if g.Type == "" {
		return fmt.Sprintf("gres:%s:%d", g.Name, g.Count)
	}
	return fmt.Sprintf("gres:%s:%s:%d", g.Name, g.Type, g.Count)
}

// SyntaxError says which token of which field could not be read.
type SyntaxError struct {
	Field   string // e.g. "tres_per_node"
	Token   string // the offending comma-separated entry, truncated
	Problem string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s: bad token %q: %s", e.Field, e.Token, e.Problem)
}

// maxTokenInError bounds what a user-supplied token can add to a log line or err_msg.
const maxTokenInError = 64

func syntaxError(field, token, format string, args ...any) *SyntaxError {
	if len(token) > maxTokenInError {
		token = token[:maxTokenInError] + "..."
	}
	return &SyntaxError{Field: field, Token: token, Problem: fmt.Sprintf(format, args...)}
}

// ParseGres reads one job_desc tres_per_* value and returns its GRES entries. Every release's
// spelling is read (see the package comment); entries that name another TRES ("cpu=4", "cpu:4",
// "mem=4G", "license/foo=1") are checked and left out, since they never count GPUs. A missing
// count means 1. field names the value in errors. An empty string is an empty list.
func ParseGres(field, s string) ([]Gres, error) {
	if s == "" {
		return nil, nil
	}
	out := make([]Gres, 0, 1+strings.Count(s, ","))
	err := eachGres(field, s, func(g Gres) { out = append(out, g) })
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return out, nil
}

// eachGres calls fn for every GRES entry of a tres_per_* value, skipping (after checking) the
// entries of other TRES; Parse uses it to fill a Request without an intermediate slice.
func eachGres(field, s string, fn func(Gres)) error {
	if s == "" {
		return nil
	}
	for entry := range strings.SplitSeq(s, ",") {
		g, isGres, err := parseTRESPerEntry(field, entry)
		if err != nil {
			return err
		}
		if isGres {
			fn(g)
		}
	}
	return nil
}

// nonGresTRES are the TRES types other than gres that a tres_per_* entry can start with.
// Slurm's clients put cpu (from -c, 23.11 on) and license (--tres-per-task) there and refuse
// the others for --tres-per-task (src/common/slurm_opt.c, _validate_tres_per_task); they are
// listed so that a job_desc built by other means (REST, a lua or cli_filter plugin) is still
// never read as asking for GPUs.
var nonGresTRES = [...]string{"cpu", "mem", "energy", "node", "billing", "fs", "vmem", "pages", "bb", "license"}

// parseTRESPerEntry reads one entry of a tres_per_* value. isGres is false for an entry of
// another TRES type, which is checked but carries no Gres.
//
// Slurm reads these entries with slurm_get_next_tres (src/common/slurm_protocol_defs.c): the
// TRES type runs up to the first '/', ':' or '='; then NAME[:TYPE], then an optional count after
// the last '=' or ':'. What each release writes (src/common/slurm_opt.c, src/common/proc_args.c
// xfmt_tres, gres_prepend_tres_type in src/common/gres.c or src/interfaces/gres.c):
//   - 22.05: "gres:gpu:a100:1" for --gres, --gpus*, no cpu entry;
//   - 23.11: "gres/gpu:a100:1"; tres_per_task gets "cpu:4" from -c;
//   - 24.05 to 26.05: --gres, --gpus, --gpus-per-node/socket keep "gres/gpu:a100:1";
//     tres_per_task is rewritten by slurm_option_update_tres_per_task to "gres/gpu:a100=1",
//     "gres/gpu=2" and "cpu=4", and --tres-per-task's "gres:"/"license:" prefixes become
//     "gres/"/"license/" (slurm_format_tres_string).
//
// Users may type any of these in --tres-per-task or --gres, so every form is read in every
// field. A bare "gpu:2" (no prefix) is read as GRES, as older clients and sinfo spell it.
func parseTRESPerEntry(field, entry string) (g Gres, isGres bool, err error) {
	if entry == "" {
		return Gres{}, false, syntaxError(field, entry, "empty entry")
	}
	if rest, ok := strings.CutPrefix(entry, "gres:"); ok {
		g, err := parseGresBody(field, entry, rest)
		return g, err == nil, err
	}
	if rest, ok := strings.CutPrefix(entry, "gres/"); ok {
		g, err := parseGresBody(field, entry, rest)
		return g, err == nil, err
	}
	kind := entry
	if i := strings.IndexAny(entry, "/:="); i >= 0 {
		kind = entry[:i]
	}
	for _, t := range nonGresTRES {
		if strings.EqualFold(kind, t) {
			return Gres{}, false, checkOtherTRES(field, entry, kind, entry[len(kind):])
		}
	}
	g, err = parseGresBody(field, entry, entry)
	return g, err == nil, err
}

// checkOtherTRES checks the part of a non-GRES entry after its TRES type kind: a name for the
// TRES types that have one ("license/matlab=1" from 24.05, "license:matlab:1" in 23.11,
// "fs/disk", "bb/datawarp"), then an optional count after ':' or '=', digits with an optional
// size unit ("mem=4G").
func checkOtherTRES(field, entry, kind, rest string) error {
	if strings.EqualFold(kind, "license") || strings.EqualFold(kind, "fs") || strings.EqualFold(kind, "bb") {
		if rest == "" || (rest[0] != '/' && rest[0] != ':') {
			return syntaxError(field, entry, "want %s/NAME", kind)
		}
		name := rest[1:]
		rest = ""
		if i := strings.IndexAny(name, ":="); i >= 0 {
			name, rest = name[:i], name[i:]
		}
		if !validOtherTRESName(kind, name) {
			return syntaxError(field, entry, "TRES name %q is not a word of letters, digits, '_', '-' or '.'%s", name, remoteNote(kind))
		}
	}
	if rest == "" {
		return nil
	}
	value := rest[1:]
	if rest[0] == '/' {
		return syntaxError(field, entry, "%s has no name", kind)
	}
	if _, err := parseSizeMB(value); err != nil {
		return syntaxError(field, entry, "count %q: %v", value, err)
	}
	return nil
}

// validOtherTRESName checks the name of a license, fs or bb TRES. A license may be remote:
// slurmdbd's licenses are named NAME@SERVER (sacctmgr add resource; src/slurmctld/licenses.c
// prints them so), and any user allowed the license asks for it so (-L matlab@flex:1).
func validOtherTRESName(kind, name string) bool {
	if strings.EqualFold(kind, "license") {
		if local, server, remote := strings.Cut(name, "@"); remote {
			return ValidName(local) && ValidName(server)
		}
	}
	return ValidName(name)
}

func remoteNote(kind string) string {
	if strings.EqualFold(kind, "license") {
		return " (or NAME@SERVER)"
	}
	return ""
}

// parseGresBody reads NAME[:TYPE][:COUNT] or NAME[:TYPE]=COUNT (rest, after any "gres:" or
// "gres/" prefix of entry).
func parseGresBody(field, entry, rest string) (Gres, error) {
	if rest == "" {
		return Gres{}, syntaxError(field, entry, "empty entry")
	}
	if i := strings.LastIndexByte(rest, '='); i >= 0 {
		// After '=' only a count may follow (slurm_get_next_tres refuses anything else).
		n, err := parseCount(rest[i+1:])
		if err != nil {
			return Gres{}, syntaxError(field, entry, "count %q: %v", rest[i+1:], err)
		}
		name, typ, hasType := strings.Cut(rest[:i], ":")
		if !ValidName(name) {
			return Gres{}, syntaxError(field, entry, "GRES name %q is not a word of letters, digits, '_', '-' or '.'", name)
		}
		if hasType && !ValidName(typ) {
			return Gres{}, syntaxError(field, entry, "type %q is not a word of letters, digits, '_', '-' or '.'", typ)
		}
		return Gres{Name: name, Type: typ, Count: n}, nil
	}
	return parseGresEntry(field, entry, rest)
}

// ParseNodeGres reads a node's GRES as sinfo/scontrol print them: "gpu:a100:4(S:0-1)",
// "gpu:a100:2(IDX:0,2)" (gres_used), "gpu:4,mps:400". The parenthesised socket or index
// lists are dropped. "", "(null)" and "N/A" mean none. The format is the same from 22.05 to
// 26.05 (the "(S:%s)" of src/common/gres.c, later src/interfaces/gres.c, and the "(IDX:%s)" of
// slurmctld's gres_ctld.c, later src/stepmgr/gres_stepmgr.c).
func ParseNodeGres(s string) ([]Gres, error) {
	const field = "node gres"
	if s == "" || s == "(null)" || s == "N/A" {
		return nil, nil
	}
	var out []Gres
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '(':
				depth++
				continue
			case ')':
				if depth == 0 {
					return nil, syntaxError(field, s, "unbalanced ')'")
				}
				depth--
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		} else if depth != 0 {
			return nil, syntaxError(field, s, "unbalanced '('")
		}
		entry := s[start:i]
		start = i + 1
		if p := strings.IndexByte(entry, '('); p >= 0 {
			if !strings.HasSuffix(entry, ")") {
				return nil, syntaxError(field, entry, "text after ')'")
			}
			entry = entry[:p]
		}
		g, err := parseGresEntry(field, entry, entry)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// parseGresEntry reads NAME[:TYPE][:COUNT] (rest, a part of entry, which errors name).
func parseGresEntry(field, entry, rest string) (Gres, error) {
	if rest == "" {
		return Gres{}, syntaxError(field, entry, "empty entry")
	}
	name, rest, hasMore := strings.Cut(rest, ":")
	if !ValidName(name) {
		return Gres{}, syntaxError(field, entry, "GRES name %q is not a word of letters, digits, '_', '-' or '.'", name)
	}
	g := Gres{Name: name, Count: 1}
	if !hasMore {
		return g, nil
	}
	first, last, hasLast := strings.Cut(rest, ":")
	if hasLast {
		// NAME:TYPE:COUNT
		if strings.Contains(last, ":") {
			return Gres{}, syntaxError(field, entry, "more than NAME:TYPE:COUNT")
		}
		// An empty type is no type: sbatch 24.11 and 26.05 accept `--gres=gpu::1` as one GPU of
		// any type (tres_per_node "gres/gpu::1", ReqTRES gres/gpu=1); 22.05 refuses it.
		if first != "" && !ValidName(first) {
			return Gres{}, syntaxError(field, entry, "type %q is not a word of letters, digits, '_', '-' or '.'", first)
		}
		n, err := parseCount(last)
		if err != nil {
			return Gres{}, syntaxError(field, entry, "count %q: %v", last, err)
		}
		g.Type, g.Count = first, n
		return g, nil
	}
	// NAME:COUNT or NAME:TYPE; as in Slurm, it is a count when it reads as one.
	if n, err := parseCount(first); err == nil {
		g.Count = n
		return g, nil
	}
	if !ValidName(first) {
		return Gres{}, syntaxError(field, entry, "%q is neither a count nor a type", first)
	}
	g.Type = first
	return g, nil
}

// ValidName accepts GRES names and types such as "gpu", "a100", "tesla_v100" or the MIG
// profile "1g.5gb": letters, digits, '_', '-' and '.', starting with a letter or digit. Pool,
// partition and workload class names follow the same rule (bridge/pools), so none of them can
// carry a comma, '=' or ':' into a Slurm list.
func ValidName(s string) bool {
	if s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// parseCount reads a GRES count: decimal digits with an optional k, m or g suffix that
// multiplies by 1024, 1024² or 1024³ (Slurm's gres.c does the same).
func parseCount(s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty")
	}
	mult := uint64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		mult, s = 1<<10, s[:len(s)-1]
	case 'm', 'M':
		mult, s = 1<<20, s[:len(s)-1]
	case 'g', 'G':
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := parseDigits(s)
	if err != nil {
		return 0, err
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 {
		return 0, fmt.Errorf("too large")
	}
	return lo, nil
}

// parseDigits reads plain decimal digits: no sign, no spaces.
func parseDigits(s string) (uint64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("not a number")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("too large")
		}
		return 0, fmt.Errorf("not a number")
	}
	return n, nil
}
