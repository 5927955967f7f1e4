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
	daemonsPlot(&b, labels)
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
func daemonsPlot(b *strings.Builder, labels []string) {
	b.WriteString("set terminal pngcairo size 1000,800 noenhanced\nset output 'daemons.png'\nset multiplot layout 2,1\nset autoscale\nset xlabel 'seconds since the mode began'\n")
	var rss, cycles []string
	for _, l := range labels {
		col := 2
		for _, name := range Watched {
			rss = append(rss, fmt.Sprintf("'daemons-%s.csv' every ::1 using 1:%d with lines title '%s %s'", l, col, l, name))
			col++
			if cycleMetrics[name] != "" {
				cycles = append(cycles, fmt.Sprintf("'daemons-%s.csv' every ::1 using 1:%d with points title '%s %s'", l, col, l, name))
				col++
			}
		}
	}
	b.WriteString("set title 'Resident memory'\nset ylabel 'MB'\nset yrange [0:*]\nplot " + strings.Join(rss, ", \\\n  ") + "\n")
	b.WriteString("set title 'Cycle length (mean of the cycles between two samples)'\nset ylabel 'seconds'\nset yrange [0:*]\nplot " + strings.Join(cycles, ", \\\n  ") + "\n")
	b.WriteString("unset multiplot\n")
}
