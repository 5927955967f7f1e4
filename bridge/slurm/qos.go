package slurm

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// ClearTRES as a TRESLimit's Limit removes the limit (sacctmgr's -1).
const ClearTRES = -1

// TRESLimit is one TRES of a QOS's GrpTRES, e.g. gres/gpu:a100=4.
type TRESLimit struct {
	Name  string // "gres/gpu", "gres/gpu:a100"
	Limit int64  // ClearTRES removes it
}

// QOSSettings are the fields ModifyQOS sets; nil (or empty GrpTRES) leaves a field as it is.
type QOSSettings struct {
	GrpTRES     []TRESLimit
	Preempt     *[]string // the QOS this one may preempt; empty clears the list
	PreemptMode *string
	GraceTime   *time.Duration
	// PreemptExemptTime is sent as [days-]hh:mm:ss: sacctmgr reads a bare number as minutes.
	PreemptExemptTime *time.Duration
	Priority          *int
}

// Args is the settings as sacctmgr's set clause takes them, one per field set.
func (s QOSSettings) Args() []string {
	var set []string
	if len(s.GrpTRES) > 0 {
		parts := make([]string, 0, len(s.GrpTRES))
		for _, t := range s.GrpTRES {
			parts = append(parts, t.Name+"="+strconv.FormatInt(t.Limit, 10))
		}
		set = append(set, "grptres="+strings.Join(parts, ","))
	}
	if s.Preempt != nil {
		set = append(set, "preempt="+strings.Join(*s.Preempt, ","))
	}
	if s.PreemptMode != nil {
		set = append(set, "preemptmode="+*s.PreemptMode)
	}
	if s.GraceTime != nil {
		set = append(set, "gracetime="+strconv.FormatInt(int64(*s.GraceTime/time.Second), 10)) // seconds
	}
	if s.PreemptExemptTime != nil {
		set = append(set, "preemptexempttime="+clock(*s.PreemptExemptTime))
	}
	if s.Priority != nil {
		set = append(set, "priority="+strconv.Itoa(*s.Priority))
	}
	return set
}

// clock spells a duration as sacctmgr's [days-]hh:mm:ss.
func clock(d time.Duration) string {
	s := int64(d / time.Second)
	days, s := s/86400, s%86400
	out := fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
	if days > 0 {
		out = strconv.FormatInt(days, 10) + "-" + out
	}
	return out
}

// MaxQOSPerRun bounds the QOS names of one sacctmgr run: its name= list is one argument, which
// Linux caps at 128 KiB (1000 names of up to 64 characters stay within it). A run costs about
// the same whether it names one QOS or 200 (0.27-0.29 s on the testbed's slurmdbd, 22.05), so a
// cycle's runs, not its QOS, set how long acting takes.
const MaxQOSPerRun = 1000

// maxNamesArg bounds the bytes of one run's name list, below Linux's 128 KiB for one argument,
// for sites whose names are long.
const maxNamesArg = 100 << 10

// QOSRuns cuts items into the sacctmgr runs that name them (name(item) each): at most
// MaxQOSPerRun names and maxNamesArg bytes of list a run, in the order given.
func QOSRuns[T any](items []T, name func(T) string) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		start, size := 0, 0
		for i, it := range items {
			n := len(name(it)) + 1
			if i > start && (i-start == MaxQOSPerRun || size+n > maxNamesArg) {
				if !yield(items[start:i:i]) {
					return
				}
				start, size = i, 0
			}
			size += n
		}
		if start < len(items) {
			yield(items[start:len(items):len(items)])
		}
	}
}

func itself(s string) string { return s }

// AddQOS creates QOS with Slurm's defaults (-i: without asking for confirmation), all named in
// one sacctmgr run (more for over MaxQOSPerRun), so a table of many projects is created in a
// few runs rather than one per QOS.
func (c Client) AddQOS(ctx context.Context, names ...string) error {
	for batch := range QOSRuns(names, itself) {
		if _, err := c.Runner.Run(ctx, "sacctmgr", "-i", "add", "qos", strings.Join(batch, ",")); err != nil {
			return err
		}
	}
	return nil
}

// ModifyQOS sets the same fields of every QOS in names, in one sacctmgr run (more for over
// MaxQOSPerRun names): one commit in slurmdbd and one update pushed to slurmctld, where a run
// per QOS costs a process, a commit and an update each. With nothing to set it runs nothing.
func (c Client) ModifyQOS(ctx context.Context, names []string, s QOSSettings) error {
	set := s.Args()
	if len(set) == 0 {
		return nil
	}
	for batch := range QOSRuns(names, itself) {
		if _, err := c.Runner.Run(ctx, "sacctmgr", append([]string{"-i", "modify", "qos", "where", "name=" + strings.Join(batch, ","), "set"}, set...)...); err != nil {
			return err
		}
	}
	return nil
}

// QOS is one QOS with every field slurmbridge reads of it. Client.QOS reads it with sacctmgr;
// slurmdbd.Reader.QOS reads the same record from slurmdbd's qos_table, for quotad, which reads
// MariaDB directly to keep its cycle short.
type QOS struct {
	Name string
	// GrpTRES caps what the QOS's running jobs hold together (nil: no limit); sizes in MB.
	GrpTRES gpureq.TRES
	// Preempt is the QOS this one may preempt.
	Preempt []string
	// PreemptMode is as sacctmgr prints it: "cluster" when the QOS leaves it to slurm.conf.
	PreemptMode string
	// GraceTime is the time between SIGTERM and SIGKILL when a job of the QOS is preempted;
	// PreemptExemptTime how long one runs before it may be. Zero when not set.
	GraceTime, PreemptExemptTime time.Duration
	Priority                     int
}

// qosFields is the format of Client.QOS, in its columns' order.
var qosFields = []string{"name", "grptres", "preempt", "preemptmode", "gracetime", "preemptexempttime", "priority"}

// QOS reads every QOS with sacctmgr.
func (c Client) QOS(ctx context.Context) ([]QOS, error) {
	out, err := c.Runner.Run(ctx, "sacctmgr", "-n", "-P", "show", "qos", "format="+strings.Join(qosFields, ","))
	if err != nil {
		return nil, err
	}
	return ParseQOS(out)
}

// ParseQOS reads what Client.QOS's sacctmgr prints.
func ParseQOS(out []byte) ([]QOS, error) {
	rows, err := parsePipes(out, len(qosFields), "sacctmgr show qos")
	if err != nil {
		return nil, err
	}
	qos := make([]QOS, 0, len(rows))
	for _, f := range rows {
		q := QOS{Name: f[0], Preempt: NameList(f[2]), PreemptMode: f[3]}
		if q.GrpTRES, err = gpureq.ParseTRES(f[1]); err == nil {
			if q.GraceTime, err = parseClock(f[4]); err == nil {
				if q.PreemptExemptTime, err = parseClock(f[5]); err == nil && strings.TrimSpace(f[6]) != "" {
					q.Priority, err = strconv.Atoi(strings.TrimSpace(f[6]))
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("sacctmgr show qos line %q: %w", strings.Join(f, "|"), err)
		}
		if len(q.GrpTRES) == 0 {
			q.GrpTRES = nil
		}
		qos = append(qos, q)
	}
	return qos, nil
}

// QOSByName finds name in qos (by its QOSKey: Slurm compares QOS names without case).
func QOSByName(qos []QOS, name string) (QOS, bool) {
	for _, q := range qos {
		if pools.QOSKey(q.Name) == pools.QOSKey(name) {
			return q, true
		}
	}
	return QOS{}, false
}

// NameList reads a comma-separated list of names as sacctmgr prints them ("" is none).
func NameList(s string) []string {
	var names []string
	for n := range strings.SplitSeq(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// parseClock reads sacctmgr's [days-]hh:mm:ss (also mm:ss); empty is zero.
func parseClock(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	var days int64
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("time %q is not [days-]hh:mm:ss", s)
		}
		days, s = n, rest
	}
	var secs int64
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("time %q is not [days-]hh:mm:ss", s)
	}
	for _, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("time %q is not [days-]hh:mm:ss", s)
		}
		secs = secs*60 + n
	}
	return time.Duration(days*86400+secs) * time.Second, nil
}

// PreemptsByQOS is, by QOS name, the QOS each one may preempt: a view of qos for the checks
// that ask who preempts whom.
func PreemptsByQOS(qos []QOS) map[string][]string {
	preempts := make(map[string][]string, len(qos))
	for _, q := range qos {
		preempts[q.Name] = q.Preempt
	}
	return preempts
}
