package gpureq

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Slurm's fixed TRES ids (tres_table); GRES ids start at 1001 and differ per site, so look
// them up instead of hard-coding them.
const (
	TRESCPU     uint32 = 1
	TRESMem     uint32 = 2
	TRESEnergy  uint32 = 3
	TRESNode    uint32 = 4
	TRESBilling uint32 = 5
	TRESFSDisk  uint32 = 6
	TRESVMem    uint32 = 7
	TRESPages   uint32 = 8
)

// fixedTRESOrder is the order Slurm prints the fixed TRES in (their ids); others follow sorted.
var fixedTRESOrder = [...]string{"cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages"}

// TRES is a named TRES string as sacct, squeue and sinfo print it:
// "cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1,gres/gpu:a100=1". Values carrying a size unit
// (K, M, G, T, P) are held in MB.
type TRES map[string]uint64

// ParseTRES reads a named TRES string. Empty entries (a leading or trailing comma) are skipped;
// a repeated name is an error.
func ParseTRES(s string) (TRES, error) {
	return tresListForm[string]{field: "TRES", keyWord: "NAME", key: func(name string) (string, string) {
		if !validTRESName(name) {
			return "", fmt.Sprintf("name %q is not a TRES name", name)
		}
		return name, ""
	}, value: parseSizeMB}.parse(s)
}

// tresListForm is one of the two TRES forms, named (ParseTRES) or by id (ParseTRESIDs).
type tresListForm[K comparable] struct {
	field, keyWord string // the form and its keys, in errors: "TRES ids", "ID"
	dupPrefix      string // before a repeated key in its error: "id "
	// key checks and converts a key: the problem with it, or "".
	key   func(string) (K, string)
	value func(string) (uint64, error)
}

// parse reads "KEY=VALUE,KEY=VALUE" as both forms write it: empty entries are skipped, a
// repeated key is an error.
func (f tresListForm[K]) parse(s string) (map[K]uint64, error) {
	field := f.field
	t := make(map[K]uint64, strings.Count(s, ",")+1)
	for entry := range strings.SplitSeq(s, ",") {
		if entry == "" {
			continue
		}
		keyText, valueText, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, syntaxError(field, entry, "want %s=VALUE", f.keyWord)
		}
		k, problem := f.key(keyText)
		if problem != "" {
			return nil, syntaxError(field, entry, "%s", problem)
		}
		n, err := f.value(valueText)
		if err != nil {
			return nil, syntaxError(field, entry, "value %q: %v", valueText, err)
		}
		if _, dup := t[k]; dup {
			return nil, syntaxError(field, entry, "%s%s given twice", f.dupPrefix, keyText)
		}
		t[k] = n
	}
	return t, nil
}

// String prints the TRES in Slurm's order (cpu, mem, energy, node, billing, fs/disk, vmem,
// pages, then the rest by name), sizes in M: ParseTRES(t.String()) equals t.
func (t TRES) String() string {
	var b strings.Builder
	write := func(name string, v uint64) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.FormatUint(v, 10))
		if isSizeTRES(name) {
			b.WriteByte('M')
		}
	}
	for _, name := range fixedTRESOrder {
		if v, ok := t[name]; ok {
			write(name, v)
		}
	}
	rest := make([]string, 0, len(t))
	for name := range t {
		if !slices.Contains(fixedTRESOrder[:], name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		write(name, t[name])
	}
	return b.String()
}

// GPUs is the GPU count in the TRES: of gpuType, or of all types when gpuType is "".
func (t TRES) GPUs(gpuType string) uint64 {
	if gpuType == "" {
		return t["gres/"+GPUName]
	}
	return t["gres/"+GPUName+":"+gpuType]
}

// isSizeTRES names the TRES Slurm counts in MB and prints with a unit.
func isSizeTRES(name string) bool {
	return name == "mem" || name == "vmem" || name == "fs/disk" || strings.HasPrefix(name, "bb/")
}

// validTRESName accepts "cpu", "gres/gpu", "gres/gpu:a100", "fs/disk", "bb/datawarp",
// "license/matlab", and a remote license "license/matlab@flex": any user allowed such a
// license puts it in their job's tres_req_str (-L matlab@flex:1), which squeue prints.
func validTRESName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' && c != '/' && c != ':' && c != '@' {
			return false
		}
	}
	return true
}

// parseSizeMB reads a TRES value: digits, with an optional unit K, M, G, T or P (Slurm's
// binary units) that makes it a size converted to MB; K rounds up so that no size becomes 0.
func parseSizeMB(s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty")
	}
	var shift uint // log2 of the unit in MB; K is handled apart
	digits := s[:len(s)-1]
	switch s[len(s)-1] {
	case 'K', 'k':
		n, err := parseDigits(digits)
		if err != nil {
			return 0, err
		}
		return CeilDiv(n, 1024), nil
	case 'M', 'm':
		shift = 0
	case 'G', 'g':
		shift = 10
	case 'T', 't':
		shift = 20
	case 'P', 'p':
		shift = 30
	default:
		digits = s
	}
	n, err := parseDigits(digits)
	if err != nil {
		return 0, err
	}
	if n > (^uint64(0))>>shift {
		return 0, fmt.Errorf("too large")
	}
	return n << shift, nil
}

// TRESIDs is the id form slurmdbd stores: "1=16,2=128000,4=2,1001=4" (mem, id 2, in MB).
type TRESIDs map[uint32]uint64

// ParseTRESIDs reads the id form. Empty entries are skipped: slurmdbd writes some columns with
// a leading comma.
func ParseTRESIDs(s string) (TRESIDs, error) {
	return tresListForm[uint32]{field: "TRES ids", keyWord: "ID", dupPrefix: "id ", key: func(idText string) (uint32, string) {
		id, err := parseDigits(idText)
		if err != nil || id == 0 || id > uint64(^uint32(0)) {
			return 0, fmt.Sprintf("id %q is not a TRES id", idText)
		}
		return uint32(id), ""
	}, value: parseDigits}.parse(s)
}

// String prints the id form with ids ascending, as slurmdbd does.
func (t TRESIDs) String() string {
	ids := make([]uint32, 0, len(t))
	for id := range t {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(id), 10))
		b.WriteByte('=')
		b.WriteString(strconv.FormatUint(t[id], 10))
	}
	return b.String()
}

// Named converts to the named form with names from tres_table: names[id] is "cpu", "mem",
// "gres/gpu", "gres/gpu:a100" (type, plus "/name" when the name is not empty). An id missing
// from names is an error, so a stale table is noticed.
func (t TRESIDs) Named(names map[uint32]string) (TRES, error) {
	out := make(TRES, len(t))
	for id, v := range t {
		name, ok := names[id]
		if !ok {
			return nil, fmt.Errorf("TRES id %d is not in the TRES table", id)
		}
		out[name] = v
	}
	return out, nil
}
