package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// No container engine runs on the build machines, so the Dockerfile is
// checked here instead of built: what `docker build` would trip over, and
// what the manifests rely on.

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd   string // upper case
	args  string
	stage int // index of the FROM it belongs to
	line  int
}

func parseDockerfile(t *testing.T, file string) []instruction {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	stage := -1
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue // comments, parser directives and blank lines
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, instruction{cmd: cmd, args: strings.TrimSpace(args), stage: stage, line: start})
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends inside a continued line", file)
	}
	return out
}

// flagsAndWords splits the arguments of COPY/FROM into --flags and words.
func flagsAndWords(args string) (map[string]string, []string) {
	flags := map[string]string{}
	var words []string
	for _, f := range strings.Fields(args) {
		if v, ok := strings.CutPrefix(f, "--"); ok && len(words) == 0 {
			k, val, _ := strings.Cut(v, "=")
			flags[k] = val
			continue
		}
		words = append(words, f)
	}
	return flags, words
}

func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t, "../Dockerfile")
	stages, final := checkBaseImages(t, ins)
	copiesFromContext := checkCopies(t, ins, stages)
	if _, err := os.Stat("../.dockerignore"); err == nil {
		t.Error(".dockerignore exists: extend this test to check that it keeps every COPY source")
	}
	// Every package the binary is built from is copied into the build stage.
	for _, dir := range binaryPackageDirs(t) {
		top := strings.Split(dir, "/")[0]
		if !contains(copiesFromContext, top) && !contains(copiesFromContext, ".") {
			t.Errorf("the binary needs %s, but no COPY brings %s/ into the build", dir, top)
		}
	}
	checkFinalStage(t, ins, final)
	checkBuildStage(t, ins, final)
}

// checkBaseImages checks that every base image is pinned and that the
// build stage's Go is at least go.mod's; it returns the stages by name
// and the final stage's index.
func checkBaseImages(t *testing.T, ins []instruction) (stages map[string]int, final int) {
	stages = map[string]int{} // AS name -> index
	var goVersion string
	for _, in := range ins {
		if in.cmd != "FROM" {
			continue
		}
		_, words := flagsAndWords(in.args)
		image := words[0]
		if len(words) == 3 && strings.EqualFold(words[1], "AS") {
			stages[words[2]] = in.stage
		}
		final = in.stage
		switch {
		case image == "scratch":
		case stageIndex(stages, image) >= 0:
		default:
			if !pinned(image) {
				t.Errorf("line %d: base image %s is not pinned to a version", in.line, image)
			}
			if v, ok := strings.CutPrefix(image, "golang:"); ok {
				goVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?`).FindString(v)
			}
		}
	}
	modGo := goModVersion(t)
	if goVersion == "" {
		t.Error("no golang build stage")
	} else if versionLess(goVersion, modGo) {
		t.Errorf("golang:%s is older than go.mod's go %s", goVersion, modGo)
	}
	return stages, final
}

// checkCopies checks every COPY and ADD: a source and a destination, an
// earlier stage for --from, and sources that exist in the build context
// (the repository), which it returns.
func checkCopies(t *testing.T, ins []instruction, stages map[string]int) []string {
	var fromContext []string
	for _, in := range ins {
		if in.cmd != "COPY" && in.cmd != "ADD" {
			continue
		}
		flags, words := flagsAndWords(in.args)
		if len(words) < 2 {
			t.Errorf("line %d: %s needs a source and a destination", in.line, in.cmd)
			continue
		}
		if from, ok := flags["from"]; ok {
			if i := stageIndex(stages, from); i < 0 || i >= in.stage {
				t.Errorf("line %d: COPY --from=%s names no earlier stage", in.line, from)
			}
			continue
		}
		for _, src := range words[:len(words)-1] {
			matches, err := filepath.Glob(filepath.Join("..", src))
			if err != nil || len(matches) == 0 {
				t.Errorf("line %d: COPY source %s does not exist in the repository", in.line, src)
			}
			fromContext = append(fromContext, strings.TrimSuffix(filepath.Clean(src), "/"))
		}
	}
	return fromContext
}

// checkFinalStage: the final stage needs no shell (nothing runs at build
// time and the entrypoint is exec form; from scratch it has none at all),
// starts /ontap-csi and copies the build's /out to /.
func checkFinalStage(t *testing.T, ins []instruction, final int) {
	var entrypoint []string
	var copiesOut bool
	for _, in := range ins {
		if in.stage != final {
			continue
		}
		switch in.cmd {
		case "RUN", "SHELL", "ONBUILD", "HEALTHCHECK":
			t.Errorf("line %d: %s in the final stage needs a shell or a tool the image lacks", in.line, in.cmd)
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(in.args), &argv); err != nil {
				t.Errorf("line %d: %s %s is shell form; use the JSON (exec) form", in.line, in.cmd, in.args)
			}
			if in.cmd == "ENTRYPOINT" {
				entrypoint = argv
			}
		case "COPY":
			flags, words := flagsAndWords(in.args)
			if flags["from"] != "" && strings.TrimSuffix(words[0], "/") == "/out" && words[len(words)-1] == "/" {
				copiesOut = true
			}
		}
	}
	if len(entrypoint) == 0 || entrypoint[0] != "/ontap-csi" {
		t.Errorf("ENTRYPOINT %v, want /ontap-csi first (the manifests' command)", entrypoint)
	}
	if !copiesOut {
		t.Error("the final stage does not copy /out/ to /")
	}
}

// checkBuildStage: the image holds /ontap-csi and the name
// /trident_orchestrator: the build stage links it in /out, which the final
// stage copies to /.
func checkBuildStage(t *testing.T, ins []instruction, final int) {
	var build strings.Builder
	for _, in := range ins {
		if in.stage != final && in.cmd == "RUN" {
			build.WriteString(in.args + "\n")
		}
	}
	b := build.String()
	if !strings.Contains(b, "-o /out/ontap-csi ") || !strings.Contains(b, "CGO_ENABLED=0") {
		t.Errorf("the build stage does not build a static /out/ontap-csi:\n%s", b)
	}
	if !strings.Contains(b, "ln -s ontap-csi /out/trident_orchestrator") {
		t.Errorf("the build stage does not create /out/trident_orchestrator:\n%s", b)
	}
	// trident-operator's controller probes exec tridentctl from the image.
	if !strings.Contains(b, "ln -s ../ontap-csi /out/bin/tridentctl") {
		t.Errorf("the build stage does not create /out/bin/tridentctl:\n%s", b)
	}
	if !strings.Contains(b, "-X main.tridentVersion=") {
		t.Errorf("the build does not set the Trident release the operator checks:\n%s", b)
	}
}

func stageIndex(stages map[string]int, name string) int {
	if i, ok := stages[name]; ok {
		return i
	}
	return -1
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func goModVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9.]+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

// versionLess compares dotted versions; a missing component is 0.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x = atoi(as[i])
		}
		if i < len(bs) {
			y = atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// binaryPackageDirs lists the repository directories of the packages
// cmd/ontap-csi is built from.
func binaryPackageDirs(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.ImportPath}}{{end}}{{end}}", "./cmd/ontap-csi")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/ontap-csi/ontap-csi/"
	var dirs []string
	for _, p := range strings.Fields(string(out)) {
		if d, ok := strings.CutPrefix(p, module); ok {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		t.Fatal("go list found no packages of the module")
	}
	return dirs
}
