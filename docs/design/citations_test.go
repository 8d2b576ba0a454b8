// Package design holds no code: it is the test that keeps the citations in
// the repository resolvable in docs/design (see README.md here).
package design

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// TestCitationsResolve scans the repository for citations of the design
// notes and fails listing every one that docs/design does not define:
//   - ids K<n>, I<n>, S<n>[suffix], L<n>, M<n> (facts, invariants and
//     scenarios of registration.md);
//   - "docs/design/<page>.md §N" and the § references that follow it in the
//     same sentence, and bare "§N" inside a design page (its own sections);
//   - paths and links to docs/design/<page>.md, with their #anchor;
//   - citations of the research notes that lived outside the repository
//     (shared/reference, shared/design, kubelet-registration.md, a bare
//     ontap-rest.md, "reference §5d", ...).
func TestCitationsResolve(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	notes, err := loadNotes(filepath.Join(root, "docs", "design"))
	if err != nil {
		t.Fatal(err)
	}
	if len(notes.ids) == 0 {
		t.Errorf("docs/design defines no ids (K1, I1, S1, ...)")
	}
	var problems []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", "vendor", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !scanned(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "docs/design/citations_test.go" {
			return nil // its patterns are not citations
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		problems = append(problems, notes.check(rel, string(b))...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("%d citations do not resolve in docs/design:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// scanned reports whether a file may carry citations: Go, Markdown,
// manifests, templates, scripts, go.mod comments, Makefile, Dockerfile, CI.
func scanned(name string) bool {
	switch name {
	case "Makefile", "Dockerfile", "run", "go.mod":
		return true
	}
	switch filepath.Ext(name) {
	case ".go", ".md", ".yaml", ".yml", ".tpl", ".sh", ".txt":
		return true
	}
	return false
}

// notes is what docs/design defines.
type notes struct {
	ids      map[string]bool            // K1, I8, S8o, ...
	sections map[string]map[string]bool // page -> "2.5", "7.5d", ...
	anchors  map[string]map[string]bool // page -> GitHub heading anchors
}

var (
	idDef      = regexp.MustCompile(`(?m)^\|\s*\**([KISLM][0-9]+[a-z]?)\**\s*\|`)
	heading    = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t]*#*$`)
	sectionNum = regexp.MustCompile(`^§([0-9]+(?:\.[0-9]+)*[a-z]?)(?:\s|$)`)
)

func loadNotes(dir string) (*notes, error) {
	n := &notes{ids: map[string]bool{}, sections: map[string]map[string]bool{}, anchors: map[string]map[string]bool{}}
	pages, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		page := filepath.Base(p)
		n.sections[page], n.anchors[page] = map[string]bool{}, map[string]bool{}
		for _, m := range idDef.FindAllStringSubmatch(string(b), -1) {
			n.ids[m[1]] = true
		}
		for _, m := range heading.FindAllStringSubmatch(stripFences(string(b)), -1) {
			if s := sectionNum.FindStringSubmatch(m[1]); s != nil {
				n.sections[page][s[1]] = true
			}
			n.anchors[page][slug(m[1])] = true
		}
	}
	return n, nil
}

// stripFences blanks fenced code blocks, whose "#" lines are no headings.
func stripFences(s string) string {
	lines := strings.Split(s, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
		} else if in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// slug is GitHub's anchor for a heading: lower case, markup and
// punctuation dropped (letters, digits, '_' and '-' kept), spaces to '-'.
func slug(h string) string {
	h = strings.NewReplacer("`", "", "*", "").Replace(h)
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// text is a file with comment markers removed and lines joined, so that a
// citation broken over two comment lines reads as one; line maps an offset
// back to its line.
type text struct {
	s     string
	start []int // offset of each line in s
}

var commentLead = regexp.MustCompile(`^\s*(//+|#+|\*)?\s*`)

func joinLines(src string) text {
	var t text
	var b strings.Builder
	for _, l := range strings.Split(src, "\n") {
		t.start = append(t.start, b.Len())
		b.WriteString(commentLead.ReplaceAllString(l, ""))
		b.WriteByte(' ')
	}
	t.s = b.String()
	return t
}

func (t text) line(off int) int {
	return sort.Search(len(t.start), func(i int) bool { return t.start[i] > off })
}

var (
	idUse = regexp.MustCompile(`\b(?:K[0-9]+|I[0-9]+|S[0-9]+[a-z]?|L[0-9]+|M[0-9]+)\b`)
	// A § reference, and what may name its page right before it.
	sectionUse = regexp.MustCompile(`§\s?([0-9]+(?:\.[0-9]+)*[a-z]?)`)
	pageBefore = regexp.MustCompile("([\\w./-]*?)([\\w-]+\\.md)`?\\]?\\s*\\(?\\s*$")
	rfcBefore  = regexp.MustCompile(`RFC\s*[0-9]+\s*$`)
	// Paths to design pages, with an optional anchor.
	designPath = regexp.MustCompile(`(?:^|[^\w-])(?:docs/)?design/([\w.-]+\.md)(#[\w-]+)?`)
	// Relative Markdown links.
	mdLink = regexp.MustCompile(`\]\(([^()\s#]*)(#[^()\s]*)?\)`)
	// Citation forms of the research notes outside the repository.
	oldForms = []struct {
		re   *regexp.Regexp
		what string
	}{
		{regexp.MustCompile(`shared/(?:reference|design)\b|\.\./shared\b|\.\./reference/`), "a path outside the repository"},
		{regexp.MustCompile(`\b(?:kubelet-registration|csi-ecosystem|real-kernel-vm)\.md`), "a research note outside the repository"},
		{regexp.MustCompile(`\b(?:reference|kubelet reference)\s+§`), `"reference §": a research note outside the repository`},
	}
	// Design page names that must carry their docs/design path outside
	// docs/design, and the ambiguous "registration.md" (docs/ has one too).
	barePage = regexp.MustCompile(`(?:^|[^\w/.-])((?:ontap-rest|trident-compat|local-cluster|registration)\.md)\b`)
)

// file is one scanned file and the problems found in it.
type file struct {
	n        *notes
	rel      string
	t        text
	inDesign bool
	page     string // its own page name, inside docs/design
	out      []string
}

func (f *file) add(off int, format string, args ...any) {
	f.out = append(f.out, fmt.Sprintf("%s:%d: %s", f.rel, f.t.line(off), fmt.Sprintf(format, args...)))
}

func (n *notes) check(rel, src string) []string {
	f := &file{n: n, rel: rel, t: joinLines(src), inDesign: strings.HasPrefix(rel, "docs/design/")}
	if f.inDesign {
		f.page = filepath.Base(rel)
	}
	f.checkIDs()
	f.checkSections()
	f.checkLinks()
	if !f.inDesign {
		f.checkOldForms()
	}
	return f.out
}

func (f *file) checkIDs() {
	for _, loc := range idUse.FindAllStringIndex(f.t.s, -1) {
		if id := f.t.s[loc[0]:loc[1]]; !f.n.ids[id] {
			f.add(loc[0], "%s is not defined in docs/design", id)
		}
	}
}

// checkSections resolves every "§N" to a page and checks that the page has
// that section.
func (f *file) checkSections() {
	s := f.t.s
	prevPage, prevEnd := "", -1
	for _, m := range sectionUse.FindAllStringSubmatchIndex(s, -1) {
		sec := s[m[2]:m[3]]
		before := s[max(0, m[0]-120):m[0]]
		if rfcBefore.MatchString(before) {
			continue // an external standard
		}
		target, ok := f.sectionPage(sec, m[0], before, prevPage, prevEnd)
		prevPage, prevEnd = target, m[1]
		if !ok {
			continue
		}
		if secs, exists := f.n.sections[target]; !exists {
			f.add(m[0], "§%s: docs/design/%s does not exist", sec, target)
		} else if !secs[sec] {
			f.add(m[0], "docs/design/%s has no section §%s", target, sec)
		}
	}
}

// sectionPage decides which design page the § at off cites: the page named
// right before it, the page of an earlier § in the same sentence, or, in a
// design page, that page itself.
func (f *file) sectionPage(sec string, off int, before, prevPage string, prevEnd int) (string, bool) {
	if pm := pageBefore.FindStringSubmatch(before); pm != nil {
		switch {
		case strings.Contains(pm[1], "design/"):
			return pm[2], true
		case f.inDesign && pm[1] == "":
			return pm[2], true // a sibling page
		}
		f.add(off, "§%s of %s%s: cite a page of docs/design (docs/design/<page>.md §N)", sec, pm[1], pm[2])
		return "", false
	}
	between := ""
	if prevEnd >= 0 && prevEnd <= off {
		between = f.t.s[prevEnd:off]
	}
	switch {
	case prevPage != "" && len(between) <= 60 && !strings.Contains(between, ". "):
		return prevPage, true // "§3.5, §4.5" after a named page
	case f.inDesign:
		return f.page, true
	}
	f.add(off, "§%s names no page: write docs/design/<page>.md §%s", sec, sec)
	return "", false
}

// checkLinks checks paths to design pages anywhere, and relative Markdown
// links into docs/design, with their anchors.
func (f *file) checkLinks() {
	s := f.t.s
	for _, m := range designPath.FindAllStringSubmatchIndex(s, -1) {
		f.checkPage(m[2], s[m[2]:m[3]], anchorAt(s, m[4], m[5]))
	}
	if !strings.HasSuffix(f.rel, ".md") {
		return
	}
	for _, m := range mdLink.FindAllStringSubmatchIndex(s, -1) {
		target := s[m[2]:m[3]]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		abs := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f.rel), target)))
		if target == "" {
			abs = f.rel
		}
		if strings.HasPrefix(abs, "docs/design/") && strings.HasSuffix(abs, ".md") {
			f.checkPage(m[0], strings.TrimPrefix(abs, "docs/design/"), anchorAt(s, m[4], m[5]))
		}
	}
}

func (f *file) checkPage(off int, page, anchor string) {
	anchors, ok := f.n.anchors[page]
	if !ok {
		f.add(off, "docs/design/%s does not exist", page)
		return
	}
	if anchor != "" && !anchors[anchor] {
		f.add(off, "docs/design/%s has no heading with anchor #%s", page, anchor)
	}
}

// checkOldForms reports citations of the notes outside the repository and
// design page names without their path.
func (f *file) checkOldForms() {
	s := f.t.s
	for _, o := range oldForms {
		for _, loc := range o.re.FindAllStringIndex(s, -1) {
			f.add(loc[0], "%q cites %s: cite docs/design instead", s[loc[0]:loc[1]], o.what)
		}
	}
	for _, m := range barePage.FindAllStringSubmatchIndex(s, -1) {
		if m[2] > 0 && s[m[2]-1] == '(' && strings.HasSuffix(s[:m[2]-1], "]") {
			continue // a relative Markdown link, checked by checkLinks
		}
		name := s[m[2]:m[3]]
		f.add(m[2], "bare %s: write docs/design/%s (or docs/%s for the operator page)", name, name, name)
	}
}

func anchorAt(s string, lo, hi int) string {
	if lo < 0 {
		return ""
	}
	return strings.TrimPrefix(s[lo:hi], "#")
}
