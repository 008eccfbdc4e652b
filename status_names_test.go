package minidubbo_test

import (
	"go/ast"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStatusNamesLiveInStatus: the status codes and the sentinel errors of
// calls are package status's, and no layer gives them names of its own
// (exchange used to re-export them as exchange.ErrConnLost,
// exchange.StatusOK, ...): every layer matches against status.ErrX, so
// there is one name for each.
func TestStatusNamesLiveInStatus(t *testing.T) {
	var aliases []string
	decls := 0
	parseFramework(t, func(pkg string, file *ast.File) {
		if pkg == "status" {
			return
		}
		for _, decl := range file.Decls {
			d, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					decls++
					for i, v := range s.Values {
						if sel, ok := v.(*ast.SelectorExpr); ok && isIdent(sel.X, "status") {
							aliases = append(aliases, pkg+"."+s.Names[i].Name+" = status."+sel.Sel.Name)
						}
					}
				case *ast.TypeSpec:
					if sel, ok := s.Type.(*ast.SelectorExpr); ok && s.Assign.IsValid() && isIdent(sel.X, "status") {
						aliases = append(aliases, pkg+"."+s.Name.Name+" = status."+sel.Sel.Name)
					}
				}
			}
		}
	})
	require.Greater(t, decls, 100, "the scan sees the declarations")
	require.Empty(t, aliases, "match against package status's names instead:\n%s", strings.Join(aliases, "\n"))
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
