package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// Where the node benchmark's time goes, per arm: the host tools the
// plugin ran (its debug log has each with its duration) and the steps of
// the arm by hand (timed as they run), summed over the arm's volumes.

// stepTimes sums the time of each step (a host tool by its flags, or a
// sysfs step) over an arm's volumes.
type stepTimes struct {
	mu    sync.Mutex
	total map[string]time.Duration
	count map[string]int
}

func newStepTimes() *stepTimes {
	return &stepTimes{total: map[string]time.Duration{}, count: map[string]int{}}
}

func (s *stepTimes) add(step string, d time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total[step] += d
	s.count[step]++
}

// merge adds o's steps to s.
func (s *stepTimes) merge(o *stepTimes) {
	for k, d := range o.total {
		s.total[k] += d
		s.count[k] += o.count[k]
	}
}

// sum is the time of all steps.
func (s *stepTimes) sum() time.Duration {
	var t time.Duration
	for _, d := range s.total {
		t += d
	}
	return t
}

// describe lists the steps per volume, costliest first: "mkfs.ext4 -F
// 1×41.0", that is runs per volume × mean ms per run.
func (s *stepTimes) describe(volumes int) string {
	keys := make([]string, 0, len(s.total))
	for k := range s.total {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(s.total[b] - s.total[a]) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("`%s` %.1f×%.1f", k, float64(s.count[k])/float64(volumes), float64(s.total[k].Microseconds())/1000/float64(s.count[k])))
	}
	return strings.Join(parts, ", ")
}

// toolStep names a host tool run by its flags and the values that say
// what it does (-m node, -o new, -t ext4), not by paths, IQNs or devices.
func toolStep(name string, args []string) string {
	parts := []string{name}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		parts = append(parts, a)
		if (a == "-m" || a == "-o" || a == "-t") && i+1 < len(args) && !strings.Contains(args[i+1], "/") && !strings.Contains(args[i+1], ",") {
			parts = append(parts, args[i+1])
			i++
		}
	}
	return strings.Join(parts, " ")
}

// hostToolLine is hostexec's debug line for one run of a host tool.
var (
	hostToolLine = regexp.MustCompile(`msg="host tool (?:ran|failed)"`)
	logArgs      = regexp.MustCompile(`args="?\[([^\]]*)\]`)
	logDuration  = regexp.MustCompile(`duration=(\S+)`)
	logTool      = regexp.MustCompile(`tool=(\S+)`)
)

// pluginSteps sums the host tools the plugin logged (at debug level).
func pluginSteps(log string) *stepTimes {
	s := newStepTimes()
	for _, line := range strings.Split(log, "\n") {
		if !hostToolLine.MatchString(line) {
			continue
		}
		a, d, tool := logArgs.FindStringSubmatch(line), logDuration.FindStringSubmatch(line), logTool.FindStringSubmatch(line)
		if a == nil || d == nil || tool == nil {
			continue
		}
		dur, err := time.ParseDuration(strings.Trim(d[1], `"`))
		if err != nil {
			continue
		}
		s.add(toolStep(strings.Trim(tool[1], `"`), strings.Fields(a[1])), dur)
	}
	return s
}

// TestPluginStepsParsesHostexecLines holds pluginSteps to the line
// hostexec logs for a tool run, in ontap-csi's text format.
func TestPluginStepsParsesHostexecLines(t *testing.T) {
	var buf bytes.Buffer
	l := logrus.New()
	l.SetOutput(&buf)
	l.SetLevel(logrus.DebugLevel)
	l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "2006-01-02T15:04:05.000Z07:00"})
	for _, d := range []string{"3ms", "5ms"} {
		l.WithFields(logrus.Fields{"tool": "iscsiadm", "args": []string{"-m", "node", "-T", "iqn.1992-08.com.netapp:sn.1", "-p", "10.0.0.1:3260", "-o", "new"}, "duration": d}).Debug("host tool ran")
	}
	l.WithFields(logrus.Fields{"tool": "mkfs.ext4", "args": []string{"-F", "/dev/dm-3"}, "duration": "1.2s", "status": 1}).Debug("host tool failed")
	l.WithFields(logrus.Fields{"volume": "pvc-1"}).Info("LUN attached")
	s := pluginSteps(buf.String())
	want := map[string]time.Duration{"iscsiadm -m node -T -p -o new": 8 * time.Millisecond, "mkfs.ext4 -F": 1200 * time.Millisecond}
	if !maps.Equal(s.total, want) || s.count["iscsiadm -m node -T -p -o new"] != 2 {
		t.Fatalf("steps %v (counts %v), want %v\n%s", s.total, s.count, want, buf.String())
	}
}
