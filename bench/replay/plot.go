package replay

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Plot writes plot.gp into dir, for the CSV files WriteData wrote for each label, and runs
// gnuplot on it to draw utilisation.png (allocated GPUs over time), waits.png (wait time
// distributions) and daemons.png (the daemons' cycles and memory, slurmctld's memory). Without gnuplot it says so and leaves the script and data.
func Plot(ctx context.Context, dir string, labels []string, capacityGPUs int) error {
	var b strings.Builder
	b.WriteString("set datafile separator ','\nset terminal pngcairo size 1000,500 noenhanced\nset key outside right\nset grid\n")
	fmt.Fprintf(&b, "set output 'utilisation.png'\nset title 'Allocated GPUs over time (capacity %d)'\nset xlabel 'seconds since the first submission'\nset ylabel 'GPUs'\nset yrange [0:%d]\n", capacityGPUs, capacityGPUs+1)
	var series []string
	for _, l := range labels {
		series = append(series, fmt.Sprintf("'timeline-%s.csv' every ::1 using 1:2 with steps title '%s'", l, l))
	}
	b.WriteString("plot " + strings.Join(series, ", \\\n  ") + "\n")
	b.WriteString("set output 'waits.png'\nset title 'Wait time, submission to first start (CDF)'\nset xlabel 'seconds'\nset ylabel 'fraction of jobs'\nset yrange [0:1.05]\nset autoscale x\n")
	series = series[:0]
	for _, l := range labels {
		for _, c := range Classes {
			f := filepath.Join(dir, "waits-"+l+"-"+string(c)+".csv")
			if st, err := os.Stat(f); err != nil || st.Size() <= int64(len("wait_s,fraction\n")) {
				continue // no job of this class: gnuplot refuses an empty file
			}
			series = append(series, fmt.Sprintf("'waits-%s-%s.csv' every ::1 using 1:2 with steps title '%s %s'", l, c, l, c))
		}
	}
	if len(series) > 0 {
		b.WriteString("plot " + strings.Join(series, ", \\\n  ") + "\n")
	}
	daemonsPlot(&b, dir, labels)
	if err := os.WriteFile(filepath.Join(dir, "plot.gp"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	gnuplot, err := exec.LookPath("gnuplot")
	if err != nil {
		return fmt.Errorf("gnuplot not found (apt-get install gnuplot-nox); data and %s are in %s", "plot.gp", dir)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gnuplot, "plot.gp")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gnuplot: %w: %s", err, out)
	}
	return nil
}

// daemonsPlot draws daemons.png: the watched processes' resident memory above, the daemons'
// cycle lengths below, every mode's samples (daemons-LABEL.csv, columns as writeDaemons writes
// them; an empty cell is a gap).
func daemonsPlot(b *strings.Builder, dir string, labels []string) {
	b.WriteString("set terminal pngcairo size 1000,800 noenhanced\nset output 'daemons.png'\nset multiplot layout 2,1\nset autoscale\nset xlabel 'seconds since the mode began'\n")
	var rss, cycles []string
	for _, l := range labels {
		data, _ := os.ReadFile(filepath.Join(dir, "daemons-"+l+".csv"))
		header, rows, _ := strings.Cut(string(data), "\n")
		for col, name := range strings.Split(header, ",") {
			// gnuplot refuses a series with no point: a column never filled (a daemon stopped
			// all through the mode) is left out.
			if col == 0 || !columnHasValues(rows, col) {
				continue
			}
			series := fmt.Sprintf("'daemons-%s.csv' every ::1 using 1:%d with linespoints title '%s %s'", l, col+1, l, name)
			if strings.HasSuffix(name, "_cycle_s") {
				cycles = append(cycles, series)
			} else {
				rss = append(rss, series)
			}
		}
	}
	if len(rss) > 0 {
		b.WriteString("set title 'Resident memory'\nset ylabel 'MB'\nset yrange [0:*]\nplot " + strings.Join(rss, ", \\\n  ") + "\n")
	}
	if len(cycles) > 0 {
		b.WriteString("set title 'Cycle length (mean of the cycles between two samples)'\nset ylabel 'seconds'\nset yrange [0:*]\nplot " + strings.Join(cycles, ", \\\n  ") + "\n")
	}
	b.WriteString("unset multiplot\n")
}

// columnHasValues says whether any of the CSV rows has a value in column col.
func columnHasValues(rows string, col int) bool {
	for row := range strings.SplitSeq(rows, "\n") {
		if cells := strings.Split(row, ","); col < len(cells) && cells[col] != "" {
			return true
		}
	}
	return false
}
