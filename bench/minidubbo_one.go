//go:build !benchone || bench_minidubbo

package main

func init() {
	register(system{name: "minidubbo", serve: dubboServe, dial: dubboDial})
}
