package minidubbo_test

import (
	"go/ast"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// notLanded are names the README gives to things it says were tried and
// not landed (they exist nowhere on purpose).
var notLanded = map[string]bool{
	"transport.Options.OwnFrames": true, // "Consumer replies: decoding in place (measured, not landed)"
	"serialize.InPlaceDecoder":    true, // same section
}

// TestReadmeNamesExist: every pkg.Name and pkg.Type.Member the README writes
// in code (backticks or a code block), for pkg one of the framework's
// packages, is declared there: a function, type, constant or variable, a
// method, a struct field or an interface method. A rename that leaves the
// README behind fails here.
func TestReadmeNamesExist(t *testing.T) {
	decl := map[string]map[string]bool{} // package name -> its names
	dirs := map[string]string{}          // package name -> its directory
	parseFramework(t, func(dir string, file *ast.File) {
		dirs[file.Name.Name] = dir
		m := decl[file.Name.Name]
		if m == nil {
			m = map[string]bool{}
			decl[file.Name.Name] = m
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					m[d.Name.Name] = true
				} else if recv := typeName(d.Recv.List[0].Type); recv != "" {
					m[recv+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							m[n.Name] = true
						}
					case *ast.TypeSpec:
						m[s.Name.Name] = true
						var fields []*ast.Field
						switch ty := s.Type.(type) {
						case *ast.StructType:
							fields = ty.Fields.List
						case *ast.InterfaceType:
							fields = ty.Methods.List
						}
						for _, f := range fields {
							for _, n := range f.Names {
								m[s.Name.Name+"."+n.Name] = true
							}
							if len(f.Names) == 0 { // embedded: its name is its type's
								if n := typeName(f.Type); n != "" {
									m[s.Name.Name+"."+n] = true
								}
							}
						}
					}
				}
			}
		}
	})
	require.Contains(t, decl, "config", "the scan sees the packages")
	require.True(t, decl["config"]["WithRouter"], "the scan sees functions")

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	span := regexp.MustCompile("`[^`\n]+`")
	// pkg.Name[.Member], not preceded by a dot or a letter (a Java-style
	// service name such as org.minidubbo.monitor.MonitorService is not Go).
	ref := regexp.MustCompile(`(^|[^.\w])([a-z]+)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
	testFunc := regexp.MustCompile(`^(Test|Example|Benchmark|Fuzz)`)
	var missing []string
	checked := 0
	block := false
	for i, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "```") {
			block = !block
			continue
		}
		code := span.FindAllString(line, -1)
		if block {
			code = []string{line}
		}
		for _, c := range code {
			for _, r := range ref.FindAllStringSubmatch(c, -1) {
				names, ok := decl[r[2]]
				if !ok {
					continue // not one of ours (tls.Config, errors.As, ...)
				}
				name := r[2] + "." + r[3]
				if r[4] != "" && names[r[3]] {
					name += "." + r[4] // Type.Member
				}
				if notLanded[name] {
					continue
				}
				if (r[4] != "" && names[r[3]] && names[r[3]+"."+r[4]]) || (name == r[2]+"."+r[3] && names[r[3]]) ||
					(testFunc.MatchString(r[3]) && hasTestFunc(t, dirs[r[2]], r[3])) {
					checked++
					continue
				}
				missing = append(missing, "line "+strconv.Itoa(i+1)+": "+name)
			}
		}
	}
	require.Greater(t, checked, 100, "the README's names are seen")
	require.Empty(t, missing, "README.md names what its package does not declare (renamed? fix the README or notLanded):\n%s",
		strings.Join(missing, "\n"))
}

// typeName is the name of a receiver's or embedded field's type: T, *T,
// T[P], pkg.T.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// hasTestFunc reports whether a test file in dir declares func name.
func hasTestFunc(t *testing.T, dir, name string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		if strings.Contains(string(b), "\nfunc "+name+"(") {
			return true
		}
	}
	return false
}
